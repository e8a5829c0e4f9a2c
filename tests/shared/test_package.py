"""The import-time settings of the shared package (shared/__init__.py), each checked in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.repo import REPO


def _run(script: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith("RLFLEET_")} | env
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, env=full, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_httpx_works_without_loading_its_command_line_client() -> None:
    out = _run("import shared, sys, httpx\n"
               "print(httpx.Client.__name__, 'rich' in sys.modules, 'click' in sys.modules, 'pygments' in sys.modules)")
    assert out == "Client False False False"


def test_field_descriptions_come_from_docstrings_unless_turned_off() -> None:
    script = ("from rlfleet.shared.config.run_config import EvalConfig\nfrom rlfleet.shared.wire import Status\n"
              "print(EvalConfig.model_fields['num_envs'].description is not None, "
              "Status.model_fields['run_state'].description is not None)")
    assert _run(script) == "True True"
    assert _run(script, RLFLEET_FIELD_DOCS="0") == "False False"
