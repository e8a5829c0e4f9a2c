"""MLflow, as one of the run's trackers (coordinator/observe/tracking.py).

Through `MlflowClient` alone, never the `mlflow.*` fluent API: that keeps an active run in process-global state,
which a coordinator that builds more than one app (tests do) would share. Without a `tracking_uri` the store is
SQLite in the run directory (RUN_DIR/mlflow.db, artifacts in RUN_DIR/mlflow-artifacts/): MLflow's plain-file
store is in maintenance mode and refuses to open by default. A resumed run continues its MLflow run, whose id
is kept in RUN_DIR/mlflow-run.json with the URI it lives in. Each scalar is an MLflow metric whose step is its
own axis (env steps; the policy version for Elo by version, the epoch for a dataset run's scores).
Called from the tracker's writer thread only.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlfleet.coordinator.observe.tracking import Scalar
from rlfleet.shared.config.tracking import MlflowConfig
from rlfleet.shared.extras import require
from rlfleet.shared.storage.layout import RunLayout

BATCH = 100  # params per log_batch call: MLflow's limit; metrics go 1000 at a time, its limit for those
MAX_PARAM_VALUE = 6000  # characters MLflow keeps of a parameter's value
_KEY_CHARACTERS = re.compile(r"[^A-Za-z0-9_\-. :/]")  # what MLflow accepts in a key; anything else becomes _
# How each way a run ends shows in MLflow; anything else (a coordinator stopped while its run goes on) is KILLED.
RUN_STATUS = {"solved": "FINISHED", "budget_exhausted": "FINISHED", "failed": "FAILED"}


def flat_params(params: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """The config as MLflow parameters: one per leaf, its dotted path (`algo.learning_rate`) as the key, JSON for
    values that are not strings (lists, null), cut to what MLflow keeps."""
    for key, value in params.items():
        path = f"{prefix}{_KEY_CHARACTERS.sub('_', str(key))}"
        if isinstance(value, dict) and value:
            yield from flat_params(value, f"{path}.")
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            yield path[:250], text[:MAX_PARAM_VALUE]


class MlflowTracker:
    def __init__(self, config: MlflowConfig, layout: RunLayout) -> None:
        require("mlflow", "mlflow", "tracking.mlflow")
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self.Metric, self.Param = Metric, Param
        self.config, self.layout = config, layout
        run_dir = layout.run_dir.resolve()
        self.uri = config.tracking_uri or f"sqlite:///{run_dir / 'mlflow.db'}"
        self.artifacts = None if config.tracking_uri else (run_dir / "mlflow-artifacts").as_uri()
        self.client = MlflowClient(self.uri)
        self.run_id = ""
        self.last_ms = 0  # the timestamp of the last value logged (`log`)

    @property
    def _id_file(self) -> Path:
        return self.layout.run_dir / "mlflow-run.json"

    def _resumed(self) -> str | None:
        """The MLflow run this rlfleet run started before, if it lives in the same store."""
        try:
            kept = json.loads(self._id_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return kept.get("run_id") if kept.get("tracking_uri") == self.uri else None

    def start(self, params: dict[str, Any]) -> None:
        client = self.client
        known: dict[str, str] = {}
        run_id = self._resumed()
        if run_id is not None:
            client.update_run(run_id, status="RUNNING")
            known = client.get_run(run_id).data.params
        else:
            experiment = client.get_experiment_by_name(self.config.experiment)
            experiment_id = experiment.experiment_id if experiment is not None else client.create_experiment(
                self.config.experiment, artifact_location=self.artifacts)
            run_id = client.create_run(experiment_id, run_name=self.config.run_name or self.layout.run_name,
                                       tags={"rlfleet.run": self.layout.run_name}).info.run_id
            self._id_file.write_text(json.dumps({"tracking_uri": self.uri, "run_id": run_id}) + "\n")
        self.run_id = run_id
        # A parameter cannot change once logged: a resumed run logs only the ones it did not have.
        fresh = [self.Param(key, value) for key, value in flat_params(params) if key not in known]
        for at in range(0, len(fresh), BATCH):
            client.log_batch(run_id, params=fresh[at:at + BATCH])

    def log(self, scalars: list[Scalar]) -> None:
        """Each value gets a timestamp of its own, one millisecond after the one before: MLflow orders a metric's
        history by timestamp, so values at the same step (validations of several versions at one env-step count)
        keep the order they came in."""
        metrics = []
        for s in scalars:
            self.last_ms = max(int(time.time() * 1000), self.last_ms + 1)
            metrics.append(self.Metric(_KEY_CHARACTERS.sub("_", s.tag), s.value, self.last_ms, s.step))
        for at in range(0, len(metrics), 10 * BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[at:at + 10 * BATCH])

    def finish(self, artifacts: dict[str, list[Path]], run_state: str) -> None:
        for group, paths in artifacts.items():
            for path in paths:
                self.client.log_artifact(self.run_id, str(path), artifact_path=group)
        self.client.set_tag(self.run_id, "rlfleet.run_state", run_state)
        self.client.set_terminated(self.run_id, status=RUN_STATUS.get(run_state, "KILLED"))
