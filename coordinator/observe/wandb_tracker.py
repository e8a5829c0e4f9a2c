"""Weights & Biases in offline mode, as one of the run's trackers (coordinator/observe/tracking.py).

Offline, because a coordinator must not depend on a network or an account to train: the W&B run is written
under RUN_DIR/wandb/offline-run-*/ and `wandb sync` uploads it later from wherever there is one. Each scalar is
logged against its own x-axis, as TensorBoard has it: `env_steps` for every curve but the Elo-by-version one
(`policy_version`) and a dataset run's epoch scores (`epoch`); W&B's `define_metric` makes each axis the
x-axis of the charts of its metrics, so validations logged after a tick of higher env steps still land at their
own env steps (W&B's own step only counts log calls). Called from the tracker's writer thread only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from rlfleet.coordinator.observe.tracking import Axis, Scalar
from rlfleet.shared.config.tracking import WandbConfig
from rlfleet.shared.extras import require
from rlfleet.shared.storage.layout import RunLayout


class WandbTracker:
    def __init__(self, config: WandbConfig, layout: RunLayout) -> None:
        self.wandb = require("wandb", "wandb", "tracking.wandb")
        self.config, self.layout = config, layout
        self.run: Any = None
        self.off_axis: set[str] = set()  # tags already defined against an axis other than env_steps

    def start(self, params: dict[str, Any]) -> None:
        wandb = self.wandb
        # Nothing but the run's own data: no console capture (the coordinator's log is the run's), no system
        # metrics sampling, git or pip inventory of the coordinator's machine.
        settings = wandb.Settings(console="off", silent=True, disable_git=True, save_code=False,
                                  x_disable_stats=True, x_disable_meta=True, x_save_requirements=False)
        self.run = wandb.init(mode="offline", dir=str(self.layout.run_dir), project=self.config.project,
                              name=self.config.name or self.layout.run_name, group=self.layout.run_name,
                              tags=list(self.config.tags), config=params, job_type="train", settings=settings,
                              reinit="create_new")
        for axis in get_args(Axis):
            self.run.define_metric(axis)
        self.run.define_metric("*", step_metric="env_steps")

    def log(self, scalars: list[Scalar]) -> None:
        """Scalars at the same point of the same axis share a history row, but a tag appears once in a row: a
        second value of it there (validations of several versions at one env-step count) starts a new row, where
        merging would keep only the last."""
        rows: list[tuple[Axis, int, dict[str, float]]] = []
        open_rows: dict[tuple[Axis, int], dict[str, float]] = {}
        for scalar in scalars:
            if scalar.axis != "env_steps" and scalar.tag not in self.off_axis:
                self.run.define_metric(scalar.tag, step_metric=scalar.axis)
                self.off_axis.add(scalar.tag)
            row = open_rows.get((scalar.axis, scalar.step))
            if row is None or scalar.tag in row:
                row = open_rows[(scalar.axis, scalar.step)] = {}
                rows.append((scalar.axis, scalar.step, row))
            row[scalar.tag] = scalar.value
        for axis, step, values in rows:
            self.run.log({**values, axis: step})

    def finish(self, artifacts: dict[str, list[Path]], run_state: str) -> None:
        for group, paths in artifacts.items():
            if not paths:
                continue
            artifact = self.wandb.Artifact(f"{self.layout.run_name}-{group}",
                                           type="model" if group == "policy" else group)
            for path in paths:
                artifact.add_file(str(path))
            self.run.log_artifact(artifact)
        self.run.summary["run_state"] = run_state
        self.run.finish(exit_code=0 if run_state != "failed" else 1)
