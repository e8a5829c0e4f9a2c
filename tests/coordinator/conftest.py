"""The Run fixtures of the coordinator's unit tests: a Run over the suite's small config and store, on a fake
clock the test advances."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlfleet.coordinator.run import Run
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.local import LocalStore
from tests.support.run import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_run(run_config: RunConfig, store: LocalStore, clock: FakeClock) -> Callable[..., Run]:
    def make(config: RunConfig | None = None, **kwargs: Any) -> Run:
        kwargs.setdefault("sample_wait_seconds", 0)
        kwargs.setdefault("lease_seconds", 10.0)
        return Run(config or run_config, store, clock=clock, **kwargs)

    return make


@pytest.fixture
def run(make_run: Callable[..., Run]) -> Run:
    return make_run()

