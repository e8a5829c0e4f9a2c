"""Collectors of a population-based learner: claim a member, evaluate the perturbed policy, report its return.

A member is the generation's policy with its flat parameter vector (shared/policy/flat_params.py) moved by
sign * sigma * a slice of the shared noise table (shared/policy/noise_table.py, built here from its seed, never
transferred). It plays `episodes` greedy episodes, one per env, on the seeds the coordinator gives (every
member of a generation plays the same ones), stopping early at `max_steps`. The report is a few numbers,
no payload file; a retried report is recognised by the coordinator (same member), so retries are safe.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.policy.actors import NumpyActor, PolicyError
from rlfleet.shared.policy.files import load_policy
from rlfleet.shared.policy.flat_params import flatten, policy_shapes, unflatten
from rlfleet.shared.policy.manifest import ManifestError, PolicyManifest
from rlfleet.shared.policy.noise_table import noise_table
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore
from rlfleet.shared.wire import CollectorTask, MemberClaim, MemberClaimRequest, MemberResult, MemberTask, PolicyRef, ResultAck
from rlfleet.shared.worker.client import CoordinatorRejected
from rlfleet.shared.worker.session import WorkerSession

log = logging.getLogger("rlfleet.collector")
CLAIM_WAIT_SECONDS = 5.0


@dataclass
class Outcome:
    mean_return: float
    mean_length: float
    episodes: int
    env_steps: int


class MemberEvaluator:
    """Evaluates members on envs kept across members; the base policy is loaded once per version."""

    def __init__(self, env: EnvConfig, store: PayloadStore) -> None:
        self.env, self.store = env, store
        self.envs: list[gym.Env] = []
        self.base: tuple[PolicyRef, PolicyManifest, dict[str, tuple[int, ...]], np.ndarray] | None = None

    def _policy(self, ref: PolicyRef) -> tuple[PolicyManifest, dict[str, tuple[int, ...]], np.ndarray]:
        if self.base is None or self.base[0] != ref:
            manifest, state = load_policy(self.store, ref)
            shapes = policy_shapes(manifest)
            self.base = (ref, manifest, shapes, flatten(state, shapes))
        return self.base[1], self.base[2], self.base[3]

    def actor(self, member: MemberTask) -> NumpyActor:
        """The member's perturbed policy."""
        manifest, shapes, theta = self._policy(member.policy)
        p = member.perturbation
        noise = noise_table(p.noise_seed, p.noise_size).get(member.noise_index, theta.size)
        return NumpyActor(manifest, unflatten(theta + (member.sign * p.sigma) * noise, shapes))

    def evaluate(self, member: MemberTask) -> Outcome:
        actor, p = self.actor(member), member.perturbation
        while len(self.envs) < p.episodes:
            self.envs.append(make_env(self.env))
        envs = self.envs[:p.episodes]
        obs = [env.reset(seed=member.seed + i)[0] for i, env in enumerate(envs)]
        returns, lengths = np.zeros(len(envs)), np.zeros(len(envs), np.int64)
        active = list(range(len(envs)))
        finished, steps = 0, 0
        cap = p.max_steps if p.max_steps is not None else np.inf
        while active and steps < cap:
            actions = actor.greedy(np.stack([obs[i] for i in active]))
            still = []
            for i, action in zip(active, actions, strict=True):
                obs[i], reward, terminated, truncated, _ = envs[i].step(action)
                returns[i] += float(reward)
                lengths[i] += 1
                steps += 1
                if terminated or truncated:
                    finished += 1
                else:
                    still.append(i)
            active = still
        return Outcome(float(returns.mean()), float(lengths.mean()), finished, steps)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def evaluate_members(session: WorkerSession, store: PayloadStore, task: CollectorTask) -> None:
    """Claim, evaluate and report members until the run ends or this worker's lease is lost."""
    generation = session.generation
    evaluator = MemberEvaluator(task.env, store)
    log.info("task %s: evaluating population members on %s", task.task_id, task.env.id)
    try:
        while session.running and session.generation == generation:
            if session.directive.pause_seconds > 0:  # an operator paused collection
                session.wait_out_pause()
                continue
            try:
                _evaluate_one(session, evaluator)
            except CoordinatorRejected as exc:
                if exc.error != "unknown_worker":
                    raise
                log.warning("lease lost (%s); registering again", exc)
                session.register()  # a new generation of this worker: the task loop claims afresh
    finally:
        evaluator.close()


def _evaluate_one(session: WorkerSession, evaluator: MemberEvaluator) -> None:
    claim = session.client.call("POST", "/v1/generations/claim", MemberClaim, MemberClaimRequest(
        worker_id=session.worker_id, wait_seconds=session.long_poll_wait(CLAIM_WAIT_SECONDS)))
    session.update(claim.directive)
    member = claim.member
    if member is None:
        return
    try:
        outcome = evaluator.evaluate(member)
    except (FileNotFoundError, IntegrityError, ManifestError, PolicyError) as exc:
        # Only a policy superseded long ago goes missing: its generation has closed, and the member's lease lapses.
        log.warning("member %d of generation %d: policy v%d unusable: %s", member.member, member.generation,
                    member.policy.version, exc)
        return
    try:
        ack = session.client.call("POST", f"/v1/generations/{member.generation}/results", ResultAck, MemberResult(
            worker_id=session.worker_id, member=member.member, mean_return=outcome.mean_return,
            mean_length=outcome.mean_length, episodes=outcome.episodes, env_steps=outcome.env_steps))
    except CoordinatorRejected as exc:
        if exc.error != "member_not_held":
            raise
        # Slower than the member's lease (another worker took it over) or than two closes: the result is dropped.
        log.warning("member %d of generation %d: result refused (%s)", member.member, member.generation, exc)
        return
    session.update(ack.directive)
    if ack.late:
        log.info("generation %d closed before member %d's result came", member.generation, member.member)
