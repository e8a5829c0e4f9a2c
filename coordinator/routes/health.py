"""Liveness, readiness and Prometheus metrics (no auth: they reveal counters only, never tokens or data).

All three are answered on the event loop from counters the components keep, so they never wait behind a
commit, a long poll or a status document of a thousand workers.
"""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from coordinator.apidoc import route_doc
from coordinator.deps import RunDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up",
            **route_doc(None, "Liveness: answers as soon as the process serves HTTP.", response={"status": "ok"}))
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The run is loaded and accepting workers",
            **route_doc(None, "Readiness: the run is loaded (answers once the journal is replayed).",
                        response={"status": "ready", "run_state": "running"}))
async def readyz(run: RunDep) -> dict[str, str]:
    return {"status": "ready", "run_state": run.lifecycle.state}


@router.get("/metrics", summary="Prometheus text exposition of the run's counters", response_class=PlainTextResponse)
async def metrics(run: RunDep) -> PlainTextResponse:
    data, committer = run.data, run.journal.committer
    lines = [
        f"rlfleet_env_steps_total {data.env_steps}",
        f"rlfleet_episodes_total {data.episodes}",
        f"rlfleet_chunks_total {data.chunks}",
        f"rlfleet_duplicate_chunks_total {data.duplicate_chunks}",
        f"rlfleet_corrupt_chunks_total {data.corrupt_chunks}",
        f"rlfleet_env_errors_total {data.env_errors}",
        f"rlfleet_env_steps_per_second {run.steps_per_second()}",
        f"rlfleet_policy_version {run.policies.latest_version}",
        f"rlfleet_learner_iteration {run.learner.iteration}",
        f"rlfleet_learner_hooks_failed {len(run.learner.hooks_failed)}",
        f"rlfleet_samples_per_insert {data.limiter.achieved_ratio()}",
        f"rlfleet_journal_commits_total {committer.commits}",
        f"rlfleet_journal_submissions_total {committer.submissions}",
        f'rlfleet_run_running {int(run.lifecycle.running)}',
    ]
    kinds = Counter(w.kind for w in run.fleet.registry.workers.values())
    for kind in ("collector", "learner", "evaluator"):
        lines.append(f'rlfleet_workers{{kind="{kind}"}} {kinds[kind]}')
    flagged = sum(run.fleet.flagged(w) for w in run.fleet.registry.workers.values())
    lines.append(f"rlfleet_workers_flagged {flagged}")
    lines.append(f'rlfleet_buffer_transitions{{buffer="{data.buffer.buffer_id}"}} {data.buffer.transitions}')
    return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")
