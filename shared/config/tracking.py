"""The run config's `tracking` section: experiment trackers (Weights & Biases, MLflow) that receive the run's
curves beside TensorBoard and metrics.csv.

The coordinator feeds them (coordinator/observe/tracking.py), because it sees every counter, loss, validation
and test; the workers never talk to a tracker. Both work with no network: W&B in offline mode (its files in the
run directory, uploaded later with `wandb sync` if you wish), MLflow into a local SQLite store in the run
directory unless the config names another tracking URI. Each library is an optional extra; whether it is
installed is checked where a run is about to start (shared/config/preflight.py), not here, because validation
is pure and runs in processes (workers, tools) that never start a tracker.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Annotated

from pydantic import Field

from rlfleet.shared.config.base import Strict
from rlfleet.shared.extras import extra_message

_TAG = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^,\s][^,]*$")]


class WandbConfig(Strict):
    """Weights & Biases in offline mode: the run is written under RUN_DIR/wandb/ and can be uploaded afterwards
    with `wandb sync RUN_DIR/wandb/offline-run-*` from a machine with network and a W&B account."""

    project: str = Field("rlfleet", min_length=1, max_length=128, pattern=r"^[^/\\#?%:]+$", description=(
        "the W&B project the run belongs to when synced"))
    name: str | None = Field(None, min_length=1, max_length=128, description=(
        "the W&B run's display name; null: the rlfleet run's name"))
    tags: tuple[_TAG, ...] = Field((), max_length=64, description="W&B tags of the run (e.g. [baseline, cartpole])")


class MlflowConfig(Strict):
    """MLflow tracking: one MLflow run per rlfleet run (a resumed run continues its MLflow run), its metrics,
    parameters and artifacts in the store that `tracking_uri` names."""

    tracking_uri: str | None = Field(None, min_length=1, max_length=1000, description=(
        "where MLflow keeps the run: any MLflow tracking URI (sqlite:///path.db, http://host:5000, ...); null: a "
        "SQLite store in the run directory, RUN_DIR/mlflow.db, with its artifacts in RUN_DIR/mlflow-artifacts/"))
    experiment: str = Field("rlfleet", min_length=1, max_length=256, description=(
        "the MLflow experiment the run is logged under (created if missing)"))
    run_name: str | None = Field(None, min_length=1, max_length=256, description=(
        "the MLflow run's name; null: the rlfleet run's name"))

    @property
    def local(self) -> bool:
        """Whether the store is a SQLite file (the default one included), which needs SQLAlchemy and Alembic."""
        return self.tracking_uri is None or self.tracking_uri.startswith("sqlite:")


class TrackingConfig(Strict):
    wandb: WandbConfig | None = None
    """Log the run to Weights & Biases (offline mode; the `wandb` extra); null: no W&B."""
    mlflow: MlflowConfig | None = None
    """Log the run to MLflow (the `mlflow` extra); null: no MLflow."""
    queue_events: int = Field(10_000, ge=100, le=1_000_000, description=(
        "scalars each tracker may have waiting for its writer thread; beyond that new ones are dropped and "
        "counted (status: trackers[].dropped) rather than slow the coordinator down"))

    @property
    def names(self) -> list[str]:
        """The trackers this section turns on, in the order they start."""
        return [name for name, on in (("wandb", self.wandb), ("mlflow", self.mlflow)) if on is not None]


def missing_tracker_extra(tracking: TrackingConfig) -> str | None:
    """Why a tracker the section names cannot run in this environment (its library is not installed: the line
    names the extra to install), or None. Looks the modules up without importing them: W&B and MLflow cost a
    second or more of CPU to import, which the coordinator pays in its tracker threads, not before it starts."""
    needed = []
    if tracking.wandb is not None:
        needed.append(("wandb", "wandb", "tracking.wandb"))
    if tracking.mlflow is not None:
        needed.append(("mlflow", "mlflow", "tracking.mlflow"))
        if tracking.mlflow.local:
            needed += [("sqlalchemy", "mlflow", "tracking.mlflow's SQLite store"),
                       ("alembic", "mlflow", "tracking.mlflow's SQLite store")]
    for module, extra, feature in needed:
        if find_spec(module) is None:
            return extra_message(module, extra, feature, "not installed")
    return None
