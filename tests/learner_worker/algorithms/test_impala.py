"""IMPALA update: the V-trace losses by hand on the pre-update networks, stale behaviour policies, invalid rows,
state round trip, and learning a bandit from data of an old policy."""

from __future__ import annotations

import copy
from collections import deque

import numpy as np
import pytest
import torch

from rlfleet.learner_worker.actor_critic import clean
from rlfleet.learner_worker.algorithms.impala import Impala
from rlfleet.shared.algorithms.impala import ImpalaParams
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.manifest import Behaviour
from tests.support.learner_data import (
    N_ACTIONS,
    OBS_DIM,
    assert_invalid_rows_ignored,
    bandit_chunk,
    make_chunk,
    params_equal,
    roundtrip,
)
from tests.support.policies import PENDULUM, SAMPLING, flat_spaces

torch.set_num_threads(1)

KEYS = {"policy_loss", "value_loss", "entropy", "explained_variance", "grad_norm", "rho_clipped", "approx_kl"}
SMALL = ImpalaParams(net=NetConfig(hidden=(16, 16), activation="tanh"))


def make_impala(cfg: ImpalaParams = SMALL, seed: int = 0) -> Impala:
    return Impala(flat_spaces(OBS_DIM, N_ACTIONS), cfg, SAMPLING, seed=seed)


def episode_chunk(seed: int, steps: int = 5, envs: int = 2) -> dict[str, np.ndarray]:
    """A chunk whose next observations are the next rows' observations, except where an episode ends."""
    chunk = make_chunk(seed, steps, envs)
    chunk["terminated"][:] = False
    chunk["truncated"][:] = False
    chunk["terminated"][1, 0] = True
    chunk["truncated"][2, 1] = True
    final = chunk["next_obs"][[1, 2], [0, 1]].copy()
    chunk["next_obs"][:-1] = chunk["obs"][1:]
    chunk["next_obs"][[1, 2], [0, 1]] = final
    return chunk


def test_losses_match_v_trace_written_out_on_the_pre_update_networks():
    """Two env columns, five steps, a termination and a truncation; rho_bar 1.2, c_bar 0.9. The V-trace targets
    and advantages are computed here step by step from the networks' outputs, with the paper's recursion."""
    cfg = ImpalaParams(net=NetConfig(hidden=(16,), activation="tanh"), gamma=0.9, rho_bar=1.2, c_bar=0.9,
                       entropy_coef=0.05)
    impala = make_impala(cfg)
    chunk = episode_chunk(4)
    with torch.no_grad():
        values = impala.critic(torch.from_numpy(chunk["obs"])).squeeze(-1).numpy().astype(np.float64)
        next_values = impala.critic(torch.from_numpy(chunk["next_obs"])).squeeze(-1).numpy().astype(np.float64)
        logp_all = torch.log_softmax(impala.actor(torch.from_numpy(chunk["obs"])), dim=-1).numpy().astype(np.float64)
    logp = np.take_along_axis(logp_all, chunk["actions"][..., None], -1)[..., 0]
    ratio = np.exp(logp - chunk["logp"])
    assert (ratio > 1.2).any() and (ratio < 0.9).any()  # both truncations matter in this batch
    rho, c = np.minimum(1.2, ratio), np.minimum(0.9, ratio)
    r = chunk["rewards"].astype(np.float64)
    vs, adv = np.zeros((5, 2)), np.zeros((5, 2))
    for i in range(2):
        for t in reversed(range(5)):
            term, trunc = chunk["terminated"][t, i], chunk["truncated"][t, i]
            boot = 0.0 if term else 0.9 * next_values[t, i]
            delta = rho[t, i] * (r[t, i] + boot - values[t, i])
            last = term or trunc or t == 4
            vs[t, i] = values[t, i] + delta + (0.0 if last else 0.9 * c[t, i] * (vs[t + 1, i] - values[t + 1, i]))
            following = next_values[t, i] if last else vs[t + 1, i]
            adv[t, i] = rho[t, i] * (r[t, i] + (0.0 if term else 0.9 * following) - values[t, i])
    entropy = -(np.exp(logp_all) * logp_all).sum(-1).mean()
    info = impala.update([chunk])
    assert set(info) == KEYS
    assert info["policy_loss"] == pytest.approx(-(adv * logp).mean(), rel=1e-4)
    assert info["value_loss"] == pytest.approx(0.5 * np.mean((values - vs) ** 2), rel=1e-4)
    assert info["entropy"] == pytest.approx(entropy, rel=1e-5)
    assert info["rho_clipped"] == pytest.approx(np.mean(ratio > 1.2 * 1.001))
    assert impala.updates == 1


