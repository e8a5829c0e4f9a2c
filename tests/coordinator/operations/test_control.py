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
