"""The one factory that turns the store settings into a run's stores, for every service.

`RLFLEET_STORE_URL` unset or empty keeps everything in the run directory, as always: payloads and policies in
`<run dir>/store`, learner checkpoints in `<run dir>/checkpoints`, the best policy in `<run dir>/best`.
`s3://bucket/prefix` puts the same three areas under `prefix/runs/<run name>/{store,checkpoints,best}/` of
that bucket, so no service needs a shared filesystem. Settings are checked when a service starts, and a
mistake is refused naming the setting, before any work is done.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import PayloadStore, StorePathError, check_path

if TYPE_CHECKING:
    from rlfleet.shared.storage.layout import RunLayout
    from rlfleet.shared.storage.s3 import S3Store

Area = Literal["store", "checkpoints", "best"]
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")  # S3's bucket naming rules (no uppercase, no _)
_ENDPOINT = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(:\d+)?/?$")
_REGION_VARS = ("AWS_DEFAULT_REGION", "AWS_REGION")


class StoreConfigError(ValueError):
    """The store settings cannot work; the message names the setting."""


@dataclass(frozen=True)
class StoreTarget:
    """A parsed, validated `s3://` store: where the objects go (the local store needs no target)."""

    bucket: str
    prefix: str
    endpoint_url: str | None
    retry_seconds: float


class StoreSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RLFLEET_", extra="ignore")

    store_url: str = Field("", description=(
        "where payloads, policies, checkpoints and the best policy go: empty for the run directory, "
        "s3://bucket/prefix for an S3-compatible object store"))
    s3_endpoint_url: str = Field("", description=(
        "the S3-compatible server, e.g. http://127.0.0.1:8333 (empty only for AWS itself, with AWS_DEFAULT_REGION)"))
    store_retry_seconds: float = Field(60.0, gt=0, description=(
        "how long one store call retries an unreachable or misconfigured object store before giving up"))

    def store_target(self, environ: dict[str, str] | None = None) -> StoreTarget | None:
        """None for the local directory; the object store's target; StoreConfigError naming the bad setting."""
        url = self.store_url.strip()
        if not url:
            return None
        if not url.startswith("s3://"):
            raise StoreConfigError(f"RLFLEET_STORE_URL={url!r}: only s3://bucket/prefix is understood (leave it "
                                   "empty for the run directory)")
        bucket, _, prefix = url[len("s3://"):].partition("/")
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise StoreConfigError(f"RLFLEET_STORE_URL={url!r}: {bucket!r} is not a valid bucket name (3-63 "
                                   "lowercase letters, digits, '.' or '-')")
        prefix = prefix.strip("/")
        if prefix:
            try:
                check_path(prefix)
            except StorePathError:
                raise StoreConfigError(f"RLFLEET_STORE_URL={url!r}: the prefix {prefix!r} must be relative "
                                       "segments of [A-Za-z0-9_.-] (no '..')") from None
        endpoint = self.s3_endpoint_url.strip()
        env = os.environ if environ is None else environ
        if endpoint and not _ENDPOINT.fullmatch(endpoint):
            raise StoreConfigError(f"RLFLEET_S3_ENDPOINT_URL={endpoint!r} must be http(s)://host[:port]")
        if not endpoint and not any(env.get(name) for name in _REGION_VARS):
            raise StoreConfigError(
                f"RLFLEET_STORE_URL={url} needs RLFLEET_S3_ENDPOINT_URL, the S3-compatible server to use (e.g. "
                "http://127.0.0.1:8333); for AWS S3 itself leave it empty and set AWS_DEFAULT_REGION")
        return StoreTarget(bucket, prefix, endpoint or None, self.store_retry_seconds)


def open_store(layout: RunLayout, area: Area) -> PayloadStore:
    """The store of one area of the run: a directory of the run, or a prefix of the bucket."""
    target = layout.store
    if target is None:
        return LocalStore(layout.run_dir / area)
    return object_store(target, "/".join(p for p in (target.prefix, "runs", layout.run_name, area) if p))


def open_datasets(data_dir: Path, target: StoreTarget | None) -> PayloadStore:
    """The dataset store (shared/payloads/recordings.py): beside the runs, never inside one, so no run's eviction or
    orphan sweep can reach a recording and every run of the data directory (or bucket prefix) can train on it."""
    if target is None:
        return LocalStore(data_dir / "datasets")
    return object_store(target, "/".join(p for p in (target.prefix, "datasets") if p))


def object_store(target: StoreTarget, prefix: str) -> S3Store:
    """The object store of `target` at `prefix` of its bucket (`open_store` adds the run's part)."""
    from rlfleet.shared.storage.s3 import S3Store  # boto3 is imported only by services that use an object store

    return S3Store(target.bucket, prefix, target.endpoint_url, retry_seconds=target.retry_seconds)


def check_store(target: StoreTarget | None) -> None:
    """At service start: reach the object store once, so that a wrong endpoint, credentials or bucket is named
    (and retried with backoff) before any work; nothing to check for the local directory."""
    if target is not None:
        object_store(target, target.prefix).check()
