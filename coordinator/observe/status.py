"""The run's status document, assembled from what each component reports about itself."""

from __future__ import annotations

from collections import Counter

import numpy as np

from rlfleet.coordinator.operations.context import RunContext
from rlfleet.shared.envs.seeds import base_seed
from rlfleet.shared.loops import loop_of
from rlfleet.shared.wire import LearnerStatus, SeedsUsed, Status, TrackerStatus


def build_status(run: RunContext, steps_per_second: float, trackers: list[TrackerStatus] | None = None) -> Status:
    now = run.clock()
    data, returns = run.data, list(run.data.recent_returns)
    return Status(
        run_name=run.config.name,
        run_state=run.lifecycle.state,
        run_message=run.lifecycle.message,
        coordinator_resumes=run.lifecycle.resumes,
        wall_seconds=run.lifecycle.wall_seconds(now),
        env_steps=data.env_steps,
        env_steps_per_second=steps_per_second,
        episodes=data.episodes,
        chunks=data.chunks,
        duplicate_chunks=data.duplicate_chunks,
        env_errors=data.env_errors,
        corrupt_chunks=data.corrupt_chunks,
        payload_bytes_per_env_step=data.bytes_per_env_step,
        recent_return_mean=float(np.mean(returns)) if returns else None,
        policy_version=run.policies.latest_version,
        policy_lag=data.lag.status(),
        learner=LearnerStatus(iteration=run.learner.iteration, transitions_trained=run.learner.transitions_trained,
                              losses=dict(run.learner.losses), samples_per_insert=data.limiter.achieved_ratio(),
                              hooks_failed=dict(run.learner.hooks_failed), world_size=run.config.learner.replicas,
                              ranks=run.fleet.learner_ranks(now)),
        latest_evaluation=run.judge.latest,
        best_evaluation=run.judge.best,
        latest_test=run.judge.tests[-1] if run.judge.tests else None,
        confirmed_by=run.judge.confirmed,
        solve_rule=run.judge.rule,
        tests_rejected=run.judge.rejected,
        test_in_flight=run.judge.under_test[0] if run.judge.under_test else None,
        no_threshold=run.judge.no_threshold,
        seeds=_seeds(run), control=run.control.status(),
        self_play=run.opponents.status(run.data.games, *run.judge.elo_range()),
        workers=run.fleet.worker_status(now, Counter(data.producers.values())),
        tasks=run.fleet.task_status(),
        buffers=[data.status()],
        journal=run.journal_status(),
        trackers=trackers or [],
        **run.workload.status(now),  # the loop kind's section (population, dataset); the others stay null
    )


def _seeds(run: RunContext) -> SeedsUsed:
    """Collector blocks follow from each task's index and claims (where collectors collect chunks), the loop
    kind's own (population members') from its workload; evaluations and tests report theirs."""
    cfg = run.config
    chunks = loop_of(run.plan.spec.loop).collects
    train = [base_seed(cfg.seed, "train", t.index, claim) for t in run.fleet.tasks.tasks.values()
             if t.kind == "collector" and chunks for claim in range(1, t.claims + 1)]
    train += run.workload.train_seeds()
    return SeedsUsed(train=sorted(train), valid=[r.seed for r in run.judge.results if r.seed is not None],
                     test=[t.seed for t in run.judge.tests if t.seed is not None],
                     envs={"train": cfg.collector.num_envs, "valid": cfg.evaluation.num_envs,
                           "test": cfg.evaluation.test_num_envs})
