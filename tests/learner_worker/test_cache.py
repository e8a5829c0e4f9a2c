"""ChunkCache on a real LocalStore: gathers, unreadable payloads and the LRU bound."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.dqn import DQN
from rlfleet.learner_worker.cache import ChunkCache, PayloadReader
from rlfleet.learner_worker.loops import cache_chunks
from rlfleet.learner_worker.nstep import nstep_targets
from rlfleet.shared.algorithms.dqn import DQNParams
from rlfleet.shared.config.run_config import NetConfig, RunConfig
from rlfleet.shared.payloads.codec import encode_chunk
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.storage.layout import chunk_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.wire import Directive, SampledChunk
from tests.support.policies import EPSILON_GREEDY, flat_spaces, learner_task
from tests.support.stored_chunks import GAMMA, NSTEP, SCHEMA, D, N, StoredChunks, T, numbered_arrays, transition_reply

torch.set_num_threads(1)


def random_pairs(count: int, seed: int, chunks=(0, 1, 2)) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [(int(rng.choice(chunks)), int(rng.integers(0, T * N))) for _ in range(count)]


def check_rows(fx: StoredChunks, batch: dict[str, np.ndarray]) -> list[tuple[int, int]]:
    """Every row equals the source chunk's transition at the offset named by its obs; returns the pairs."""
    targets = {k: nstep_targets(a["rewards"], a["terminated"], a["truncated"], a["next_obs"], GAMMA, NSTEP)
               for k, a in fx.arrays.items()}
    seen = []
    for row in range(len(batch["obs"])):
        number, offset = int(batch["obs"][row, 0]), int(batch["obs"][row, 1])
        src = fx.arrays[number]
        returns, boot_obs, discount = targets[number]
        np.testing.assert_array_equal(batch["obs"][row], src["obs"].reshape(-1, D)[offset])
        assert batch["actions"][row] == src["actions"].reshape(-1)[offset]
        assert batch["returns"][row] == returns.reshape(-1)[offset]
        np.testing.assert_array_equal(batch["boot_obs"][row], boot_obs.reshape(-1, D)[offset])
        assert batch["discount"][row] == discount.reshape(-1)[offset]
        seen.append((number, offset))
    return seen


def test_full_batches_with_correct_rows(fx: StoredChunks):
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    pairs = random_pairs(24, seed=1)
    batches = cache.batches(fx.sample(pairs, batch_size=8))
    assert len(batches) == 3
    seen = []
    for batch in batches:
        assert set(batch) == {"obs", "actions", "returns", "boot_obs", "discount", "ids", "weights"}
        assert all(len(v) == 8 for v in batch.values())
        # ids travel with their rows (they are the draw positions here): priorities go back to the right items
        for row, item in enumerate(batch["ids"]):
            assert pairs[item] == (int(batch["obs"][row, 0]), int(batch["obs"][row, 1]))
        assert batch["obs"].shape == (8, D) and batch["boot_obs"].shape == (8, D)
        assert batch["obs"].dtype == np.float32 and batch["actions"].dtype == np.int64
        assert batch["returns"].dtype == np.float32 and batch["discount"].dtype == np.float32
        seen += check_rows(fx, batch)
    # exactly the sampled transitions, each as many times as it was sampled
    assert Counter(seen) == Counter(pairs)
    assert (cache.loaded, cache.missing, cache.corrupt) == (3, 0, 0)


def test_rows_reference_the_right_chunk_when_reply_order_differs(fx: StoredChunks):
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    pairs = [(2, 5), (0, 15), (1, 0), (2, 1)]
    (batch,) = cache.batches(fx.sample(pairs, batch_size=4, chunks=[2, 0, 1]))
    assert Counter(check_rows(fx, batch)) == Counter(pairs)


def test_partial_batch_is_dropped(fx: StoredChunks):
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    batches = cache.batches(fx.sample(random_pairs(21, seed=2), batch_size=8))
    assert [len(b["obs"]) for b in batches] == [8, 8]


def test_missing_file_drops_its_references(fx: StoredChunks):
    fx.store.delete(fx.refs[1].payload_path)
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    pairs = [(k, off) for k in range(3) for off in range(8)]  # 8 refs per chunk
    batches = cache.batches(fx.sample(pairs, batch_size=4))
    assert cache.missing == 1 and cache.corrupt == 0 and cache.loaded == 2
    assert len(batches) == 4  # 16 readable refs left
    seen = [pair for batch in batches for pair in check_rows(fx, batch)]
    assert Counter(seen) == Counter(p for p in pairs if p[0] != 1)