@pytest.mark.parametrize(("clip_ratio", "normalize"), [(None, False), (0.1, False), (0.1, True)])
@pytest.mark.parametrize("epochs", [1, 3])
def test_each_epoch_is_one_adam_step_after_v_trace_with_the_updated_networks(epochs, clip_ratio, normalize):
    cfg = ImpalaParams(net=NetConfig(hidden=(8,), activation="tanh"), entropy_coef=0.1, max_grad_norm=1e6,
                       epochs=epochs, clip_ratio=clip_ratio, normalize_advantages=normalize)
    impala, twin = make_impala(cfg, 3), make_impala(cfg, 3)
    chunks = [make_chunk(2, invalid=0.2), make_chunk(9, steps=3, envs=5)]
    for _ in range(epochs):
        expected_epoch(twin, chunks)
    impala.update(chunks)
    assert impala.updates == 1  # one batch, however many steps
    for mine, theirs in ((impala.actor, twin.actor), (impala.critic, twin.critic)):
        for x, y in zip(mine.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def expected_epoch(twin: Impala, chunks: list[dict[str, np.ndarray]], generator: torch.Generator | None = None
                   ) -> int:
    """One epoch of `twin`, written out: V-trace once from its networks' outputs, then an Adam step of the combined
    loss (with APPO's clipped surrogate of pi/mu where the config sets clip_ratio, its rho taken out as V-trace
    computed it, and advantages scaled to mean 0 and std 1 where it sets normalize_advantages) on the whole batch,
    or with `generator` on each minibatch of the valid rows in its order; returns the steps taken."""
    cfg = twin.cfg
    steps = [clean(c, twin.spaces) for c in chunks]
    obs = torch.from_numpy(np.concatenate([s.flat(s.obs) for s in steps]))
    actions = torch.from_numpy(np.concatenate([s.flat(s.actions) for s in steps]))
    behaviour = torch.from_numpy(np.concatenate([s.flat(s.logp) for s in steps]))
    keep = torch.from_numpy(np.concatenate([s.valid.reshape(-1) for s in steps]))
    with torch.no_grad():
        values = twin.critic(obs).squeeze(1).double().numpy()
        next_values = twin.critic(torch.from_numpy(np.concatenate([s.flat(s.next_obs) for s in steps])))
        target_logp = torch.log_softmax(twin.actor(obs), 1).gather(1, actions[:, None]).squeeze(1).double().numpy()
    targets, advantages = twin.vtrace_targets(steps, target_logp, values, next_values.squeeze(1).double().numpy())
    if cfg.clip_ratio is not None:  # the ratio is the importance weight, not rho too
        advantages = advantages / np.minimum(cfg.rho_bar, np.exp(target_logp - behaviour.double().numpy()))
    valid = keep.nonzero().squeeze(1)
    pieces = [torch.arange(len(valid))]  # the paper's: one step on the whole batch
    if generator is not None:
        pieces = list(torch.randperm(len(valid), generator=generator).split(cfg.minibatch_size))
        if len(pieces[-1]) < 2:
            pieces[-2:] = [torch.cat(pieces[-2:])]
    for piece in pieces:
        idx = valid[piece]
        logp_all = torch.log_softmax(twin.actor(obs[idx]), dim=1)
        logp = logp_all.gather(1, actions[idx, None]).squeeze(1)
        entropy = -(logp_all.exp() * logp_all).sum(1).mean()
        value_loss = 0.5 * (twin.critic(obs[idx]).squeeze(1) - torch.from_numpy(targets).float()[idx]).pow(2).mean()
        adv = torch.from_numpy(advantages).float()[idx]
        if cfg.normalize_advantages:
            adv = (adv - adv.mean()) / (adv.std(correction=0) + 1e-8)
        if cfg.clip_ratio is None:
            policy_loss = -(adv * logp).mean()
        else:
            ratio = torch.exp(logp - behaviour[idx])
            clipped = torch.clamp(ratio, 1 - cfg.clip_ratio, 1 + cfg.clip_ratio)
            policy_loss = -torch.minimum(ratio * adv, clipped * adv).mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        twin.optimizer.zero_grad()
        loss.backward()
        twin.optimizer.step()
    return len(pieces)


@pytest.mark.parametrize(("clip_ratio", "normalize"), [(None, False), (0.1, True)])
def test_minibatches_take_a_step_each_on_targets_fixed_by_one_v_trace_pass_per_epoch(clip_ratio, normalize):
    """31 rows less the invalid ones, minibatches of 8 (the last one shorter, or merged where a single row is
    left), two epochs: V-trace runs twice, and every minibatch is an Adam step."""
    cfg = ImpalaParams(net=NetConfig(hidden=(8,), activation="tanh"), entropy_coef=0.1, max_grad_norm=1e6,
                       epochs=2, minibatch_size=8, clip_ratio=clip_ratio, normalize_advantages=normalize)
    impala, twin = make_impala(cfg, 3), make_impala(cfg, 3)
    chunks = [make_chunk(2, invalid=0.2), make_chunk(9, steps=3, envs=5)]
    generator = torch.Generator().manual_seed(3)  # the learner's own shuffling stream, seeded as it is
    taken = sum(expected_epoch(twin, chunks, generator) for _ in range(cfg.epochs))
    assert taken > 2 * cfg.epochs  # several steps an epoch, or this would test the whole-batch step again
    info = impala.update(chunks)
    assert set(info) >= KEYS and impala.updates == 1  # and clip_fraction, with the clip
    for mine, theirs in ((impala.actor, twin.actor), (impala.critic, twin.critic)):
        for x, y in zip(mine.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_a_resumed_learner_draws_the_same_minibatches():
    cfg = ImpalaParams(net=NetConfig(hidden=(8,), activation="tanh"), minibatch_size=8, clip_ratio=0.2)
    first = make_impala(cfg, 0)
    first.update([make_chunk(0)])
    second = make_impala(cfg, 99)
    second.load(roundtrip(first.state()))
    chunks = [make_chunk(1), make_chunk(2, steps=3, envs=5)]
    assert first.update(chunks) == second.update(chunks)
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)


def test_a_minibatch_of_one_row_is_refused():
    with pytest.raises(ValueError, match="minibatch_size"):
        ImpalaParams(minibatch_size=1)


def test_the_clipped_surrogate_is_written_out_on_the_pre_update_networks():
    """clip_ratio 0.2 on behaviour log-probs that put ratios on both sides of the clip range: the reported policy
    loss is -mean(min(r * A, clip(r, 0.8, 1.2) * A)) with r = pi/mu and A V-trace's advantage without its rho (r
    is the importance weight), and clip_fraction counts the rows whose ratio left the range."""
    cfg = ImpalaParams(net=NetConfig(hidden=(16,), activation="tanh"), clip_ratio=0.2)
    impala = make_impala(cfg)
    chunk = episode_chunk(4)
    steps = clean(chunk, impala.spaces)
    obs = torch.from_numpy(chunk["obs"].reshape(-1, OBS_DIM))
    with torch.no_grad():
        values = impala.critic(obs).squeeze(1).double().numpy()
        next_values = impala.critic(torch.from_numpy(chunk["next_obs"].reshape(-1, OBS_DIM))).squeeze(1).double()
        logp_all = torch.log_softmax(impala.actor(obs), dim=-1).double().numpy()
    logp = logp_all[np.arange(len(logp_all)), chunk["actions"].reshape(-1)]
    _, weighted = impala.vtrace_targets([steps], logp, values, next_values.numpy())
    ratio = np.exp(logp - chunk["logp"].reshape(-1))
    adv = weighted / np.minimum(1.0, ratio)
    outside = np.abs(ratio - 1) > 0.2
    assert outside.any() and not outside.all()
    info = impala.update([chunk])
    assert set(info) == KEYS | {"clip_fraction"}
    assert info["policy_loss"] == pytest.approx(-np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv).mean(),
                                                rel=1e-4)
    assert info["clip_fraction"] == pytest.approx(outside.mean())


