"""Settings every worker process reads from its environment (prefix RLFLEET_)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rlfleet.shared.storage.factory import StoreSettings
from rlfleet.shared.tokens import Scope, load_token_file, load_tokens_file


class WorkerSettings(StoreSettings):
    model_config = SettingsConfigDict(env_prefix="RLFLEET_", extra="ignore")

    coordinator_url: str = Field("http://127.0.0.1:8000", description="base URL of the coordinator")
    token: str | None = Field(None, description="bearer token for this worker's scope")
    token_file: Path | None = Field(None, description=(
        "a file holding only this worker's token (compose and Kubernetes mount one per scope); used when "
        "`token` is not set"))
    tokens_file: Path | None = Field(None, description=(
        "JSON file of every scope's tokens; used when neither `token` nor `token_file` is set"))
    data_dir: Path = Field(Path("data"), description=(
        "this worker's data directory (shared with the others unless RLFLEET_STORE_URL names an object store)"))
    worker_name: str = Field(default_factory=lambda: socket.gethostname()[:100] or "worker")
    restarts: int = Field(0, ge=0, description="set by a supervisor: how often it restarted this worker")
    last_error: str = Field("", description="set by a supervisor: why this worker's previous process ended")
    torch_threads: Annotated[int, Field(ge=1)] | Literal["auto"] = Field("auto", description=(
        "the learner's torch intra-op threads; auto: the cores it may use (CPU affinity, capped by the cgroup's "
        "quota). Collectors and the evaluator act with one"))
    http_timeout_seconds: float = Field(10.0, gt=0, description="timeout of one HTTP request")
    max_unavailable_seconds: float = Field(
        120.0, gt=0, description="give up (exit non-zero) after the coordinator is unreachable this long"
    )

    def resolve_token(self, scope: Scope) -> str:
        if self.token:
            return self.token
        if self.token_file is not None:
            return load_token_file(self.token_file)
        if self.tokens_file is None:
            raise ValueError(f"no token: set RLFLEET_TOKEN (the {scope!r} token), RLFLEET_TOKEN_FILE (a file "
                             "holding it) or RLFLEET_TOKENS_FILE")
        tokens = load_tokens_file(self.tokens_file)
        if scope not in tokens:
            raise ValueError(f"tokens file {self.tokens_file} has no {scope!r} token")
        return tokens[scope]