def test_corrupt_file_is_dropped(fx: StoredChunks):
    path = fx.store.resolve(fx.refs[0].payload_path)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    pairs = [(k, off) for k in range(3) for off in range(4)]
    batches = cache.batches(fx.sample(pairs, batch_size=4))
    assert cache.corrupt == 1 and cache.missing == 0
    seen = [pair for batch in batches for pair in check_rows(fx, batch)]
    assert Counter(seen) == Counter(p for p in pairs if p[0] != 0)


def test_undecodable_file_with_matching_sha_is_dropped(fx: StoredChunks):
    """A sha that matches garbage (a hostile collector) still cannot get past decoding."""
    bad_path = chunk_path("task1", "bad")
    bad = SampledChunk(chunk_id="bad", payload_path=bad_path, sha256=fx.store.put(bad_path, b"\x93not msgpack"),
                       policy_version=0, num_envs=N, env_steps=T * N)
    arrays = numbered_arrays(9)
    arrays["next_obs"] = arrays["next_obs"][:-1]  # inconsistent shapes
    shape_path = chunk_path("task1", "shape")
    shape = SampledChunk(chunk_id="shape", payload_path=shape_path,
                         sha256=fx.store.put(shape_path, encode_chunk(arrays)), policy_version=0,
                         num_envs=N, env_steps=T * N)
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    reply = transition_reply(chunks=[bad, fx.refs[0], shape], chunk_index=[0, 1, 2, 1], offsets=[0, 3, 0, 4],
                           batch_size=2, buffer_transitions=10, directive=Directive(run_state="running"))
    (batch,) = cache.batches(reply)
    assert cache.corrupt == 2
    assert Counter(check_rows(fx, batch)) == Counter([(0, 3), (0, 4)])


def test_everything_unreadable_gives_no_batches(fx: StoredChunks):
    for ref in fx.refs:
        fx.store.delete(ref.payload_path)
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    assert cache.batches(fx.sample(random_pairs(8, seed=3), batch_size=4)) == []
    assert cache.missing == 3


def test_lru_bound(tmp_path: Path):
    fx = StoredChunks(tmp_path / "store", 4)
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=2)
    a, b, c, d = fx.refs
    assert cache.get(a) is not None and cache.get(b) is not None
    assert cache.loaded == 2
    assert cache.get(a) is not None  # hit: a becomes most recently used
    assert cache.loaded == 2
    cache.get(c)  # evicts b, the least recently used
    assert cache.loaded == 3
    assert len(cache._chunks) == 2
    cache.get(a)
    assert cache.loaded == 3  # a stayed
    cache.get(b)
    assert cache.loaded == 4  # b had been evicted and is read again
    for ref in (d, a, b, c, d):
        cache.get(ref)
        assert len(cache._chunks) <= 2


def test_cached_chunk_is_read_once(fx: StoredChunks):
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    for seed in range(3):
        cache.batches(fx.sample(random_pairs(8, seed=seed), batch_size=4))
    assert cache.loaded == 3


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_batches_feed_dqn_update(fx: StoredChunks):
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    (batch,) = cache.batches(fx.sample(random_pairs(16, seed=4), batch_size=16))
    dqn = DQN(flat_spaces(D, 3), DQNParams(net=NetConfig(hidden=(8,))), EPSILON_GREEDY, seed=0)
    info = dqn.update(batch)
    assert np.isfinite(info["td_loss"])


