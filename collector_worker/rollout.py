"""Stepping a vector env with the run's policy into columnar chunks of the run's schema. No I/O, no HTTP.

terminated and truncated are kept apart: a truncated (time-limit) episode still bootstraps from its final
observation, a terminated one does not. With SAME_STEP autoreset the final observation of a finished
episode is taken from info['final_obs'], so `next_obs` is always the true successor of `obs`. A step on which
the env raised, or returned a non-finite reward or observation, is kept with `valid=False` (the learner never
trains on it) and its episode is not reported. Chunks carry the rewards the learner trains on (scaled, say),
episodes the env's raw returns.

How to act comes from the task's `Behaviour` (declared by the algorithm): epsilon-greedy on q-values, or
sampling from the policy's distribution, which also records the behaviour log-probability that importance
ratios need. Before the first policy (or during an off-policy warm-up) actions are uniformly random. Every
chunk also carries where its episodes end and which env columns start a fresh episode, so the coordinator
can serve sequences and whole episodes without opening the payload. Episodes are reported as the env has them:
under the `atari` wrapper a lost life ends the learner's episode, but the game and its reported return go on.

A policy with a recurrent core carries one state per env in its actor (shared/policy/actors.py). The chunk stores
each env's state at its first row (`core_state`); after every step the actor zeroes the state of the envs whose
episode ended (an env error's restart included), so a row begins with a zero state exactly when the row before it
is terminated, truncated or not valid, which is what the learner reads from those columns. A state that turns
non-finite makes its step count as an env error (`valid=False`) and restarts that env's state from zero. A newly
published policy takes over the states where the last one left them.

A frame-stacked image run's chunks use the schema's compact layout: each frame is stored once (`StackedFrames`),
and the learner rebuilds the stacks (shared/payloads/framestack.py).

The envs are stepped by the backend `collector.env_backend` names, with the forward pass overlapped with their
stepping under `collector.double_buffer` (collector_worker/stepping.py); every backend gives the same
transitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlfleet.collector_worker.stepping import act_and_step, make_stepped_env, spaces_of
from rlfleet.shared.config.plan import chunk_schema
from rlfleet.shared.config.run_config import EnvBackend, EnvConfig
from rlfleet.shared.envs.build import ENV_ERROR, RAW_EPISODE, records_raw_episodes
from rlfleet.shared.envs.seeds import ACTOR_STREAM
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.actors import Actor, Decision, PolicyError, build_actor, random_actions
from rlfleet.shared.policy.manifest import Behaviour, PolicyManifest


@dataclass
class Chunk:
    arrays: dict[str, np.ndarray]
    episodes: list[tuple[float, int, str | None]] = field(default_factory=list)  # return, length, opponent
    policy_version: int = 0  # the oldest policy that acted in this chunk (a newer one may take over mid-chunk)
    fresh_columns: list[int] = field(default_factory=list)  # envs whose first step here begins an episode

    @property
    def num_envs(self) -> int:
        return int(self.arrays["rewards"].shape[1])

    @property
    def ends(self) -> list[int]:
        """Flat indices (t * num_envs + env) of steps after which the env's episode does not continue."""
        a = self.arrays
        return np.flatnonzero(a["terminated"] | a["truncated"] | ~a["valid"]).tolist()

    @property
    def env_steps(self) -> int:
        return int(self.arrays["rewards"].size)

    @property
    def env_errors(self) -> int:
        return int((~self.arrays["valid"]).sum())


class StackMismatch(RuntimeError):
    """The env's observations are not plain frame stacks after all: a compact chunk cannot hold them."""


