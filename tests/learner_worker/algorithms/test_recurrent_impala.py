"""recurrent_impala update: reported metrics, padding of shorter chunks, invalid rows, state round trip, the clipped
surrogate, and learning what only memory tells from stale behaviour data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.recurrent_impala import Columns, RecurrentImpala
from rlfleet.shared.algorithms.recurrent_impala import RecurrentImpalaParams
from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.policy.actors import build_actor
from tests.support.cue_memory import cue_chunk, recall_rate
from tests.support.learner_data import N_ACTIONS, OBS_DIM, garbage, make_chunk, params_equal, roundtrip
from tests.support.policies import SAMPLING, flat_spaces

torch.set_num_threads(1)

KEYS = {"policy_loss", "value_loss", "entropy", "grad_norm", "explained_variance", "rho_clipped", "approx_kl"}


def small(kind: str = "gru", **changes: object) -> RecurrentImpalaParams:
    return RecurrentImpalaParams(net=NetConfig(hidden=(16,), activation="tanh", core=CoreConfig(kind=kind, hidden=8)),
                                 epochs=2, **changes)


def with_state(chunk: dict[str, np.ndarray], kind: str = "gru") -> dict[str, np.ndarray]:
    envs = chunk["rewards"].shape[1]
    shape = (8,) if kind == "gru" else (2, 8)
    return {**chunk, "core_state": np.random.default_rng(0).uniform(-1, 1, (envs, *shape)).astype(np.float32)}


def learner(cfg: RecurrentImpalaParams | None = None, seed: int = 0) -> RecurrentImpala:
    return RecurrentImpala(flat_spaces(OBS_DIM, N_ACTIONS), cfg or small(), SAMPLING, seed=seed)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_update_returns_finite_metrics_and_trains_the_core(kind: str) -> None:
    impala = learner(small(kind))
    before = impala.actor.state_dict()["core.rnn.weight_hh_l0"].clone()
    info = impala.update([with_state(make_chunk(1), kind), with_state(make_chunk(2, steps=5, envs=3), kind)])
    assert set(info) == KEYS
    assert all(np.isfinite(v) for v in info.values()), info
    assert impala.updates == 1
    assert not torch.equal(before, impala.actor.state_dict()["core.rnn.weight_hh_l0"])


def test_a_critic_with_a_core_of_its_own_trains_with_the_actor() -> None:
    cfg = small("lstm")
    impala = learner(cfg.model_copy(update={"net": cfg.net.model_copy(update={"trunk": "separate_core"})}))
    critic_core = impala.recurrent_model.critic_core
    assert critic_core is not None
    before = critic_core.state_dict()["rnn.weight_hh_l0"].clone()
    info = impala.update([with_state(make_chunk(1), "lstm")])
    assert all(np.isfinite(v) for v in info.values()), info
    assert not torch.equal(before, critic_core.state_dict()["rnn.weight_hh_l0"])


def test_clip_ratio_reports_the_clipped_fraction() -> None:
    info = learner(small(clip_ratio=0.2)).update([with_state(make_chunk(1))])
    assert set(info) == KEYS | {"clip_fraction"} and 0.0 <= info["clip_fraction"] <= 1.0


def test_a_shorter_chunk_is_padded_with_rows_that_are_never_valid_and_end_every_recursion() -> None:
    long, short = with_state(make_chunk(1, steps=8, envs=2)), with_state(make_chunk(2, steps=5, envs=3))
    short["terminated"][:] = short["truncated"][:] = False
    short["valid"][:] = True
    cols = Columns.of([long, short], flat_spaces(OBS_DIM, N_ACTIONS))
    assert cols.valid.shape == (8, 5) and cols.state.shape == (5, 8)
    assert not cols.valid[5:, 2:].any() and cols.ends[4:, 2:].all()  # its last real row ends, and every padding row
    assert not cols.ends[:4, 2:].any()
    np.testing.assert_array_equal(cols.obs[:5, 2:], short["obs"])


def test_invalid_rows_never_reach_the_loss() -> None:
    chunk = with_state(make_chunk(3, invalid=0.2))
    chunk["terminated"][:] = chunk["truncated"][:] = False  # garbage() rewrites them on invalid rows only
    a, b = learner(), learner()
    a.update([chunk])
    b.update([garbage(chunk, 4)])
    assert params_equal(a.actor, b.actor) and params_equal(a.critic, b.critic)


def test_state_round_trips_and_resumes_the_same_stream() -> None:
    a = learner()
    a.update([with_state(make_chunk(5))])
    b = learner(seed=1)
    b.load(roundtrip(a.state()))
    chunk = with_state(make_chunk(6))
    a.update([chunk])
    b.update([chunk])
    assert params_equal(a.actor, b.actor)


def test_it_learns_to_act_on_what_it_saw_steps_before_from_stale_behaviour() -> None:
    """A cue in the first row's observation says which action pays on the last row; the rows between observe
    nothing, so a memoryless policy gets 0.5. Every batch was acted by the policy of two updates before (the
    asynchronous collectors' lag V-trace corrects for)."""
    steps, envs = 4, 64
    impala = RecurrentImpala(flat_spaces(2, 2), RecurrentImpalaParams(
        net=NetConfig(hidden=(16,), activation="tanh", core=CoreConfig(kind="gru", hidden=16)), epochs=2,
        gamma=1.0, learning_rate=3e-3, entropy_coef=0.01, max_grad_norm=1.0), SAMPLING, seed=0)
    rng = np.random.default_rng(0)
    behind = [impala.policy_state()] * 2
    for _ in range(60):
        actor = build_actor(impala.manifest(), {k: v.numpy().copy() for k, v in behind.pop(0).items()})
        impala.update([cue_chunk(actor, rng, steps, envs, state_size=16)])
        behind.append({k: v.clone() for k, v in impala.policy_state().items()})
    actor = build_actor(impala.manifest(), {k: v.numpy() for k, v in impala.policy_state().items()})
    assert recall_rate(actor, steps) > 0.95
