"""shared.storage.local's LocalStore: atomic writes, temp files, and symlinks that can never lead outside the root.
The behaviour both stores share is tested once for both in test_store_contract.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rlfleet.shared.storage.local import LocalStore, atomic_write
from rlfleet.shared.storage.protocol import StorePathError


def _all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())


def _tmp_leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".tmp-")]


# ----- put / get ------------------------------------------------------------------------------------------


def test_root_is_created_and_resolved(tmp_path: Path) -> None:
    s = LocalStore(tmp_path / "a" / "b" / ".." / "store")
    assert s.root == (tmp_path / "a" / "store").resolve()
    assert s.root.is_dir()


def test_put_overwrites_atomically_and_leaves_no_temp_files(store: LocalStore) -> None:
    store.put("policies/v1.bin", b"first version")
    store.put("policies/v1.bin", b"second")
    store.put("policies/v1.bin", b"second")  # rewriting identical bytes is harmless
    assert store.get("policies/v1.bin") == b"second"
    assert _tmp_leftovers(store.root) == []
    assert _all_files(store.root) == ["policies/v1.bin"]


# ----- size / delete ----------------------------------------------------------------------------------------


# ----- path confinement -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "relpath",
    [
        "",
        "..",
        "../x",
        "a/../../x",
        "a/..",
        "./a",
        "a/./b",
        "/etc/passwd",
        "/abs",
        "a\\b",
        "..\\x",
        "a//b",
        "a/",
        "/",
        ".hidden",
        "a/.tmp-123",
        "a b",
        "a\nb",
        "a\n",
        "a\x00b",
        "C:\\x",
        "ü",
        "a/b/c/d/e/f/g/h/i",  # nine segments: more than the allowed eight
        "x" * 129,
    ],
)
def test_malformed_paths_rejected(store: LocalStore, relpath: str) -> None:
    with pytest.raises(StorePathError):
        store.resolve(relpath)
    with pytest.raises(StorePathError):
        store.put(relpath, b"data")


@pytest.mark.parametrize("relpath", [None, 3, b"a", Path("a")], ids=str)
def test_non_string_paths_rejected(store: LocalStore, relpath: object) -> None:
    with pytest.raises(StorePathError):
        store.resolve(relpath)  # type: ignore[arg-type]


@pytest.mark.parametrize("relpath", ["a", "a/b/c/d/e/f/g/h", "x" * 128, "A-b_c.d/e.f", "v..1", "0/1"])
def test_well_formed_paths_resolve_under_root(store: LocalStore, relpath: str) -> None:
    path = store.resolve(relpath)
    assert path == store.root / relpath
    store.put(relpath, b"ok")
    assert store.get(relpath) == b"ok"


def test_symlinked_directory_leaving_root_rejected(store: LocalStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    os.symlink(outside, store.root / "link")
    for method, args in [("resolve", ()), ("get", ()), ("size", ()), ("delete", ()), ("put", (b"pwned",))]:
        with pytest.raises(StorePathError, match="leaves the store root"):
            getattr(store, method)("link/secret", *args)
    assert (outside / "secret").read_bytes() == b"secret"  # neither overwritten nor deleted
    with pytest.raises(StorePathError):
        store.put("link/new-file", b"x")
    assert not (outside / "new-file").exists()


def test_symlinked_file_leaving_root_rejected(store: LocalStore, tmp_path: Path) -> None:
    target = tmp_path / "target.bin"
    target.write_bytes(b"outside")
    os.symlink(target, store.root / "file-link")
    with pytest.raises(StorePathError):
        store.get("file-link")
    with pytest.raises(StorePathError):
        store.put("file-link", b"overwrite")
    assert target.read_bytes() == b"outside"


def test_dangling_symlink_pointing_outside_rejected(store: LocalStore, tmp_path: Path) -> None:
    os.symlink(tmp_path / "does-not-exist-yet", store.root / "dangling")
    with pytest.raises(StorePathError):
        store.put("dangling", b"x")
    assert not (tmp_path / "does-not-exist-yet").exists()


def test_symlink_staying_inside_root_is_allowed(store: LocalStore) -> None:
    store.put("real/file", b"inside")
    os.symlink(store.root / "real", store.root / "alias")
    assert store.get("alias/file") == b"inside"


# ----- atomic_write -----------------------------------------------------------------------------------------


def test_atomic_write_creates_parents_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "file.bin"
    atomic_write(target, b"one")
    assert target.read_bytes() == b"one"
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]


def test_atomic_write_failure_keeps_old_content_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "file.bin"
    atomic_write(target, b"old")

    def boom(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.bin"]  # temp file removed


def test_atomic_write_onto_a_directory_fails_cleanly(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        atomic_write(tmp_path / "d", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_many_puts_leave_only_final_files(store: LocalStore) -> None:
    for i in range(20):
        store.put(f"chunks/t/{i}.msgpack", bytes([i]) * i)
    assert _tmp_leftovers(store.root) == []
    assert len(_all_files(store.root)) == 20
    assert [store.size(f"chunks/t/{i}.msgpack") for i in range(20)] == list(range(20))


# ----- deleting never follows symlinks ----------------------------------------------------------------------


def test_delete_removes_a_link_inside_the_root_not_its_target(store: LocalStore) -> None:
    store.put("chunks/t/real.msgpack", b"payload")
    os.symlink(store.root / "chunks/t/real.msgpack", store.root / "chunks/t/alias.msgpack")
    assert store.delete("chunks/t/alias.msgpack") is True
    assert not os.path.lexists(store.root / "chunks/t/alias.msgpack")
    assert store.get("chunks/t/real.msgpack") == b"payload"  # the target is untouched


def test_delete_removes_a_link_pointing_outside_as_a_link(store: LocalStore, tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_bytes(b"outside the store")
    os.symlink(target, store.root / "link")
    assert store.delete("link") is True
    assert not os.path.lexists(store.root / "link")
    assert target.read_bytes() == b"outside the store"


def test_delete_never_walks_through_a_linked_directory(store: LocalStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "c.msgpack").write_bytes(b"not ours")
    (store.root / "chunks").mkdir()
    os.symlink(outside, store.root / "chunks" / "t")
    store.put("real/c.msgpack", b"ours")
    os.symlink(store.root / "real", store.root / "inside-alias")  # even a link that stays inside
    for relpath in ("chunks/t/c.msgpack", "inside-alias/c.msgpack"):
        with pytest.raises(StorePathError, match="symlink"):
            store.delete(relpath)
    assert (outside / "c.msgpack").read_bytes() == b"not ours"
    assert store.get("real/c.msgpack") == b"ours"


def test_delete_of_a_dangling_link_removes_the_link(store: LocalStore, tmp_path: Path) -> None:
    os.symlink(tmp_path / "gone", store.root / "dangling")
    assert store.delete("dangling") is True and not os.path.lexists(store.root / "dangling")
    assert store.delete("dangling") is False


def test_delete_refuses_a_directory(store: LocalStore) -> None:
    store.put("chunks/t/c.msgpack", b"x")
    with pytest.raises(StorePathError, match="neither a file nor a link"):
        store.delete("chunks/t")
    assert store.get("chunks/t/c.msgpack") == b"x"


def test_delete_unreferenced_touches_only_regular_files_inside(store: LocalStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.msgpack").write_bytes(b"not ours")
    victim_file = tmp_path / "victim-file"
    victim_file.write_bytes(b"not ours either")
    store.put("chunks/t/orphan.msgpack", b"orphan")
    store.put("chunks/t/kept.msgpack", b"referenced")
    os.symlink(outside, store.root / "chunks" / "linked-dir")
    os.symlink(victim_file, store.root / "chunks" / "t" / "linked-file.msgpack")
    old = time.time() - 3600
    for path in (store.root / "chunks/t/orphan.msgpack", store.root / "chunks/t/kept.msgpack",
                 outside / "victim.msgpack", victim_file):
        os.utime(path, (old, old))
    deleted = store.delete_unreferenced("chunks", {"chunks/t/kept.msgpack"}, time.time() - 60)
    assert deleted == 1
    assert _all_files(store.root) == ["chunks/linked-dir", "chunks/t/kept.msgpack", "chunks/t/linked-file.msgpack"]
    assert (outside / "victim.msgpack").read_bytes() == b"not ours"
    assert victim_file.read_bytes() == b"not ours either"


def test_delete_unreferenced_under_a_linked_prefix_does_nothing(store: LocalStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "t").mkdir(parents=True)
    (outside / "t" / "old.msgpack").write_bytes(b"not ours")
    os.utime(outside / "t" / "old.msgpack", (0, 0))
    os.symlink(outside, store.root / "chunks")
    assert store.delete_unreferenced("chunks", set(), time.time()) == 0
    assert (outside / "t" / "old.msgpack").exists()


def test_delete_unreferenced_of_a_nested_prefix_reports_root_relative_paths(store: LocalStore) -> None:
    store.put("chunks/t/a.msgpack", b"a")
    store.put("chunks/t/b.msgpack", b"b")
    for name in ("a", "b"):
        os.utime(store.root / f"chunks/t/{name}.msgpack", (0, 0))
    assert store.delete_unreferenced("chunks/t", {"chunks/t/a.msgpack"}, time.time()) == 1
    assert _all_files(store.root) == ["chunks/t/a.msgpack"]
    assert store.delete_unreferenced("never-written", set(), time.time()) == 0


def test_delete_many_removes_files_across_directories_and_skips_what_it_must_not_touch(
        store: LocalStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me")
    for path in ("chunks/a/1.msgpack", "chunks/a/2.msgpack", "chunks/b/3.msgpack"):
        store.put(path, b"x")
    (store.root / "chunks" / "a" / "link").symlink_to(outside)
    (store.root / "chunks" / "a" / "dir").mkdir()
    (store.root / "chunks" / "c").symlink_to(tmp_path)  # a linked directory: never entered
    deleted = store.delete_many(["chunks/a/1.msgpack", "chunks/a/dir", "chunks/a/gone.msgpack", "chunks/a/link",
                                 "chunks/b/3.msgpack", "chunks/c/outside.txt", "chunks/a/2.msgpack"])
    assert deleted == 4  # 1, 2, 3 and the link itself
    assert outside.read_bytes() == b"keep me"
    assert (store.root / "chunks" / "a" / "dir").is_dir()
    assert sorted(p.name for p in (store.root / "chunks").rglob("*") if p.is_file()) == []