class StackedFrames:
    """What a compact chunk stores of the observations, filled step by step: each row's newest frame, the k-1
    frames before the chunk, the frame after its last row and each episode's final frame.

    Each frame is stored once only because every observation continues the one before it (the oldest frame
    dropped, one appended) or starts an episode (its first frame k times). Every step is checked for that, so
    an env that is not a plain frame stack stops the collector with StackMismatch instead of writing chunks
    whose rebuilt observations would be wrong. The check compares (k-1) frames per env and step, a memcmp of
    ~21 KB for Atari's 4x84x84 stacks."""

    def __init__(self, schema: ChunkSchema, arrays: dict[str, np.ndarray], obs: np.ndarray) -> None:
        self.arrays = arrays
        self.k = int(schema.stack or 1)
        arrays["history"][:] = obs[:, :-1]
        self.finals: list[np.ndarray] = []

    def row(self, t: int, obs: np.ndarray) -> None:
        self.arrays["frame"][t] = obs[:, -1]

    def step(self, t: int, before: np.ndarray, after: np.ndarray, done: np.ndarray, valid: np.ndarray,
             final_obs: np.ndarray | None) -> None:
        """Check the step's stacks against `before` and keep the final frames of the episodes that ended."""
        for i in np.flatnonzero(~done):
            if not np.array_equal(after[i, :-1], before[i, 1:]):
                self._mismatch(i, t, "does not continue the stack before it")
        for i in np.flatnonzero(done):
            assert final_obs is not None
            final = final_obs[i]
            # A failed step's final observation is the reset ResetOnError made: a fresh stack too.
            continues = is_first_stack(final) if not valid[i] else np.array_equal(final[:-1], before[i, 1:])
            if not continues:
                self._mismatch(i, t, "ending the episode does not continue the stack before it")
            if not is_first_stack(after[i]):
                self._mismatch(i, t, "starting an episode is not its first frame repeated")
            self.finals.append(final[-1])

    def finish(self, arrays: dict[str, np.ndarray], last: np.ndarray) -> None:
        arrays["tail_frame"] = np.ascontiguousarray(last[:, -1])
        if self.finals:
            arrays["final_frame"] = np.stack(self.finals)

    def _mismatch(self, env: int | np.integer, t: int, what: str) -> None:
        raise StackMismatch(
            f"env.wrappers: frame_stack (frames: {self.k}): env {env}'s observation after step {t} {what}, so "
            f"these are not plain frame stacks and a chunk storing each frame once cannot hold them. Make "
            f"frame_stack the last wrapper that changes observations, or stack frames inside the env instead")


def is_first_stack(stack: np.ndarray) -> bool:
    """Whether `stack` is an episode's first observation: its first frame repeated (FrameStackObservation's
    'reset' padding)."""
    return bool((stack == stack[-1]).all())


