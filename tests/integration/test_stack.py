"""The services as real processes on loopback: a uvicorn coordinator, collectors, a learner, an evaluator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlfleet.shared.config.run_config import RunConfig
from tests.support.configs import small_run_config
from tests.support.fleet import Fleet


def unsolvable(config: RunConfig) -> RunConfig:
    """`config` with a threshold above CartPole's best return: the run must still be running for the stop this
    test sends (DQN once solved and confirmed it 7 s in, before the buffer had filled twice over, in CI)."""
    return config.model_copy(update={"env": config.env.model_copy(update={"solve_threshold": 1000.0})})


EACH = unsolvable(small_run_config())
BATCHED = unsolvable(small_run_config().model_copy(update={"collector": small_run_config().collector.model_copy(
    update={"report_batch": 4, "report_delay_seconds": 1.0})}))


@pytest.fixture
def fleet(tmp_path: Path, data_dir: Path, config_file: Path, tokens: dict[str, str],
          run_config: RunConfig) -> Iterator[Fleet]:
    f = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_LEASE_SECONDS": "2", "RLFLEET_RUN": run_config.name})
    try:
        yield f
    finally:
        f.close()


@pytest.mark.slow
@pytest.mark.parametrize("run_config", [EACH, BATCHED], ids=["report-each", "report-batches"])
def test_fleet_trains_publishes_evaluates_and_stops_cleanly(fleet: Fleet, run_config: RunConfig,
                                                            data_dir: Path) -> None:
    fleet.start_coordinator()
    for name in ("collector-a", "collector-b"):
        fleet.start_worker(name, "collector")
    fleet.start_worker("learner", "learner")
    fleet.start_worker("evaluator", "evaluator")

    def progressed() -> bool:
        st = fleet.status()
        return (st.policy_version >= 3 and st.latest_evaluation is not None and st.learner.iteration >= 60
                and st.env_steps > 2 * run_config.replay.capacity_transitions)

    fleet.wait_for(progressed, 120, "policy v3, an evaluation, 60 learner iterations and a full buffer")
    # Only the learner loads torch (~200 MB each): collectors and the evaluator act in numpy.
    for name, proc in fleet.procs.items():
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert ("libtorch" in maps) == (name == "learner"), name
    st = fleet.status()
    assert {w.kind for w in st.workers} == {"collector", "learner", "evaluator"}
    assert sorted(t.task_id for t in st.tasks if t.kind == "collector" and t.state == "claimed") == [
        "collector-0", "collector-1"]

    fleet.http.post("/v1/run/stop", json={"reason": "test over"}).raise_for_status()
    for name, proc in fleet.procs.items():
        if name != "coordinator":
            assert proc.wait(timeout=30) == 0, fleet.logs()

    final = fleet.status()
    assert final.run_state == "stopped"
    batches = 'route="/v1/chunk-batches",status="200"' in fleet.http.get("/metrics").text
    assert batches == (run_config.collector.report_batch > 1)
    per_chunk = run_config.collector.num_envs * run_config.collector.chunk_steps
    assert final.env_steps == final.chunks * per_chunk  # exact: every acknowledged chunk counted once
    assert final.duplicate_chunks == 0
    # Evicted payloads were deleted: what is on disk is exactly what the buffer references.
    store = data_dir / "runs" / run_config.name / "store" / "chunks"
    on_disk = sum(1 for p in store.rglob("*.msgpack"))
    assert on_disk == final.buffers[0].chunks
    assert final.buffers[0].evicted_chunks > 0
    assert final.buffers[0].transitions <= run_config.replay.capacity_transitions
    run_dir = data_dir / "runs" / run_config.name
    assert any((run_dir / "checkpoints").glob("learner-*.pt"))
    assert (run_dir / "best" / "policy.safetensors").exists()


def test_killed_collector_returns_its_task_to_the_queue(fleet: Fleet) -> None:
    fleet.start_coordinator()
    fleet.start_worker("collector-a", "collector")
    fleet.wait_for(lambda: fleet.status().chunks > 0, 60, "first chunk")
    fleet.kill("collector-a")  # kill -9: no goodbye, the lease must expire on its own

    def released() -> bool:
        tasks = {t.task_id: t for t in fleet.status().tasks}
        return tasks["collector-0"].state == "pending" and not fleet.status().workers

    fleet.wait_for(released, 20, "collector-0 back to pending after lease expiry")
    fleet.start_worker("collector-b", "collector")

    def reclaimed() -> bool:
        tasks = {t.task_id: t for t in fleet.status().tasks}
        return tasks["collector-0"].state == "claimed" and tasks["collector-0"].claims == 2

    fleet.wait_for(reclaimed, 60, "collector-0 claimed again by the new collector")
    assert "collector-1" not in {t.task_id for t in fleet.status().tasks}
