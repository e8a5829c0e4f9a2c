"""Where a run's files live under the data directory: one place for every path.

Payloads, policies, checkpoints and the best policy live in the run's stores (`rlfleet.shared.storage.factory.open_store`):
the `store`, `checkpoints` and `best` directories below, or an object store when `store` names one."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlfleet.shared.config.run_config import RunConfig
    from rlfleet.shared.storage.factory import StoreTarget

STAMP_FORMAT = "%Y%m%d-%H%M%S"


def new_run_name(base: RunConfig, now: float | None = None) -> str:
    """A fresh run's name, its directory under runs/: the config's name, its seed and the local start time
    (CleanRL's convention; coordinator/runs.py finds a config's newest run by it)."""
    return f"{base.name}__s{base.seed}__{time.strftime(STAMP_FORMAT, time.localtime(now))}"


@dataclass(frozen=True)
class RunLayout:
    data_dir: Path
    run_name: str
    store: StoreTarget | None = None  # None: the stores are the run directory's store/, checkpoints/, best/

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "runs" / self.run_name

    @property
    def journal(self) -> Path:
        """The coordinator's SQLite journal of the run (unless RLFLEET_DB_PATH puts it elsewhere)."""
        return self.run_dir / "coordinator.sqlite"

    @property
    def store_root(self) -> Path:
        """Root of the payload store: chunk payloads and policy files, addressed by relative paths."""
        return self.run_dir / "store"

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def best(self) -> Path:
        return self.run_dir / "best"

    @property
    def test_json(self) -> Path:
        """The latest `rlfleet test` result."""
        return self.run_dir / "test.json"

    @property
    def tensorboard(self) -> Path:
        return self.run_dir / "tb"

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def config_file(self) -> Path:
        return self.run_dir / "config.yaml"

    @property
    def metrics_csv(self) -> Path:
        return self.run_dir / "metrics.csv"

    @property
    def losses_csv(self) -> Path:
        """One row per (learner report, loss): whatever losses the run's algorithm reports."""
        return self.run_dir / "losses.csv"

    @property
    def evaluations_csv(self) -> Path:
        return self.run_dir / "evaluations.csv"

    @property
    def tests_csv(self) -> Path:
        return self.run_dir / "tests.csv"

    @property
    def curve_png(self) -> Path:
        return self.run_dir / "learning_curve.png"

    @property
    def summary_json(self) -> Path:
        return self.run_dir / "summary.json"


BEST_POLICY = "policy.safetensors"  # in the `best` store: what `rlfleet test` tests by default
BEST_SCORE = "score.json"


def chunk_path(task_id: str, chunk_id: str) -> str:
    return f"chunks/{task_id}/{chunk_id}.msgpack"


def policy_path(version: int) -> str:
    return f"policies/v{version:08d}.safetensors"
