"""The learner tests' shared fixture: three numbered chunks in a fresh store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.stored_chunks import StoredChunks


@pytest.fixture
def fx(tmp_path: Path) -> StoredChunks:
    return StoredChunks(tmp_path / "store", 3)
