"""Live settings of the algorithm (`algo.*`, what PBT perturbs) reach a single learner; a learner group's ranks
would each re-read them at their own update and drift apart, so a change there is refused, not silently ignored."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rlfleet.coordinator.errors import Conflict
from rlfleet.coordinator.run import Run
from rlfleet.shared.config.run_config import RunConfig
from tests.support.configs import make_config, queue_config


def test_an_algorithm_setting_changes_for_a_single_learner(make_run: Callable[..., Run],
                                                           run_config: RunConfig) -> None:
    run = make_run(queue_config(run_config))
    status = run.controls.change_settings({"algo.learning_rate": 5e-4})
    assert [(c.key, c.new) for c in status.changes] == [("algo.learning_rate", 5e-4)]
    assert run.ctx.config.algo.learning_rate == 5e-4  # type: ignore[union-attr]


def test_an_algorithm_setting_is_refused_for_a_learner_group(make_run: Callable[..., Run],
                                                             run_config: RunConfig) -> None:
    group = make_config(queue_config(run_config), learner={"replicas": 2, "rendezvous": "learner-0.rlfleet:29400"})
    run = make_run(group)
    with pytest.raises(Conflict, match="learner group of 2"):
        run.controls.change_settings({"algo.learning_rate": 5e-4})
    assert run.ctx.control.changes == [] and run.ctx.config.algo.learning_rate != 5e-4  # type: ignore[union-attr]
    run.controls.change_settings({"evaluation.every_versions": 2})  # the coordinator's own settings still change


def _scheduled(run_config: RunConfig, schedule: dict) -> RunConfig:
    doc = queue_config(run_config).model_dump(mode="json")
    doc["algo"].update(learning_rate=1e-3, schedules={"learning_rate": schedule})
    return RunConfig.model_validate(doc)


def test_a_new_schedule_takes_over_from_the_value_the_run_has_reached(make_run: Callable[..., Run],
                                                                      run_config: RunConfig) -> None:
    """At update 400 of a linear 1e-3 -> 0 over 1,000 updates the rate is 6e-4: a new schedule to 1e-4 over 200
    updates runs from (400, 6e-4), where one starting again from 1e-3 at update 0 would have jumped to 1e-4."""
    run = make_run(_scheduled(run_config, {"kind": "linear", "end": 0.0, "over": 1000, "unit": "updates"}))
    run.ctx.learner.iteration = 400
    run.controls.change_settings({"algo.schedules.learning_rate": {"kind": "linear", "end": 1e-4, "over": 200,
                                                                   "unit": "updates"}})
    new = run.ctx.config.algo.schedules["learning_rate"]
    assert (new.begin, new.start) == (400, pytest.approx(6e-4))
    assert new.value(1e-3, 400) == pytest.approx(6e-4) and new.value(1e-3, 500) == pytest.approx(3.5e-4)
    assert new.value(1e-3, 600) == pytest.approx(1e-4)


def test_a_new_value_of_a_scheduled_field_scales_the_rest_of_its_schedule(make_run: Callable[..., Run],
                                                                          run_config: RunConfig) -> None:
    """PBT doubles a scheduled rate at update 400 (6e-4 reached): the rest of the anneal, still 600 updates to its
    end, runs from 1.28e-3 to twice its end; the change of the schedule is recorded beside the field's."""
    run = make_run(_scheduled(run_config, {"kind": "linear", "end": 1e-4, "over": 1000, "unit": "updates"}))
    run.ctx.learner.iteration = 400
    status = run.controls.change_settings({"algo.learning_rate": 1.28e-3})  # 2x the 6.4e-4 reached
    assert {c.key for c in status.changes} == {"algo.learning_rate", "algo.schedules.learning_rate"}
    new = run.ctx.config.algo.schedules["learning_rate"]
    assert (new.begin, new.over) == (400, 600)
    assert new.value(1.28e-3, 400) == pytest.approx(1.28e-3)
    assert new.value(1.28e-3, 1000) == pytest.approx(2e-4) and new.value(1.28e-3, 5000) == pytest.approx(2e-4)
