"""Synthetic learner inputs (chunks for the chunk-loop learners PPO, A2C and IMPALA, replay batches for the value
learners) and the checks on learners updated with them."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import torch

from rlfleet.learner_worker.actor_critic import ActorCritic
from rlfleet.shared.policy.actors import build_actor

OBS_DIM, N_ACTIONS = 4, 3
IMAGE_SHAPE = (4, 12, 12)  # a small frame stack: big enough for every encoder but nature, cheap on one core


def make_chunk(seed: int, steps: int = 8, envs: int = 4, invalid: float = 0.0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (steps, envs)
    return {
        "obs": rng.normal(size=(*shape, OBS_DIM)).astype(np.float32),
        "next_obs": rng.normal(size=(*shape, OBS_DIM)).astype(np.float32),
        "actions": rng.integers(0, N_ACTIONS, shape).astype(np.int64),
        "rewards": rng.normal(size=shape).astype(np.float32),
        "terminated": rng.random(shape) < 0.1,
        "truncated": rng.random(shape) < 0.05,
        "valid": rng.random(shape) >= invalid,
        "logp": np.log(rng.uniform(0.2, 0.5, shape)).astype(np.float32),
    }


def make_image_chunk(seed: int, shape: tuple[int, ...] = IMAGE_SHAPE, steps: int = 8,
                     envs: int = 4) -> dict[str, np.ndarray]:
    """`make_chunk` with uint8 frame observations (channels-first stacks by default, as FrameStackObservation
    gives them)."""
    chunk = make_chunk(seed, steps, envs)
    rng = np.random.default_rng(seed + 1)
    for key in ("obs", "next_obs"):
        chunk[key] = rng.integers(0, 256, (steps, envs, *shape)).astype(np.uint8)
    return chunk


def make_batch(seed: int, size: int = 64, discount: float = 0.9) -> dict[str, np.ndarray]:
    """A replay batch as a value learner gets it: n-step returns, bootstrap observations and discounts."""
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(size, OBS_DIM)).astype(np.float32),
        "actions": rng.integers(0, N_ACTIONS, size).astype(np.int64),
        "returns": rng.normal(size=size).astype(np.float32),
        "boot_obs": rng.normal(size=(size, OBS_DIM)).astype(np.float32),
        "discount": np.where(rng.random(size) < 0.2, 0.0, discount).astype(np.float32),
    }


def params_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def roundtrip(state: dict) -> dict:
    """The way a learner persists state: torch.save, then torch.load without pickle."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def garbage(chunk: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The same chunk with every field of the invalid rows overwritten by nonsense."""
    rng = np.random.default_rng(seed)
    out = {k: v.copy() for k, v in chunk.items()}
    bad = ~chunk["valid"]
    out["obs"][bad] = rng.choice([np.nan, np.inf, 1e30], size=(int(bad.sum()), OBS_DIM))
    out["next_obs"][bad] = np.nan
    out["actions"][bad] = rng.integers(-100, 100, int(bad.sum()))
    out["rewards"][bad] = rng.choice([np.nan, -np.inf, 1e30], size=int(bad.sum()))
    out["terminated"][bad] = rng.random(int(bad.sum())) < 0.5
    out["truncated"][bad] = rng.random(int(bad.sum())) < 0.5
    out["logp"][bad] = rng.choice([np.nan, 50.0, -1e9], size=int(bad.sum()))
    return out


def assert_invalid_rows_ignored(make: Callable[[], ActorCritic]) -> None:
    """Two learners built alike, one updated on chunks and one on the same chunks with nonsense (NaN, inf,
    out-of-range actions) in their invalid rows, must report the same finite losses and end with the same
    weights: invalid rows are padding, never data."""
    chunks = [make_chunk(s, steps=10, envs=4, invalid=0.25) for s in range(3)]
    assert all((~c["valid"]).any() for c in chunks)
    first, second = make(), make()
    info_a = first.update(chunks)
    info_b = second.update([garbage(c, seed=i) for i, c in enumerate(chunks)])
    assert info_a == info_b
    assert all(np.isfinite(v) for v in info_b.values())
    assert params_equal(first.actor, second.actor) and params_equal(first.critic, second.critic)


def bandit_chunk(learner: ActorCritic, rng: np.random.Generator, envs: int = 64) -> dict[str, np.ndarray]:
    """One step per episode: the obs is a one-hot context, reward 1 when the action equals the context."""
    context = rng.integers(0, 2, envs)
    obs = np.eye(2, dtype=np.float32)[context][None]
    actor = build_actor(learner.manifest(), {k: v.numpy() for k, v in learner.policy_state().items()})
    decision = actor.act(obs[0], explore=True, rng=rng)
    rewards = (decision.actions == context).astype(np.float32)[None]
    done = np.ones((1, envs), bool)
    return {"obs": obs, "next_obs": np.zeros_like(obs), "actions": decision.actions[None], "rewards": rewards,
            "terminated": done, "truncated": ~done, "valid": done, "logp": decision.logp[None]}
