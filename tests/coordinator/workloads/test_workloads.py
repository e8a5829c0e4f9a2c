"""The run's workload comes from its loop kind: only a population run has generations, and the operations its
routes hold keep acting on the run's current components after a failed commit reloads them from the journal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from rlfleet.coordinator.errors import JournalUnavailable
from rlfleet.coordinator.journal.database import Journal
from rlfleet.coordinator.operations.generations import Population
from rlfleet.coordinator.run import Run
from rlfleet.coordinator.workloads.data_plane import DataPlaneWorkload
from rlfleet.coordinator.workloads.population import PopulationWorkload
from rlfleet.shared.config.run_config import RunConfig
from tests.support.journal import fill_journal, free_journal

ES_RUN = RunConfig.model_validate({"name": "es-workload", "env": {"id": "CartPole-v1"},
                                   "algo": {"name": "es", "population": 4, "noise_table_size": 4096}})


def _keys(run: Run) -> set[str]:
    return {c.key for c in run.ctx.work.components}


def test_a_replay_run_has_no_generations_and_a_population_run_journals_them(make_run: Callable[..., Run]) -> None:
    replay = make_run()
    assert isinstance(replay.workload, DataPlaneWorkload) and replay.workload.operations is None
    assert "generations" not in _keys(replay) and replay.status().population is None
    population = make_run(ES_RUN)
    assert isinstance(population.workload, PopulationWorkload)
    assert isinstance(population.workload.operations, Population) and "generations" in _keys(population)
    assert population.status().population is not None


def test_operations_held_across_a_reload_act_on_the_reloaded_generations(make_run: Callable[..., Run],
                                                                         tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    run = make_run(ES_RUN, journal=journal)
    operations = run.workload.operations
    assert isinstance(operations, Population)
    before = operations.generations
    run.ctx.flush()  # the run's creation is durable
    fill_journal(journal)  # every write fails inside SQLite from now on, as on a full disk
    run.ctx.lifecycle.pending.mark()
    run.ctx.commit()
    with pytest.raises(JournalUnavailable):
        asyncio.run(run.ctx.settle())  # the failed commit reloads every component from the journal
    assert run.workload.operations is operations and operations.generations is not before
    assert any(c is operations.generations for c in run.ctx.work.components)
    free_journal(journal)
    run.ctx.close()
    journal.close()
