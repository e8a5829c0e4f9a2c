"""recurrent_ppo update: reported metrics, invalid rows, state round trip, and learning what only memory tells."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.algorithms.recurrent_ppo import RecurrentPPO
from rlfleet.shared.algorithms.recurrent_ppo import RecurrentPPOParams
from rlfleet.shared.config.base import CoreConfig, NetConfig
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.cue_memory import cue_chunk, recall_rate
from tests.support.learner_data import N_ACTIONS, OBS_DIM, garbage, make_chunk, params_equal, roundtrip
from tests.support.policies import PENDULUM, SAMPLING, flat_spaces

torch.set_num_threads(1)

KEYS = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "explained_variance", "grad_norm"}


def small(kind: str = "gru", **changes: object) -> RecurrentPPOParams:
    return RecurrentPPOParams(net=NetConfig(hidden=(16,), activation="tanh", core=CoreConfig(kind=kind, hidden=8)),
                              epochs=3, minibatch_size=16, **changes)


def with_state(chunk: dict[str, np.ndarray], kind: str = "gru") -> dict[str, np.ndarray]:
    envs = chunk["rewards"].shape[1]
    shape = (8,) if kind == "gru" else (2, 8)
    return {**chunk, "core_state": np.random.default_rng(0).uniform(-1, 1, (envs, *shape)).astype(np.float32)}


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_update_returns_finite_metrics_and_trains_the_core(kind: str) -> None:
    ppo = RecurrentPPO(flat_spaces(OBS_DIM, N_ACTIONS), small(kind), SAMPLING, seed=0)
    before = {k: v.clone() for k, v in ppo.actor.state_dict().items()}
    info = ppo.update([with_state(make_chunk(1), kind), with_state(make_chunk(2, steps=5, envs=3), kind)])
    assert set(info) == KEYS
    assert all(np.isfinite(v) for v in info.values()), info
    assert ppo.updates == 1
    assert not torch.equal(before["core.rnn.weight_hh_l0"], ppo.actor.state_dict()["core.rnn.weight_hh_l0"])


def test_a_recurrent_policy_file_acts_in_numpy_as_the_learner_trained_it() -> None:
    ppo = RecurrentPPO(PENDULUM, small("lstm"), Behaviour(head="gaussian", sample=True), seed=0)
    actor = build_actor(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()})
    obs = np.random.default_rng(0).normal(size=(6, 2, 3)).astype(np.float32)
    with torch.no_grad():
        hidden, _ = ppo.actor.sequence_hidden(torch.from_numpy(obs), ppo.actor.core.initial(2))
        want = ppo.actor.head(hidden).numpy()
    for t in range(6):
        np.testing.assert_allclose(actor.forward(obs[t]), want[t], rtol=1e-5, atol=1e-5)


def test_invalid_rows_never_reach_the_loss() -> None:
    chunk = with_state(make_chunk(3, invalid=0.2))
    chunk["terminated"][:] = chunk["truncated"][:] = False  # garbage() rewrites them on invalid rows only
    a = RecurrentPPO(flat_spaces(OBS_DIM, N_ACTIONS), small(), SAMPLING, seed=0)
    b = RecurrentPPO(flat_spaces(OBS_DIM, N_ACTIONS), small(), SAMPLING, seed=0)
    a.update([chunk])
    b.update([garbage(chunk, 4)])
    assert params_equal(a.actor, b.actor) and params_equal(a.critic, b.critic)


@pytest.mark.parametrize("trunk", [None, "separate_core"])
def test_state_round_trips_and_resumes_the_same_stream(trunk: str | None) -> None:
    cfg = small()
    cfg = cfg.model_copy(update={"net": cfg.net.model_copy(update={"trunk": trunk})})
    a = RecurrentPPO(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=0)
    a.update([with_state(make_chunk(5))])
    b = RecurrentPPO(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=1)
    b.load(roundtrip(a.state()))
    chunk = with_state(make_chunk(6))
    a.update([chunk])
    b.update([chunk])
    assert params_equal(a.actor, b.actor) and params_equal(a.critic, b.critic)


def test_it_learns_to_act_on_what_it_saw_steps_before() -> None:
    """A cue in the first row's observation says which action pays on the last row of the chunk; the rows between
    observe nothing. A memoryless policy gets 0.5 on average; the core has to carry the cue through time."""
    steps, envs = 4, 64
    ppo = RecurrentPPO(flat_spaces(2, 2), RecurrentPPOParams(
        net=NetConfig(hidden=(16,), activation="tanh", core=CoreConfig(kind="gru", hidden=16)), epochs=4,
        minibatch_size=steps * 16, gamma=1.0, gae_lambda=1.0, learning_rate=3e-3), SAMPLING, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        actor = build_actor(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()})
        ppo.update([cue_chunk(actor, rng, steps, envs, state_size=16)])
    actor = build_actor(ppo.manifest(), {k: v.numpy() for k, v in ppo.policy_state().items()})
    assert recall_rate(actor, steps) > 0.95
