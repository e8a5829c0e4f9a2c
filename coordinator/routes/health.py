"""Liveness, readiness and Prometheus metrics (no auth: they reveal counters only, never tokens or data)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from coordinator.deps import RunDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The run is loaded and accepting workers")
def readyz(run: RunDep) -> dict[str, str]:
    return {"status": "ready", "run_state": run.state}


@router.get("/metrics", summary="Prometheus text exposition of the run's counters", response_class=PlainTextResponse)
def metrics(run: RunDep) -> PlainTextResponse:
    st = run.status()
    lines = [
        f"rlfleet_env_steps_total {st.env_steps}",
        f"rlfleet_episodes_total {st.episodes}",
        f"rlfleet_chunks_total {st.chunks}",
        f"rlfleet_duplicate_chunks_total {st.duplicate_chunks}",
        f"rlfleet_env_errors_total {st.env_errors}",
        f"rlfleet_env_steps_per_second {st.env_steps_per_second}",
        f"rlfleet_policy_version {st.policy_version}",
        f"rlfleet_learner_iteration {st.learner.iteration}",
        f"rlfleet_samples_per_insert {st.learner.samples_per_insert}",
        f'rlfleet_run_running {int(st.run_state == "running")}',
    ]
    for kind in ("collector", "learner", "evaluator"):
        lines.append(f'rlfleet_workers{{kind="{kind}"}} {sum(w.kind == kind for w in st.workers)}')
    for buf in st.buffers:
        lines.append(f'rlfleet_buffer_transitions{{buffer="{buf.buffer_id}"}} {buf.transitions}')
    return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")
