"""`rlfleet ctl`: refused with exit 2 and what to fix, before or at the call; and a call that a real coordinator
takes or refuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from rlfleet.launcher.cli import app
from rlfleet.launcher.up import free_port
from rlfleet.shared.algorithms import REGISTRY
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.tokens import generate_tokens_file
from tests.support.checkpoints import write_signed
from tests.support.fleet import Fleet


def test_a_tokens_file_without_an_admin_token_is_named(tmp_path: Path) -> None:
    (tmp_path / "tokens.json").write_text("{}")
    result = CliRunner().invoke(app, ["ctl", "pause", "--tokens-file", str(tmp_path / "tokens.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"rlfleet ctl pause: no admin token in {tmp_path / 'tokens.json'}")


def test_an_unreachable_coordinator_is_one_line_and_exit_2(tmp_path: Path) -> None:
    generate_tokens_file(tmp_path / "tokens.json")
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["ctl", "stop", "--url", url, "--tokens-file", str(tmp_path / "tokens.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"rlfleet ctl stop: cannot reach the coordinator at {url}")
    assert result.stderr.count("\n") == 1


def test_malformed_settings_are_refused_before_any_call(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ctl", "set", "novalue", "--url", f"http://127.0.0.1:{free_port()}",
                                      "--tokens-file", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "SETTINGS" in result.output


def test_load_checkpoint_stages_a_fitting_checkpoint_and_names_what_does_not_fit(
        tmp_path: Path, data_dir: Path, config_file: Path, tokens: dict[str, str], run_config: RunConfig) -> None:
    """`rlfleet ctl load-checkpoint` against a real coordinator: the source's latest checkpoint is staged and shown
    in the control state; one of another algorithm is refused, exit 2 with the coordinator's reason on one line."""
    fleet = Fleet(tmp_path, data_dir, config_file, tokens, {"RLFLEET_RUN": run_config.name})
    try:
        fleet.start_coordinator()
        write_signed(RunLayout(data_dir, run_config.name).run_dir, 50, run_config.algo.name)  # compared with
        fitting, other = data_dir / "runs" / "member-1", data_dir / "runs" / "member-2"
        write_signed(fitting, 100, run_config.algo.name)
        write_signed(fitting, 200, run_config.algo.name, env_steps=4096)
        another = next(name for name in REGISTRY if name != run_config.algo.name)
        write_signed(other, 300, another)

        def ctl(source: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "rlfleet.launcher", "ctl", "load-checkpoint", str(source),
                                   "--url", fleet.url, "--tokens-file", str(data_dir / "tokens.json")],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

        done = ctl(fitting)
        assert done.returncode == 0, done.stderr
        assert f"loaded {fitting.resolve()}/checkpoints/learner-0000000200.pt at " in done.stdout  # its latest
        refused = ctl(other)
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.startswith("rlfleet ctl load-checkpoint: HTTP 409 ") and refused.stderr.count("\n") == 1
        assert another in refused.stderr  # the difference named
        control = fleet.status().control
        assert len(control.loads) == 1 and control.load_refusals == 1
    finally:
        fleet.close()
