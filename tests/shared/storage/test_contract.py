"""The PayloadStore contract, run against both implementations: the local directory and an S3-compatible object
store (a real SeaweedFS on loopback). What only one of them has (symlink safety, temp files, retries) is tested
in test_store.py and test_s3store.py."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore, StorePathError, sha256_hex
from rlfleet.shared.storage.s3 import S3Store
from tests.support.seaweed import SeaweedFS


@dataclass
class Backend:
    """A way to open stores of one implementation, and to change an object behind a store's back."""

    open: Callable[[str], PayloadStore]  # a store at the given sub-location (directory / key prefix)
    tamper: Callable[[PayloadStore, str, bytes], None]


def _local(tmp_path: Path) -> Backend:
    def tamper(store: PayloadStore, relpath: str, data: bytes) -> None:
        assert isinstance(store, LocalStore)
        (store.root / relpath).write_bytes(data)

    return Backend(lambda where: LocalStore(tmp_path / where), tamper)


def _s3(server: SeaweedFS) -> Backend:
    bucket, client, test = server.shared_bucket, server.client(), uuid.uuid4().hex  # a prefix of its own per test

    def tamper(store: PayloadStore, relpath: str, data: bytes) -> None:
        assert isinstance(store, S3Store)
        client.put_object(Bucket=bucket, Key=f"{store.prefix}/{relpath}", Body=data)

    return Backend(lambda where: S3Store(bucket, f"{test}/{where}", server.endpoint, retry_seconds=2), tamper)


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return _local(tmp_path)
    return _s3(request.getfixturevalue("s3_env"))


@pytest.fixture
def store(backend: Backend) -> PayloadStore:
    return backend.open("store")


def test_put_then_get_round_trips_and_returns_sha256(store: PayloadStore) -> None:
    data = b"\x00payload\xff" * 100
    sha = store.put("chunks/collector-0/abc.msgpack", data)
    assert sha == hashlib.sha256(data).hexdigest() == sha256_hex(data)
    assert store.get("chunks/collector-0/abc.msgpack") == data
    assert store.get("chunks/collector-0/abc.msgpack", sha256=sha) == data
    assert store.size("chunks/collector-0/abc.msgpack") == len(data)


def test_put_overwrites_and_rewriting_identical_bytes_is_harmless(store: PayloadStore) -> None:
    store.put("policies/v1.bin", b"first version")
    store.put("policies/v1.bin", b"second")
    store.put("policies/v1.bin", b"second")
    assert store.get("policies/v1.bin") == b"second"
    assert store.list_prefix("") == ["policies/v1.bin"]  # no temp objects left behind


def test_empty_object_round_trips(store: PayloadStore) -> None:
    sha = store.put("e", b"")
    assert sha == hashlib.sha256(b"").hexdigest()
    assert store.get("e", sha256=sha) == b""
    assert store.size("e") == 0


def test_get_with_wrong_sha_raises_integrity_error(store: PayloadStore, backend: Backend) -> None:
    sha = store.put("chunks/t/c.msgpack", b"original")
    backend.tamper(store, "chunks/t/c.msgpack", b"tampered")  # changed behind the store's back
    with pytest.raises(IntegrityError, match="sha256"):
        store.get("chunks/t/c.msgpack", sha256=sha)
    with pytest.raises(IntegrityError):
        store.get("chunks/t/c.msgpack", sha256="0" * 64)
    assert store.get("chunks/t/c.msgpack") == b"tampered"  # no sha: no verification


def test_get_enforces_max_bytes(store: PayloadStore) -> None:
    store.put("big", b"x" * 101)
    assert store.get("big", max_bytes=101) == b"x" * 101
    with pytest.raises(IntegrityError, match="100-byte limit"):
        store.get("big", max_bytes=100)


def test_a_missing_object_is_file_not_found_or_none(store: PayloadStore) -> None:
    with pytest.raises(FileNotFoundError):
        store.get("chunks/t/missing.msgpack")
    assert store.size("chunks/t/missing.msgpack") is None


