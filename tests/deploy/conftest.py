"""The deploy tests' fixture shared by the overlays that build on the example one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlfleet.shared.tokens import generate_tokens_file
from tests.support.kubernetes import DEPLOY


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of deploy/kubernetes whose example overlay has its secrets/ made as docs/kubernetes.md says."""
    root = tmp_path_factory.mktemp("deploy") / "kubernetes"
    shutil.copytree(DEPLOY, root, ignore=shutil.ignore_patterns("secrets", "__pycache__"))
    secrets = root / "overlays" / "example" / "secrets"
    secrets.mkdir()
    generate_tokens_file(secrets / "tokens.json")  # what `rlfleet secrets --out .../tokens.json` does
    subprocess.run([sys.executable, str(root / "split_tokens.py"), str(secrets / "tokens.json")], check=True,
                   capture_output=True, timeout=60)
    (secrets / "object-store.env").write_text("AWS_ACCESS_KEY_ID=test-access-key\n"
                                              "AWS_SECRET_ACCESS_KEY=test-secret-key\n")
    return root
