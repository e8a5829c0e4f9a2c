"""A sweep's outputs from its study: the table (CSV and markdown), the best config as a run config, and the plot;
a trial whose run took no held-out test scores -inf, is shown as "no test" and is never the best."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import yaml
from optuna.distributions import FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from rlfleet.launcher.configs import read_config
from rlfleet.launcher.sweep_report import write_report
from rlfleet.launcher.sweep_spec import load_sweep
from tests.support.repo import REPO

SPACE = {"algo.learning_rate": FloatDistribution(1e-4, 1e-2, log=True),
         "algo.target_update_every": IntDistribution(25, 2000, log=True)}


def test_the_outputs_cover_every_trial_and_the_best_config_is_a_run_config(tmp_path: Path) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({
        "base_config": str(REPO / "configs" / "cartpole_dqn.yaml"), "study": "s", "trials": 4,
        "objective": {"kind": "test"}, "output_dir": str(tmp_path / "out"), "set": {"budget.max_env_steps": 60000},
        "space": {"algo.learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
                  "algo.target_update_every": {"type": "int", "low": 25, "high": 2000, "log": True}}}))
    sweep = load_sweep(spec)
    sweep.output_dir.mkdir()
    study = optuna.create_study(storage=sweep.storage, study_name="s", direction="maximize")
    for value, lr, every, attrs in [
        (-math.inf, 0.009, 30, {"score": "the run took no held-out test", "env_steps": 60_000}),
        (500.0, 0.001, 500, {"score": "test of v7, which confirmed the solve", "env_steps": 40_960}),
        (500.0, 0.002, 300, {"score": "test of v9, which confirmed the solve", "env_steps": 28_672,
                             "run_dir": "/x/runs/a"}),
    ]:
        study.add_trial(create_trial(value=value, params={"algo.learning_rate": lr, "algo.target_update_every": every},
                                     distributions=SPACE, user_attrs=attrs))
    study.add_trial(create_trial(state=TrialState.PRUNED, value=40.0,  # Optuna keeps the last point as its value
                                 params={"algo.learning_rate": 0.0001, "algo.target_update_every": 2000},
                                 distributions=SPACE, intermediate_values={20_000: 40.0}))
    study.add_trial(create_trial(state=TrialState.FAIL, params={"algo.learning_rate": 0.003,
                                                                "algo.target_update_every": 100},
                                 distributions=SPACE))
    study.add_trial(create_trial(value=480.0, params={"algo.learning_rate": 0.003, "algo.target_update_every": 100},
                                 distributions=SPACE, user_attrs={"retry_of": 4, "score": "test of v5"}))
    written = write_report(sweep, study)
    out = sweep.output_dir
    assert {p.name for p in written} == {"trials.csv", "trials.md", "best_config.yaml", "sweep.png"}
    rows = (out / "trials.csv").read_text().splitlines()
    assert rows[0] == "number,state,algo.learning_rate,algo.target_update_every,objective,env_steps,note,run_dir"
    assert rows[1].startswith("0,complete,0.009,30,no test,60000,the run took no held-out test")
    assert rows[3] == "2,complete,0.002,300,500,28672,\"test of v9, which confirmed the solve\",/x/runs/a"
    assert rows[4] == '3,pruned,0.0001,2000,,,"pruned at 20,000 env steps: its validation curve trailed the median",'
    assert rows[5] == "4,fail,0.003,100,,,left unfinished by a stopped sweep; re-run as trial 5,"
    assert rows[6] == "5,complete,0.003,100,480,,test of v5; re-runs trial 4,"
    markdown = (out / "trials.md").read_text()
    assert "Best: trial 2, 500" in markdown  # of equal scores, the trial that used fewer env steps
    assert "| 0 | complete | 0.009 | 30 | no test |" in markdown
    config = read_config(out / "best_config.yaml")  # trial 2's settings
    assert (config.algo.learning_rate, config.algo.target_update_every) == (0.002, 300)
    assert config.budget.max_env_steps == 60_000  # the spec's `set` too
    assert (out / "best_config.yaml").read_text().startswith("# yaml-language-server: $schema=run-config.schema.json")
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_with_no_scored_trial_no_best_config_is_written(tmp_path: Path) -> None:
    sweep = load_sweep(REPO / "configs" / "sweeps" / "cartpole_dqn.yaml").model_copy(
        update={"output_dir": tmp_path, "storage": f"sqlite:///{tmp_path / 'study.db'}"})
    study = optuna.create_study(storage=sweep.storage, study_name="s", direction="maximize")
    study.add_trial(create_trial(value=-math.inf, params={"algo.learning_rate": 0.009, "algo.target_update_every": 30},
                                 distributions=SPACE))
    written = write_report(sweep, study)
    assert not (tmp_path / "best_config.yaml").exists() and len(written) == 3