def test_size_and_delete_semantics(store: PayloadStore) -> None:
    store.put("chunks/t/c.msgpack", b"12345")
    assert store.size("chunks/t/c.msgpack") == 5
    assert store.delete("chunks/t/c.msgpack") is True
    assert store.size("chunks/t/c.msgpack") is None
    assert store.delete("chunks/t/c.msgpack") is False  # already gone: not an error
    assert store.delete("never/existed") is False


def test_delete_many_across_directories(store: PayloadStore) -> None:
    for path in ("chunks/a/1.msgpack", "chunks/a/2.msgpack", "chunks/b/3.msgpack", "chunks/b/4.msgpack"):
        store.put(path, b"x")
    assert store.delete_many(["chunks/a/1.msgpack", "chunks/b/3.msgpack", "chunks/a/2.msgpack", "../x"]) == 3
    assert store.list_prefix("chunks") == ["chunks/b/4.msgpack"]
    assert store.delete_many([]) == 0


def test_list_prefix_is_sorted_recursive_and_exact_about_the_directory(store: PayloadStore) -> None:
    for path in ("chunks/t2/b.msgpack", "chunks/t1/a.msgpack", "chunks/t1/c.msgpack", "chunksx/d", "top.pt"):
        store.put(path, b"x")
    assert store.list_prefix("chunks") == ["chunks/t1/a.msgpack", "chunks/t1/c.msgpack", "chunks/t2/b.msgpack"]
    assert store.list_prefix("chunks/t2") == ["chunks/t2/b.msgpack"]
    assert store.list_prefix("") == ["chunks/t1/a.msgpack", "chunks/t1/c.msgpack", "chunks/t2/b.msgpack",
                                     "chunksx/d", "top.pt"]
    assert store.list_prefix("never-written") == []


def test_delete_unreferenced_keeps_what_is_referenced_or_young(store: PayloadStore) -> None:
    for path in ("chunks/t/kept.msgpack", "chunks/t/orphan.msgpack", "chunks/u/orphan.msgpack", "policies/v1"):
        store.put(path, b"x")
    # Everything was written just now: an `older_than` an hour ago makes all of it too young to collect.
    assert store.delete_unreferenced("chunks", set(), time.time() - 3600) == 0
    # An `older_than` in the future makes all of it old enough (store clocks may be second-granular).
    assert store.delete_unreferenced("chunks", {"chunks/t/kept.msgpack"}, time.time() + 5) == 2
    assert store.list_prefix("") == ["chunks/t/kept.msgpack", "policies/v1"]  # outside the prefix: untouched
    assert store.delete_unreferenced("never-written", set(), time.time() + 5) == 0


def test_stores_at_different_locations_never_see_each_other(backend: Backend) -> None:
    one, other = backend.open("run-a/store"), backend.open("run-b/store")
    one.put("chunks/t/x.msgpack", b"a")
    assert other.size("chunks/t/x.msgpack") is None
    assert other.list_prefix("") == []
    assert other.delete_unreferenced("chunks", set(), time.time() + 5) == 0
    assert other.delete_many(["chunks/t/x.msgpack"]) in (0, 1)  # S3 counts absent keys as deleted
    assert one.get("chunks/t/x.msgpack") == b"a"


@pytest.mark.parametrize("method", ["get", "size", "delete", "put", "list_prefix"])
@pytest.mark.parametrize("relpath", ["../escape", "/abs", "a/../../x", ".hidden", "a//b", "a\\b", "a/", "x" * 129])
def test_every_method_refuses_a_path_that_could_leave_the_store(store: PayloadStore, method: str,
                                                                relpath: str) -> None:
    args: tuple[object, ...] = (relpath, b"x") if method == "put" else (relpath,)
    with pytest.raises(StorePathError):
        getattr(store, method)(*args)
    assert store.list_prefix("") == []


def test_describe_says_where_without_credentials(store: PayloadStore) -> None:
    text = store.describe()
    assert "store" in text
    assert "secret" not in text.lower()