def test_a_clip_that_does_not_bite_takes_the_papers_step():
    """The surrogate's gradient is ratio * A * grad log pi; V-trace's is rho * A * grad log pi. With every ratio
    inside the clip range and below rho_bar (so rho = ratio), one epoch of each is the same step: the clip adds a
    trust region and nothing else (in particular it does not weight a row by its ratio twice)."""
    plain = make_impala(ImpalaParams(net=NetConfig(hidden=(8,), activation="tanh"), rho_bar=2.0), 3)
    clipped = make_impala(ImpalaParams(net=NetConfig(hidden=(8,), activation="tanh"), rho_bar=2.0,
                                       clip_ratio=0.99), 3)
    chunk = make_chunk(5)
    info = clipped.update([chunk])
    plain.update([chunk])
    assert info["clip_fraction"] == 0.0  # behaviour probs 0.2-0.5 against ~1/3: ratios 0.67-1.67
    for mine, theirs in ((clipped.actor, plain.actor), (clipped.critic, plain.critic)):
        for x, y in zip(mine.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def drift_after_many_epochs(clip_ratio: float | None) -> float:
    """KL(mu || pi) (k3 estimate, batch mean) between the policy that acted on a batch and the learner's policy
    after 20 large steps on it."""
    cfg = ImpalaParams(net=NetConfig(hidden=(16,), activation="tanh"), learning_rate=3e-2, epochs=20,
                       entropy_coef=0.0, clip_ratio=clip_ratio)
    impala = make_impala(cfg, 5)
    chunk = make_chunk(11, steps=16, envs=4)
    obs, actions = torch.from_numpy(chunk["obs"]), torch.from_numpy(chunk["actions"])

    def logp() -> torch.Tensor:
        with torch.no_grad():
            return torch.log_softmax(impala.actor(obs), dim=-1).gather(-1, actions[..., None]).squeeze(-1)
    chunk["logp"] = logp().numpy()  # on-policy: every ratio starts at 1
    impala.update([chunk])
    log_ratio = logp() - torch.from_numpy(chunk["logp"])
    return float((log_ratio.exp() - 1 - log_ratio).mean())


def test_the_clip_keeps_many_epochs_on_one_batch_near_the_policy_that_acted():
    """The finding on LunarLander: several steps per batch with the plain policy gradient keep pushing each row's
    action however far it has moved, and the policy runs away from the data (measured here: KL 1.55 against 0.07
    with the clip). With clip_ratio a row stops pulling once its ratio has left the range in its advantage's
    direction."""
    plain, clipped = drift_after_many_epochs(None), drift_after_many_epochs(0.2)
    assert plain > 0.5, plain
    assert clipped < 0.15, clipped


def test_clip_ratio_must_lie_in_0_1():
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="clip_ratio"):
            ImpalaParams(clip_ratio=bad)


