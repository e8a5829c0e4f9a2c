"""Coordinator settings, from the environment (prefix RLFLEET_) or the `rlfleet coordinator` options."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from rlfleet.shared.ids import ID_PATTERN
from rlfleet.shared.storage.factory import StoreSettings
from rlfleet.shared.wire import MAX_BODY_BYTES


class CoordinatorSettings(StoreSettings):
    model_config = SettingsConfigDict(env_prefix="RLFLEET_", extra="ignore")

    config: Path = Field(Path("configs/cartpole_dqn.yaml"), description="run config YAML")
    overrides: str = Field("", description="config overrides 'a.b=1;seed=2' applied on top of the YAML")
    run: str | None = Field(None, pattern=ID_PATTERN, description=(
        "serve exactly this run (runs/<run>/ in the data directory): resumed if it exists, created otherwise. "
        "Unset, the newest run of the config is resumed while it is still running, and a finished one is "
        "followed by a new run (coordinator/runs.py)"))
    data_dir: Path = Field(Path("data"), description="shared data directory holding runs/<name>/")
    host: str = Field("127.0.0.1", description="bind address (0.0.0.0 inside a container)")
    port: int = Field(8000, ge=0, le=65535)
    tokens_file: Path = Field(Path("data/tokens.json"), description="JSON file of scoped bearer tokens")
    open_reads: bool = Field(False, description="serve GET status/run/evaluations without a token")
    lease_seconds: float = Field(10.0, gt=0, description=(
        "a worker silent this long loses its task; long polls last at most half of it. Raise it (30 s still "
        "notices a dead worker within 30 s) for fleets of hundreds of collectors"))
    max_workers: int = Field(4096, ge=1, description="live registrations beyond this are refused with 429")
    idempotency_seconds: float = Field(900.0, gt=0, description=(
        "acknowledged chunk ids are remembered this long, so a retried report is never counted twice; "
        "must exceed the workers' max_unavailable_seconds"))
    max_body_bytes: int = Field(MAX_BODY_BYTES, ge=1024, description=(
        "larger request bodies get 413; served to collectors, which split their batches of chunk reports below it"))
    sample_wait_seconds: float = Field(1.0, ge=0, description="how long a sample call waits for data")
    status_wait_seconds: float = Field(5.0, ge=0, description="the longest a GET /v1/status?wait= is held")
    keep_policies: int = Field(8, ge=2, description=(
        "the newest policy files kept in the store, older ones deleted; the best validated version's file is kept "
        "too until a better validation replaces it"))
    tick_seconds: float = Field(1.0, gt=0, description="lease sweep and metrics interval")
    db_path: Path | None = Field(None, description="SQLite journal of the run (default: <run dir>/coordinator.sqlite)")
    db_synchronous: str = Field("NORMAL", description="NORMAL survives a killed process; FULL also power loss")
    orphan_grace_seconds: float = Field(
        300.0, gt=0, description="unacknowledged payload files older than this are deleted by the GC sweep")
    gc_every_seconds: float = Field(30.0, gt=0, description="interval of the orphan-payload GC sweep")
    fast_path: bool = Field(True, description=(
        "answer heartbeats and /healthz in front of FastAPI's routing (coordinator/api/fastpath.py); the routes "
        "behind it answer the same"))
    checkpoint_sources: str = Field("", description=(
        "directories, separated by ':', under which the runs whose checkpoints this run may load lie "
        "(POST /v1/run/load-checkpoint); empty: the data directory"))
    gc_pacing: bool = Field(True, description=(
        "pace Python's cyclic collector (coordinator/gcpacing.py); off only where the coordinator shares its "
        "process with other code, e.g. in-process tests"))

    def checkpoint_roots(self) -> tuple[Path, ...]:
        """The directories other runs' checkpoints may be loaded from."""
        roots = tuple(Path(part) for part in self.checkpoint_sources.split(":") if part)
        return roots or (self.data_dir,)

    @field_validator("run", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        """Compose passes `RLFLEET_RUN: ${RLFLEET_RUN:-}`, an empty string, when the user set nothing."""
        return None if value == "" else value