class Rollout:
    def __init__(self, env: EnvConfig, num_envs: int, spaces: Spaces, behaviour: Behaviour, seed: int,
                 greedy: bool = False, backend: EnvBackend = "sync", double_buffer: bool = False) -> None:
        """`backend` and `double_buffer`: `collector.env_backend` and `collector.double_buffer`
        (collector_worker/stepping.py)."""
        self.env = make_stepped_env(env, num_envs, backend, double_buffer)
        found = spaces_of(self.env, env)
        if found != spaces:
            self.env.close()
            raise ValueError(f"env {env.id!r} here has spaces {found}, the coordinator planned the run for {spaces}")
        self.num_envs = num_envs
        self.spaces, self.behaviour = spaces, behaviour
        self.schema = chunk_schema(spaces, behaviour, env)
        self.rng = np.random.default_rng([seed, ACTOR_STREAM])  # not the env's own stream
        self.greedy = greedy  # act on the argmax / the mean (`rlfleet record`'s default), not exploring
        self.actor: Actor | None = None
        self.version = 0
        self.obs, _ = self.env.reset(seed=seed)
        self.ep_return = np.zeros(num_envs)
        self.ep_length = np.zeros(num_envs, dtype=np.int64)
        self.raw_episodes = records_raw_episodes(env)
        self.game_length = np.zeros(num_envs, dtype=np.int64)  # steps of the env's own episode (see collect)

    def load_policy(self, manifest: PolicyManifest, state: dict[str, np.ndarray], version: int = 0) -> None:
        """Act with a published policy from now on; PolicyError if it was not made for this run's spaces/head."""
        if manifest.spaces != self.spaces or manifest.head != self.behaviour.head:
            raise PolicyError(f"policy is a {manifest.head} policy for {manifest.spaces}; this run needs a "
                              f"{self.behaviour.head} policy for {self.spaces}")
        previous, self.actor = self.actor, build_actor(manifest, state)
        if previous is not None:
            self.actor.load_core_state(previous.core_state(self.num_envs))
        self.version = version

    def act(self, obs: np.ndarray, epsilon: float, random: bool) -> Decision:
        if self.actor is None or random:
            if self.behaviour.sample:
                raise RuntimeError("a sampling behaviour records log-probs and cannot act before the first policy")
            return random_actions(self.spaces, self.behaviour.head, len(obs), self.rng, obs)
        return self.actor.act(obs, explore=not self.greedy, rng=self.rng, epsilon=epsilon,
                              noise_every=self.behaviour.sde_sample_freq or 1)

    def collect(self, steps: int, epsilon: float = 0.0, episodes_target: int | None = None,
                refresh: Callable[[], None] | None = None, random: bool = False) -> Chunk:
        """Step `steps` times (n_sample), or until `episodes_target` episodes finished, at most `steps` (n_episode).

        `refresh` runs before every step, so a newly published policy takes over mid-chunk; `random` acts
        uniformly at random throughout (an off-policy warm-up)."""
        n = self.num_envs
        first_version = self.version
        fresh = np.flatnonzero(self.ep_length == 0).tolist()
        arrays = self.schema.allocate(steps, n)
        stacked = None if self.schema.stack is None else StackedFrames(self.schema, arrays, self.obs)
        obs, next_obs = arrays.get("obs"), arrays.get("next_obs")
        actions, valid = arrays["actions"], arrays["valid"]
        rewards, terminated, truncated = arrays["rewards"], arrays["terminated"], arrays["truncated"]
        logp = arrays.get("logp")
        if "core_state" in arrays:
            if self.actor is not None:  # before the first policy: zeros, as the first policy will start
                arrays["core_state"][:] = self.actor.core_state(n)
            else:
                arrays["core_state"][:] = 0.0
        episodes: list[tuple[float, int, str | None]] = []
        finished = 0
        t = 0
        while t < steps and (episodes_target is None or finished < episodes_target):
            if refresh is not None:
                refresh()
            before = self.obs
            if stacked is not None:
                stacked.row(t, before)
            else:
                obs[t] = before  # type: ignore[index]
            decision, (self.obs, rew, term, trunc, info) = act_and_step(
                self.env, before, lambda o: self.act(o, epsilon, random), first=t == 0, ahead=t + 1 < steps)
            actions[t] = decision.actions
            if logp is not None:
                logp[t] = decision.logp
            rewards[t], terminated[t], truncated[t] = rew, term, trunc
            broken = decision.broken  # a core state turned non-finite: an error of this step, its state reset
            if next_obs is not None:
                next_obs[t] = self.obs
            self.ep_return += rew
            self.ep_length += 1
            done = term | trunc
            self.game_length += 1
            if done.any():
                final = info["final_info"]
                failed = final.get("_" + ENV_ERROR, np.zeros(n, bool))
                raw_returns = final.get(RAW_EPISODE, {}).get("r", self.ep_return)  # see make_env
                # Under training-only episode ends (a lost life) the env's own episode (the game) ends later.
                game_over = final.get("_" + RAW_EPISODE, np.zeros(n, bool)) if self.raw_episodes else done
                opponents = final.get("opponent")  # two-player games: who played the other seat
                valid[t] = ~failed
                for i in np.flatnonzero(done):
                    if next_obs is not None:
                        next_obs[t, i] = info["final_obs"][i]
                    if not failed[i] and game_over[i]:  # a broken episode's return means nothing: drop it
                        episodes.append((float(raw_returns[i]), int(self.game_length[i]),
                                         None if opponents is None else str(opponents[i])))
                finished += int(done.sum())
                self.ep_return[done] = 0.0
                self.ep_length[done] = 0
                self.game_length[failed | game_over] = 0
            if broken is not None:
                valid[t] &= ~broken
            if self.actor is not None:
                self.actor.reset(done)
            if stacked is not None:
                stacked.step(t, before, self.obs, done, valid[t], info.get("final_obs"))
            t += 1
        if t < steps:
            arrays = {k: v[:t] if self.schema.columns[k].per == "step" else v for k, v in arrays.items()}
        if stacked is not None:
            stacked.finish(arrays, self.obs)
        return Chunk(arrays, episodes, first_version, fresh)

    def close(self) -> None:
        self.env.close()