def test_rows_where_the_env_raised_are_never_trained_on(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    steps = 6
    obs = np.arange(steps, dtype=np.float32).reshape(steps, 1, 1).repeat(2, axis=2)
    arrays = {
        "obs": obs, "next_obs": obs + 1, "actions": np.zeros((steps, 1), np.int64),
        "rewards": np.ones((steps, 1), np.float32), "terminated": np.zeros((steps, 1), bool),
        "truncated": np.zeros((steps, 1), bool), "valid": np.ones((steps, 1), bool),
    }
    arrays["valid"][3, 0] = False
    arrays["truncated"][3, 0] = True
    sha = store.put("chunks/t/c.msgpack", encode_chunk(arrays))
    cache = ChunkCache(store, ChunkSchema.of(flat_spaces(2, 2), False), gamma=0.5, n_step=3, max_chunks=4)
    ref = SampledChunk(chunk_id="c", payload_path="chunks/t/c.msgpack", sha256=sha, policy_version=0, num_envs=1,
                       env_steps=steps)
    reply = transition_reply(chunks=[ref], chunk_index=[0] * steps, offsets=list(range(steps)), batch_size=1,
                           buffer_transitions=steps, directive=Directive(run_state="running"))
    rows = {int(b["obs"][0, 0]): b for b in cache.batches(reply)}
    assert set(rows) == {0, 1, 2, 4, 5}  # the failed step (obs 3) is dropped
    # Row 1's window stops before the failed step: r1 + 0.5 r2, bootstrapping from next_obs[2] == obs[3].
    assert rows[1]["returns"][0] == pytest.approx(1.5)
    assert rows[1]["boot_obs"][0, 0] == 3.0
    assert rows[1]["discount"][0] == pytest.approx(0.25)


def test_learner_cache_is_sized_from_the_replay_capacity() -> None:
    task = learner_task(RunConfig())  # 100k transitions in 2048-transition chunks: ~49 chunks in the buffer
    assert cache_chunks(task) == 70


# ----- unusable payloads are reported, not hidden --------------------------------------------------------------


def _hash_mismatch(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path.write_bytes(path.read_bytes() + b"tampered")


def _undecodable(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Garbage whose sha256 is the one reported (a hostile or buggy collector)."""
    fx.refs[0] = fx.refs[0].model_copy(update={"sha256": fx.store.put(fx.refs[0].payload_path, b"\x93not msgpack")})


def _rewrite(fx: StoredChunks, arrays: dict[str, np.ndarray]) -> None:
    fx.refs[0] = fx.refs[0].model_copy(update={"sha256": fx.store.put(fx.refs[0].payload_path, encode_chunk(arrays))})


def _shapes(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = numbered_arrays(0)
    arrays["rewards"] = arrays["rewards"][:, :1]
    _rewrite(fx, arrays)


def _float_flags(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = numbered_arrays(0)
    arrays["terminated"] = arrays["terminated"].astype(np.float32)  # `~` on it would raise TypeError later
    _rewrite(fx, arrays)


def _missing_array(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = numbered_arrays(0)
    del arrays["next_obs"]
    _rewrite(fx, arrays)


def _short_rows(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer steps than reported: right columns and env count, but the reply's offsets index past its end."""
    _rewrite(fx, {k: v[:-2] for k, v in numbered_arrays(0).items()})


def _action_outside(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = numbered_arrays(0)
    arrays["actions"] = arrays["actions"].copy()
    arrays["actions"][5, 1] = 3  # the space has 3 actions: 0..2
    _rewrite(fx, arrays)


def _nan_reward(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = numbered_arrays(0)
    arrays["rewards"][2, 0] = np.nan  # on a valid row
    _rewrite(fx, arrays)


def _huge_obs(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = numbered_arrays(0)
    arrays["next_obs"][0, 0, 2] = 3e38  # finite, but inf once squared in a loss
    _rewrite(fx, arrays)


def _directory(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path.unlink()
    path.mkdir()  # IsADirectoryError on open


def _unreadable(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_get = fx.store.get

    def get(relpath: str, sha256: str | None = None) -> bytes:
        if relpath == fx.refs[0].payload_path:  # root ignores chmod 000: raise what open() would
            raise PermissionError(13, "Permission denied", str(path))
        return real_get(relpath, sha256)

    monkeypatch.setattr(fx.store, "get", get)


def _outside_link(fx: StoredChunks, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = path.parent.parent.parent.parent / "outside.msgpack"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)  # StorePathError: the store never reads outside its root


CORRUPTIONS = {
    "hash-mismatch": (_hash_mismatch, "IntegrityError"),
    "undecodable": (_undecodable, "PayloadError"),
    "inconsistent-shapes": (_shapes, "rewards has shape (8, 1), expected [steps, 2]"),
    "float-flags": (_float_flags, "column 'terminated' is float32"),
    "missing-array": (_missing_array, "missing ['next_obs']"),
    "short-rows": (_short_rows, "the payload holds 12 rows, its report said 16"),
    "action-outside-space": (_action_outside, "column 'actions' is outside the action space [3] on 1 valid row(s), "
                                              "first row 11"),
    "nan-reward": (_nan_reward, "column 'rewards' is non-finite or beyond ±1e+09 on 1 valid row(s), first row 4"),
    "huge-observation": (_huge_obs, "column 'next_obs' is non-finite or beyond ±1e+09"),
    "directory": (_directory, "IsADirectoryError"),
    "permission": (_unreadable, "PermissionError"),
    "symlink-outside": (_outside_link, "StorePathError"),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_unusable_payload_is_skipped_and_queued_for_a_report(fx: StoredChunks, kind: str,
                                                             monkeypatch: pytest.MonkeyPatch):
    corrupt, reason = CORRUPTIONS[kind]
    path = fx.store.root / fx.refs[0].payload_path
    corrupt(fx, path, monkeypatch)
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    pairs = [(k, off) for k in range(3) for off in range(4)]
    batches = cache.batches(fx.sample(pairs, batch_size=4))
    seen = [pair for batch in batches for pair in check_rows(fx, batch)]
    assert Counter(seen) == Counter(p for p in pairs if p[0] != 0)  # the other chunks still train
    assert (cache.corrupt, cache.missing, cache.loaded) == (1, 0, 2)
    ((chunk_id, why),) = cache.take_corrupt()
    assert chunk_id == "chunk0" and reason in why
    assert cache.take_corrupt() == []  # handed over once


def test_deleted_payload_is_not_reported(fx: StoredChunks):
    fx.store.delete(fx.refs[1].payload_path)  # evicted since the sample: legitimate
    cache = ChunkCache(fx.store, SCHEMA, GAMMA, NSTEP, max_chunks=8)
    cache.batches(fx.sample([(k, 0) for k in range(3)], batch_size=1))
    assert cache.missing == 1 and cache.take_corrupt() == []


def _store_compact(tmp_path: Path, arrays: dict[str, np.ndarray], compression: str = "zstd") -> tuple:
    store = LocalStore(tmp_path)
    path = chunk_path("task1", "pixels")
    sha = store.put(path, encode_chunk(arrays, compression=compression))  # type: ignore[arg-type]
    ref = SampledChunk(chunk_id="pixels", payload_path=path, sha256=sha, policy_version=0, num_envs=3,
                       env_steps=int(arrays["rewards"].size))
    return store, ref


def _compact_and_flat() -> tuple[ChunkSchema, dict[str, np.ndarray], dict[str, np.ndarray]]:
    from tests.support.frames import twin_rollouts

    compact, flat = twin_rollouts(4, num_envs=3, max_steps=5, raise_at=4)
    try:
        return compact.schema, compact.collect(12, random=True).arrays, flat.collect(12, random=True).arrays
    finally:
        compact.close()
        flat.close()


def test_a_compact_chunk_reads_as_the_flat_layout(tmp_path: Path) -> None:
    """The reader hands every algorithm obs and next_obs stacks, rebuilt from a zstd-compressed compact payload."""
    schema, compact, flat = _compact_and_flat()
    store, ref = _store_compact(tmp_path, compact)
    reader = PayloadReader(store, schema)
    arrays = reader.read(ref)
    assert arrays is not None and reader.corrupt == 0
    assert set(arrays) == set(flat)
    for name, value in flat.items():
        np.testing.assert_array_equal(arrays[name], value, err_msg=name)


def test_a_compact_chunk_with_inconsistent_columns_is_counted_corrupt(tmp_path: Path) -> None:
    """One final frame short of the episode ends its rows report: refused and queued for the coordinator, never
    rebuilt into stacks that borrow the wrong frames."""
    schema, compact, _ = _compact_and_flat()
    compact = dict(compact, final_frame=compact["final_frame"][1:])
    store, ref = _store_compact(tmp_path, compact, compression="none")
    reader = PayloadReader(store, schema)
    assert reader.read(ref) is None
    ((chunk_id, reason),) = reader.take_corrupt()
    assert reader.corrupt == 1 and chunk_id == "pixels" and "final_frame" in reason and "SchemaError" in reason
