"""shared.tokens: the scoped tokens file (mode 0600, idempotent) and its validation."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from rlfleet.shared.tokens import SCOPES, generate_tokens_file, load_token_file, load_tokens_file, new_token, write_token_file
from rlfleet.shared.worker.settings import WorkerSettings


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_token_can_follow_its_flag_on_a_command_line() -> None:
    # A token starting with "-" is parsed as an option by argparse (`--token -0BEY...`); base64url gave one such
    # token in 64 and failed CI that way. Under base64url, 2,000 tokens hold such a start with probability 1 - 2e-14.
    tokens = [new_token() for _ in range(2000)]
    assert not [t for t in tokens if t.startswith("-")]
    assert all(len(t) == 64 and int(t, 16) >= 0 for t in tokens)  # 256 bits, hex
    assert len(set(tokens)) == len(tokens)


def test_generated_file_has_mode_0600_and_all_scopes(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "tokens.json"
    tokens = generate_tokens_file(path)
    assert _mode(path) == 0o600
    assert set(tokens) == set(SCOPES) == {"collector", "learner", "evaluator", "admin", "read"}
    assert all(isinstance(t, str) and len(t) >= 32 for t in tokens.values())
    assert len(set(tokens.values())) == len(SCOPES)  # every scope gets its own token
    assert json.loads(path.read_text()) == tokens
    assert sorted(p.name for p in path.parent.iterdir()) == ["tokens.json"]  # temp file renamed away


def test_mode_is_0600_even_with_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        generate_tokens_file(tmp_path / "tokens.json")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "tokens.json") == 0o600


def test_generate_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    first = generate_tokens_file(path)
    before = path.read_bytes()
    second = generate_tokens_file(path)
    assert second == first
    assert path.read_bytes() == before
    assert load_tokens_file(path) == first


def test_tokens_differ_between_files(tmp_path: Path) -> None:
    a = generate_tokens_file(tmp_path / "a.json")
    b = generate_tokens_file(tmp_path / "b.json")
    assert set(a.values()).isdisjoint(b.values())


def test_generate_on_a_bad_existing_file_refuses_instead_of_overwriting(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read tokens file"):
        generate_tokens_file(path)
    assert path.read_text() == "{not json"


def test_stale_world_readable_temp_file_does_not_leak_mode(tmp_path: Path) -> None:
    stale = tmp_path / "tokens.tmp"
    stale.write_text("leftover")
    stale.chmod(0o644)
    generate_tokens_file(tmp_path / "tokens.json")
    assert _mode(tmp_path / "tokens.json") == 0o600


def test_fixture_tokens_file(tokens: dict[str, str], data_dir: Path) -> None:
    assert load_tokens_file(data_dir / "tokens.json") == tokens
    assert _mode(data_dir / "tokens.json") == 0o600


# ----- bad files --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "cannot read tokens file"),
        ("{not json", "cannot read tokens file"),
        (b"\xff\xfe\x00garbage", "cannot read tokens file"),
        ("[]", "must map scope names to tokens of at least 16 characters"),
        ('"a string"', "must map scope names"),
        ("null", "must map scope names"),
        ('{"collector": "short"}', "at least 16 characters"),
        ('{"collector": 1234567890123456789}', "at least 16 characters"),
        ('{"collector": null}', "at least 16 characters"),
        ('{"collector": ["aaaaaaaaaaaaaaaaaaaa"]}', "at least 16 characters"),
        ('{"root": "aaaaaaaaaaaaaaaaaaaa"}', "unknown scopes ['root']"),
        ('{"admin": "aaaaaaaaaaaaaaaaaaaa", "Admin": "bbbbbbbbbbbbbbbbbbbb"}', "unknown scopes ['Admin']"),
    ],
    ids=["empty", "broken-json", "binary", "list", "string", "null", "short", "int", "null-token",
         "list-token", "unknown-scope", "case"],
)
def test_bad_files_rejected_with_clear_value_error(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = tmp_path / "tokens.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError) as info:
        load_tokens_file(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)  # says which file


def test_missing_file_points_at_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rlfleet secrets"):
        load_tokens_file(tmp_path / "nope.json")


def test_subset_of_scopes_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"collector": "c" * 16}))
    assert load_tokens_file(path) == {"collector": "c" * 16}


# ----- token resolution in worker settings ------------------------------------------------------------------


def test_worker_settings_resolve_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RLFLEET_TOKEN", "RLFLEET_TOKEN_FILE", "RLFLEET_TOKENS_FILE"):
        monkeypatch.delenv(var, raising=False)
    tokens = generate_tokens_file(tmp_path / "tokens.json")
    assert WorkerSettings(tokens_file=tmp_path / "tokens.json").resolve_token("learner") == tokens["learner"]
    assert WorkerSettings(token="explicit-token-xyz").resolve_token("learner") == "explicit-token-xyz"
    with pytest.raises(ValueError, match="RLFLEET_TOKEN"):
        WorkerSettings().resolve_token("collector")
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"collector": "c" * 16}))
    with pytest.raises(ValueError, match="no 'learner' token"):
        WorkerSettings(tokens_file=partial).resolve_token("learner")


# ----- one scope's token alone (compose mounts one per worker) ---------------------------------------------


def test_token_file_holds_one_token_with_mode_0600_and_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "collector" / "token"
    write_token_file(path, "a" * 20)
    assert _mode(path) == 0o600 and load_token_file(path) == "a" * 20
    write_token_file(path, "b" * 20)  # tokens.json regenerated: the scope file follows it
    assert load_token_file(path) == "b" * 20
    assert sorted(p.name for p in path.parent.iterdir()) == ["token"]


@pytest.mark.parametrize(("content", "message"), [
    ("", "at least 16 characters"), ("short\n", "at least 16 characters"),
    ("a" * 16 + " " + "b" * 16, "one token"), (None, "cannot read token file"),
])
def test_bad_token_file_refused_naming_the_file_never_the_token(tmp_path: Path, content: str | None,
                                                                 message: str) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        load_token_file(path)
    assert str(path) in str(info.value)
    assert content is None or not content.strip() or content.strip() not in str(info.value)


def test_worker_settings_prefer_their_own_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RLFLEET_TOKEN_FILE (one scope's token) comes before RLFLEET_TOKENS_FILE, after RLFLEET_TOKEN."""
    for var in ("RLFLEET_TOKEN", "RLFLEET_TOKEN_FILE", "RLFLEET_TOKENS_FILE"):
        monkeypatch.delenv(var, raising=False)
    tokens = generate_tokens_file(tmp_path / "tokens.json")
    write_token_file(tmp_path / "learner.token", tokens["learner"])
    monkeypatch.setenv("RLFLEET_TOKEN_FILE", str(tmp_path / "learner.token"))
    assert WorkerSettings().resolve_token("learner") == tokens["learner"]
    write_token_file(tmp_path / "own.token", "o" * 20)
    both = WorkerSettings(tokens_file=tmp_path / "tokens.json", token_file=tmp_path / "own.token")
    assert both.resolve_token("learner") == "o" * 20
    assert WorkerSettings(token="explicit-token-xyz").resolve_token("learner") == "explicit-token-xyz"
    with pytest.raises(ValueError, match="cannot read token file"):
        WorkerSettings(token_file=tmp_path / "missing").resolve_token("learner")
