"""Sequences for recurrent learners: episode starts from the chunk's columns, unrolling from the stored state, and a
sequence with an episode start inside that trains exactly as its two parts would."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.recurrent_ppo import RecurrentPPO
from rlfleet.learner_worker.recurrent import episode_starts
from rlfleet.shared.algorithms.recurrent_ppo import RecurrentPPOParams
from rlfleet.shared.config.base import CoreConfig, NetConfig
from tests.support.learner_data import N_ACTIONS, OBS_DIM, make_chunk
from tests.support.policies import SAMPLING, flat_spaces

torch.set_num_threads(1)


def learner(kind: str = "gru", trunk: str | None = None) -> RecurrentPPO:
    cfg = RecurrentPPOParams(net=NetConfig(hidden=(16,), activation="tanh", trunk=trunk,
                                           core=CoreConfig(kind=kind, hidden=8)), epochs=2, minibatch_size=16)
    return RecurrentPPO(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=0)


def recurrent_chunk(seed: int, kind: str = "gru", steps: int = 8, envs: int = 3) -> dict[str, np.ndarray]:
    chunk = make_chunk(seed, steps, envs)
    chunk["terminated"][:] = chunk["truncated"][:] = False
    chunk["valid"][:] = True
    shape = (8,) if kind == "gru" else (2, 8)
    chunk["core_state"] = np.random.default_rng(seed).uniform(-0.5, 0.5, (envs, *shape)).astype(np.float32)
    return chunk


def test_an_episode_starts_after_every_row_that_ended_or_was_not_valid() -> None:
    chunk = recurrent_chunk(0, steps=5, envs=2)
    chunk["terminated"][1, 0] = True
    chunk["truncated"][2, 1] = True
    chunk["valid"][3, 0] = False
    chunk["terminated"][4, 1] = True  # the last row: its successor is the next chunk's stored state
    starts = episode_starts(chunk)
    assert np.flatnonzero(starts[:, 0]).tolist() == [2, 4]
    assert np.flatnonzero(starts[:, 1]).tolist() == [3]


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("trunk", ["separate", "shared", "separate_core"])
def test_a_sequence_with_an_episode_start_inside_gives_what_its_two_parts_give(kind: str, trunk: str) -> None:
    ppo = learner(kind, trunk)
    whole = recurrent_chunk(1, kind)
    whole["terminated"][3] = True  # every env's episode ends at row 3: rows 4.. start from a zero state
    first = {k: (v if k == "core_state" else v[:4]) for k, v in whole.items()}
    second = {k: (np.zeros_like(v) if k == "core_state" else v[4:]) for k, v in whole.items()}
    _, _, adv, targets, values, *_ = ppo.chunk_gae(whole, 0.9, 0.8)
    parts = [ppo.chunk_gae(part, 0.9, 0.8) for part in (first, second)]
    np.testing.assert_allclose(values, np.concatenate([p[4] for p in parts]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(adv, np.concatenate([p[2] for p in parts]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, np.concatenate([p[3] for p in parts]), rtol=1e-5, atol=1e-5)
    seqs = ppo.sequences([whole], 0.9, 0.8)
    split = ppo.sequences([first, second], 0.9, 0.8)  # padded side by side: 6 sequences of 4 rows
    idx, both = torch.arange(3), torch.arange(6)
    with torch.no_grad():
        logp, entropy, critic, _ = ppo.evaluate_sequences(seqs, idx)
        logp_split, entropy_split, critic_split, _ = ppo.evaluate_sequences(split, both)
    # Both hold the same 24 rows: (t, env) of the whole chunk; of the split batch, rows t < 4 of sequences 0..2
    # are the first part's, rows of sequences 3..5 the second's at t - 4.
    whole_rows = logp.reshape(8, 3)
    split_rows = logp_split.reshape(4, 6)
    torch.testing.assert_close(whole_rows, torch.cat([split_rows[:, :3], split_rows[:, 3:]]), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy.reshape(8, 3), torch.cat([entropy_split.reshape(4, 6)[:, :3],
                                                                entropy_split.reshape(4, 6)[:, 3:]]))
    torch.testing.assert_close(critic.reshape(8, 3, -1), torch.cat([critic_split.reshape(4, 6, -1)[:, :3],
                                                                   critic_split.reshape(4, 6, -1)[:, 3:]]))


def test_the_stored_state_is_where_each_sequence_starts() -> None:
    ppo = learner("lstm")
    chunk = recurrent_chunk(2, "lstm")
    zeroed = {**chunk, "core_state": np.zeros_like(chunk["core_state"])}
    assert not np.allclose(ppo.chunk_gae(chunk, 0.9, 0.8)[4], ppo.chunk_gae(zeroed, 0.9, 0.8)[4])


def test_the_value_of_a_chunks_last_next_observation_reads_the_memory_of_the_rows_before() -> None:
    """A chunk's last row bootstraps from its next observation with the state after the row, so what the env saw
    earlier in the chunk changes the bootstrap value even when the last rows are the same."""
    ppo = learner("gru")
    a, b = recurrent_chunk(3), recurrent_chunk(3)
    b["obs"][:2] += 3.0  # different early observations, same last ones
    boot_a = ppo.chunk_gae(a, 0.9, 0.0)[3][-1] - a["rewards"][-1]
    boot_b = ppo.chunk_gae(b, 0.9, 0.0)[3][-1] - b["rewards"][-1]
    assert not np.allclose(boot_a, boot_b)


def test_with_a_separate_trunk_only_the_policy_loss_trains_the_core() -> None:
    ppo = learner("lstm", "separate")
    seqs = ppo.sequences([recurrent_chunk(4, "lstm")], 0.9, 0.8)
    _, _, critic, _ = ppo.evaluate_sequences(seqs, torch.arange(3))
    critic.sum().backward()
    assert ppo.actor.core is not None
    assert all(p.grad is None or not p.grad.any() for p in ppo.actor.core.parameters())
    assert any(p.grad is not None and p.grad.any() for p in ppo.critic.parameters())


def test_a_critic_with_a_core_of_its_own_is_trained_by_the_value_loss_alone_and_starts_each_column_from_zero(
        ) -> None:
    """trunk separate_core: the critic's own core, not the actor's, carries what the value needs, only the value
    loss trains it, and a chunk's stored state (the actor's) does not change its values."""
    ppo = learner("lstm", "separate_core")
    chunk = recurrent_chunk(4, "lstm")
    zeroed = {**chunk, "core_state": np.zeros_like(chunk["core_state"])}
    np.testing.assert_array_equal(ppo.chunk_gae(chunk, 0.9, 0.8)[4], ppo.chunk_gae(zeroed, 0.9, 0.8)[4])
    b = {**chunk, "obs": chunk["obs"].copy()}
    b["obs"][:2] += 3.0  # what the critic saw earlier in the column changes its later values
    assert not np.allclose(ppo.chunk_gae(chunk, 0.9, 0.8)[4][-1], ppo.chunk_gae(b, 0.9, 0.8)[4][-1])
    seqs = ppo.sequences([chunk], 0.9, 0.8)
    logp, _, critic, _ = ppo.evaluate_sequences(seqs, torch.arange(3))
    critic.sum().backward()
    assert ppo.actor.core is not None
    assert all(p.grad is None or not p.grad.any() for p in ppo.actor.parameters())
    critic_core = ppo.recurrent_model.critic_core
    assert critic_core is not None and all(p.grad is not None and p.grad.any() for p in critic_core.parameters())
    ppo.optimizer.zero_grad()
    logp.sum().backward()
    assert all(p.grad is None or not p.grad.any() for p in ppo.critic.parameters())


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("trunk", ["separate", "separate_core"])
def test_windows_of_a_long_column_unroll_as_the_whole_column_does(kind: str, trunk: str) -> None:
    """Cut into windows of 3 rows, each started from the states (the actor's, and the critic's own) reached
    before it, the columns give the same outputs as unrolled whole (and the padded rows of the last, shorter
    window are masked)."""
    ppo = learner(kind, trunk)
    chunk = recurrent_chunk(5, kind)
    chunk["terminated"][4, 1] = True  # an episode start inside the second window
    whole = ppo.sequences([chunk], 0.9, 0.8)
    windows = ppo.sequences([chunk], 0.9, 0.8, window=3)
    assert windows.length == 3 and windows.count == 9 and int(windows.mask.sum()) == 24
    with torch.no_grad():
        logp, _, critic, _ = ppo.evaluate_sequences(whole, torch.arange(3))
        logp_w, _, critic_w, _ = ppo.evaluate_sequences(windows, torch.arange(9))
    # whole: rows (t, env) in t-major order; windows: (t within window, window w * 3 + env)
    mask = windows.mask.reshape(-1)
    flat = torch.zeros(3 * 9)
    flat[mask] = logp_w
    grid = flat.reshape(3, 3, 3)  # [t, window, env]
    by_window = grid.permute(1, 0, 2).reshape(9, 3)[:8]
    torch.testing.assert_close(by_window, logp.reshape(8, 3), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.sort(critic_w.flatten()).values, torch.sort(critic.flatten()).values,
                               rtol=1e-5, atol=1e-5)
