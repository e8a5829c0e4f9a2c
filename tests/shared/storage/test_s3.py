"""The object store's settings and its bad days: every wrong setting is refused or retried naming the setting,
and credentials never appear in what is logged. Against a real SeaweedFS on loopback (tests/support/seaweed.py)."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest

from rlfleet.launcher.up import free_port
from rlfleet.shared.storage.factory import StoreConfigError, StoreSettings, StoreTarget, open_store
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import StoreUnavailable
from rlfleet.shared.storage.s3 import S3Store
from rlfleet.shared.worker.lifecycle import EXIT_UNAVAILABLE, run_worker
from rlfleet.shared.worker.settings import WorkerSettings
from tests.support.seaweed import SECRET_KEY, SeaweedFS


def target(url: str, endpoint: str = "", env: dict[str, str] | None = None) -> StoreTarget | None:
    return StoreSettings(store_url=url, s3_endpoint_url=endpoint).store_target({} if env is None else env)


# ----- settings --------------------------------------------------------------------------------------------


def test_no_url_means_the_run_directory(tmp_path: Path) -> None:
    assert target("") is None and target("  ") is None
    layout = RunLayout(tmp_path, "r")
    stores = {area: open_store(layout, area) for area in ("store", "checkpoints", "best")}
    roots = {area: s.root for area, s in stores.items() if isinstance(s, LocalStore)}
    assert roots == {"store": layout.store_root.resolve(), "checkpoints": layout.checkpoints.resolve(),
                     "best": layout.best.resolve()}


def test_an_s3_url_gives_one_prefix_per_run_and_area() -> None:
    t = target("s3://rl-bucket/team/a/", "http://127.0.0.1:8333")
    assert t == StoreTarget("rl-bucket", "team/a", "http://127.0.0.1:8333", 60.0)
    store = open_store(RunLayout(Path("unused"), "cartpole__s0", t), "checkpoints")
    assert isinstance(store, S3Store)
    assert (store.bucket, store.prefix) == ("rl-bucket", "team/a/runs/cartpole__s0/checkpoints")
    bare = open_store(RunLayout(Path("unused"), "r", target("s3://rl-bucket", "http://h:1")), "store")
    assert isinstance(bare, S3Store) and bare.prefix == "runs/r/store"


def test_the_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLFLEET_STORE_URL", "s3://rl-bucket/p")
    monkeypatch.setenv("RLFLEET_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    assert WorkerSettings().store_target() == StoreTarget("rl-bucket", "p", "http://127.0.0.1:9", 60.0)


def test_an_s3_url_without_an_endpoint_is_refused_unless_it_is_aws() -> None:
    with pytest.raises(StoreConfigError, match="needs RLFLEET_S3_ENDPOINT_URL.*AWS_DEFAULT_REGION"):
        target("s3://rl-bucket/p")
    aws = target("s3://rl-bucket/p", env={"AWS_DEFAULT_REGION": "eu-west-1"})  # AWS itself: no endpoint needed
    assert aws is not None and aws.endpoint_url is None


@pytest.mark.parametrize(("url", "endpoint", "message"), [
    ("file:///data", "", "RLFLEET_STORE_URL=.*only s3://"),
    ("s3://", "http://h:1", "RLFLEET_STORE_URL=.*not a valid bucket"),
    ("s3://Upper_Case/p", "http://h:1", "RLFLEET_STORE_URL=.*not a valid bucket"),
    ("s3://ab/p", "http://h:1", "RLFLEET_STORE_URL=.*not a valid bucket"),
    ("s3://rl-bucket/../up", "http://h:1", "RLFLEET_STORE_URL=.*prefix"),
    ("s3://rl-bucket/a//b", "http://h:1", "RLFLEET_STORE_URL=.*prefix"),
    ("s3://rl-bucket/p", "ftp://h:1", "RLFLEET_S3_ENDPOINT_URL=.*http"),
    ("s3://rl-bucket/p", "http://h:1/path?x", "RLFLEET_S3_ENDPOINT_URL="),
])
def test_malformed_settings_are_refused_naming_the_setting(url: str, endpoint: str, message: str) -> None:
    with pytest.raises(StoreConfigError, match=message):
        target(url, endpoint)


def test_a_worker_with_a_refused_setting_exits_2_before_contacting_anyone(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    settings = WorkerSettings(store_url="s3://rl-bucket/p", s3_endpoint_url="", token="t",
                              coordinator_url="http://127.0.0.1:9", max_unavailable_seconds=0.1)
    with caplog.at_level(logging.ERROR):
        assert run_worker(settings, "collector", lambda session, layout: None) == EXIT_UNAVAILABLE
    assert "RLFLEET_S3_ENDPOINT_URL" in caplog.text


# ----- a store that cannot be used: retried with backoff, then StoreUnavailable naming the setting ---------


def test_an_unreachable_endpoint_is_retried_then_named(s3_env: SeaweedFS, caplog: pytest.LogCaptureFixture) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = S3Store(s3_env.shared_bucket, "p", dead, retry_seconds=1.5)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(StoreUnavailable, match=f"RLFLEET_S3_ENDPOINT_URL={dead}"):
        store.put("chunks/t/x.msgpack", b"x")
    assert time.monotonic() - started >= 0.5  # it did retry (botocore's own tries, then our first 0.5 s backoff)
    assert caplog.text.count("retrying in") >= 1


def test_wrong_credentials_are_named_and_never_logged(s3_env: SeaweedFS, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    store = S3Store(s3_env.shared_bucket, "p", s3_env.endpoint, retry_seconds=1)
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreUnavailable, match="AWS_ACCESS_KEY_ID") as err:
        store.check()
    with pytest.raises(StoreUnavailable, match="AWS_SECRET_ACCESS_KEY"):
        store.put("x", b"x")
    for secret in ("wrong-secret-value", SECRET_KEY):
        assert secret not in str(err.value) and secret not in caplog.text


def test_a_credentials_file_is_used_when_the_environment_has_none(s3_env: SeaweedFS, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[default]\naws_access_key_id = {s3_env.env['AWS_ACCESS_KEY_ID']}\n"
                           f"aws_secret_access_key = {s3_env.env['AWS_SECRET_ACCESS_KEY']}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    store = S3Store(s3_env.shared_bucket, "credfile", s3_env.endpoint, retry_seconds=1)
    store.check()
    store.put("x", b"from a credentials file")
    assert store.get("x") == b"from a credentials file"
    credentials.write_text("")  # and none at all: named as such
    monkeypatch.setenv("AWS_CONFIG_FILE", str(credentials))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata to ask on this machine
    with pytest.raises(StoreUnavailable, match="no usable AWS credentials"):
        S3Store(s3_env.shared_bucket, "credfile", s3_env.endpoint, retry_seconds=0.5).check()


def test_a_missing_bucket_is_named_at_the_start_check(s3_env: SeaweedFS) -> None:
    store = S3Store("no-such-bucket-here", "p", s3_env.endpoint, retry_seconds=0.5)
    with pytest.raises(StoreUnavailable, match="bucket 'no-such-bucket-here' \\(RLFLEET_STORE_URL\\) does not exist"):
        store.check()


def test_store_init_creates_the_bucket_once(s3_env: SeaweedFS, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from rlfleet.launcher.cli import app

    bucket = f"init-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("RLFLEET_STORE_URL", f"s3://{bucket}/fleet")
    first = CliRunner().invoke(app, ["store-init"])
    assert first.exit_code == 0 and f"bucket {bucket} created" in first.output, first.output
    again = CliRunner().invoke(app, ["store-init"])
    assert again.exit_code == 0 and "already there" in again.output
    monkeypatch.setenv("RLFLEET_S3_ENDPOINT_URL", "nope")
    refused = CliRunner().invoke(app, ["store-init"])
    assert refused.exit_code == 2 and "RLFLEET_S3_ENDPOINT_URL" in refused.output