def test_on_policy_data_has_ratios_of_one():
    impala = make_impala()
    chunk = make_chunk(6)
    with torch.no_grad():
        logp_all = torch.log_softmax(impala.actor(torch.from_numpy(chunk["obs"])), dim=-1)
    chunk["logp"] = logp_all.gather(-1, torch.from_numpy(chunk["actions"])[..., None]).squeeze(-1).numpy()
    info = impala.update([chunk])
    assert info["rho_clipped"] == 0.0
    assert info["approx_kl"] == pytest.approx(0.0, abs=1e-6)


def test_stale_and_absurd_behaviour_log_probs_stay_finite():
    impala = make_impala()
    chunk = make_chunk(7)
    far = impala.update([{**chunk, "logp": chunk["logp"] - 500.0}])  # ratios of e^500: all clipped
    assert far["rho_clipped"] == 1.0 and all(np.isfinite(v) for v in far.values())
    near = make_impala().update([{**chunk, "logp": chunk["logp"] + 500.0}])  # ratios of e^-500: ~no gradient
    assert near["rho_clipped"] == 0.0 and all(np.isfinite(v) for v in near.values())
    assert abs(near["policy_loss"]) < 1e-6


def test_invalid_rows_are_finite_and_do_not_influence_the_update():
    assert_invalid_rows_ignored(lambda: make_impala(SMALL, 7))


