"""Evolution strategies under faults: a collector SIGKILLed mid-member loses only that member (its lease runs out
and another collector evaluates it), a SIGKILLed ES master resumes from its checkpoint with fresh generation
numbers, and the run still solves, confirmed by the held-out test."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config import RunConfig, dump_run_config, load_run_config
from shared.wire_generations import PopulationStatus
from tests.conftest import REPO
from tests.integration.procs import Fleet


@pytest.mark.slow
def test_es_loses_only_the_killed_collectors_member_and_survives_its_master(tmp_path: Path, data_dir: Path,
                                                                            tokens: dict[str, str]) -> None:
    config = load_run_config(REPO / "configs" / "cartpole_es.yaml").model_dump(mode="json")
    # Every member must report (no straggler allowance), so the killed collector's member has to be re-offered.
    config["algo"] |= {"min_fraction": 1.0, "member_lease_seconds": 2.0, "episodes_per_member": 4,
                       "checkpoint_every": 2, "generation_timeout_seconds": 120}
    config_file = tmp_path / "es.yaml"
    config_file.write_text(dump_run_config(RunConfig.model_validate(config)))
    fleet = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_LEASE_SECONDS": "3"})
    try:
        fleet.start_coordinator()
        fleet.start_worker("learner", "learner")
        fleet.start_worker("collector-a", "collector")
        fleet.start_worker("collector-b", "collector")

        def population() -> PopulationStatus:
            population = fleet.status().population
            assert population is not None
            return population

        fleet.wait_for(lambda: population().generations_closed >= 3, 60, "three generations")
        fleet.kill("collector-a")  # evaluating a member nearly all of the time: it holds one when it dies
        fleet.wait_for(lambda: population().members_reoffered >= 1, 30, "the dead collector's member re-offered")
        before = population().generation
        fleet.wait_for(lambda: population().generation >= before + 2, 60, "generations going on with one collector")

        fleet.kill("learner")
        killed_at = population().generation
        fleet.start_worker("learner-2", "learner")  # takes the learner task once the dead one's lease lapses
        fleet.wait_for(lambda: population().generations_closed >= killed_at + 2, 90, "the restarted master")
        st = fleet.status()
        # resumed from a checkpoint (every 2 generations), not from zero: at most a few updates were lost
        assert st.learner.iteration >= killed_at - 2

        fleet.start_worker("evaluator", "evaluator")  # the run can solve only now, after the faults
        fleet.wait_for(lambda: fleet.status().run_state == "solved", 120, "the run to solve")
        st = fleet.status()
        assert st.confirmed_by is not None and st.confirmed_by.mean >= 475 and st.confirmed_by.episodes == 100
        final = st.population
        assert final is not None and final.results_accepted >= 2 * 32 and final.generation > killed_at
        assert st.chunks == 0 and st.env_steps > 0
    finally:
        fleet.close()