def test_an_invalid_step_cuts_the_trace_of_the_step_before():
    """Step 2 invalid: step 1's target is its one-step V-trace target from its own next observation, and
    step 0 traces back from step 1 only."""
    impala = make_impala(ImpalaParams(net=NetConfig(hidden=(8,)), gamma=0.9))
    chunk = make_chunk(3, steps=4, envs=1)
    chunk["terminated"][:] = False
    chunk["truncated"][:] = False
    chunk["valid"][2] = False
    steps = clean(chunk, impala.spaces)
    with torch.no_grad():
        values = impala.critic(torch.from_numpy(chunk["obs"][:, 0])).squeeze(1).double().numpy()
        next_values = impala.critic(torch.from_numpy(chunk["next_obs"][:, 0])).squeeze(1).double().numpy()
        logp_all = torch.log_softmax(impala.actor(torch.from_numpy(chunk["obs"][:, 0])), 1).double().numpy()
    target_logp = logp_all[np.arange(4), chunk["actions"][:, 0]]
    targets, _ = impala.vtrace_targets([steps], target_logp, values, next_values)
    rho = np.minimum(1.0, np.exp(target_logp - chunk["logp"][:, 0]))
    r = chunk["rewards"][:, 0]
    one_step = values[1] + rho[1] * (r[1] + 0.9 * next_values[1] - values[1])
    assert targets[1] == pytest.approx(one_step, rel=1e-9)
    delta0 = rho[0] * (r[0] + 0.9 * next_values[0] - values[0])
    assert targets[0] == pytest.approx(values[0] + delta0 + 0.9 * rho[0] * (one_step - values[1]), rel=1e-9)


def test_empty_batch_raises():
    impala = make_impala()
    chunk = make_chunk(1)
    chunk["valid"][:] = False
    with pytest.raises(ValueError, match="empty"):
        impala.update([chunk])
    assert impala.updates == 0


def test_state_load_roundtrip_reproduces_training():
    first = make_impala(SMALL, 0)
    for step in range(3):
        first.update([make_chunk(step, invalid=0.1)])
    second = make_impala(SMALL, 99)
    second.load(roundtrip(first.state()))
    assert second.updates == 3
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)
    for step in range(3, 6):
        chunks = [make_chunk(step), make_chunk(100 + step, steps=3, envs=5)]
        assert first.update(chunks) == second.update(chunks)
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)


def test_contextual_bandit_learns_from_a_policy_three_versions_old():
    """The collectors' policy trails the learner's by three updates, as asynchronous collectors' would."""
    cfg = ImpalaParams(net=NetConfig(hidden=(16,), activation="tanh"), learning_rate=1e-2, entropy_coef=0.0)
    impala = Impala(flat_spaces(2, 2), cfg, SAMPLING, seed=0)
    behaviour = Impala(flat_spaces(2, 2), cfg, SAMPLING, seed=1)  # only its actor is used, to act
    rng = np.random.default_rng(0)
    history = deque([copy.deepcopy(impala.policy_state())], maxlen=4)
    for _ in range(60):
        behaviour.actor.load_state_dict(history[0])  # the oldest of the last four versions
        impala.update([bandit_chunk(behaviour, rng)])
        history.append(copy.deepcopy(impala.policy_state()))
    with torch.no_grad():
        probs = torch.softmax(impala.actor(torch.eye(2)), dim=1)
    assert probs[0, 0] > 0.9 and probs[1, 1] > 0.9, probs


def test_gaussian_head_scores_box_actions():
    """Continuous actions: the target log-prob is the diagonal gaussian's, through learner_worker/distributions."""
    cfg = ImpalaParams(net=NetConfig(hidden=(8,), activation="tanh"), log_std_init=-0.3)
    impala = Impala(PENDULUM, cfg, Behaviour(head="gaussian", sample=True), seed=0)
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(6, 2, 3)).astype(np.float32)
    actor = build_actor(impala.manifest(), {k: v.numpy() for k, v in impala.policy_state().items()})
    decision = actor.act(obs.reshape(-1, 3), explore=True, rng=rng)
    chunk = {"obs": obs, "next_obs": obs, "actions": decision.actions.reshape(6, 2, 1),
             "rewards": np.ones((6, 2), np.float32), "terminated": np.zeros((6, 2), bool),
             "truncated": np.zeros((6, 2), bool), "valid": np.ones((6, 2), bool),
             "logp": decision.logp.reshape(6, 2)}
    info = impala.update([chunk])  # the collector's logp is the learner's: every ratio is 1
    assert info["rho_clipped"] == 0.0 and info["approx_kl"] == pytest.approx(0.0, abs=1e-5)
