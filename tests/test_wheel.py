"""The wheel is the product: installed into a fresh virtualenv and run from an empty directory outside the
repository with no PYTHONPATH, `rlfleet up --config cartpole-dqn` solves from the packaged config, and
`rlfleet up --config ./my.yaml` trains an env the user wrote in ./my_env.py.

The fresh virtualenv takes its third-party dependencies from this one (a .pth line, so nothing downloads and no
editable install leaks in) and rlfleet itself only from the wheel; `pip install dist/rlfleet-*.whl[box2d]` into a
bare venv is the same install with the dependencies fetched (docs/installation.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.support.repo import REPO

EXAMPLE = REPO / "examples" / "custom_env"


def _wheel(out: Path) -> Path:
    """The wheel of this checkout, built from a copy of its tree: setuptools builds in the source's build/, whose
    files from an earlier build (a module since removed) would otherwise end up in the wheel."""
    source = out / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".whl", "data", "wheels", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache",
        ".ruff_cache", "site"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--wheel-dir", str(out), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("rlfleet-*.whl")
    return wheel


def _fresh_venv(where: Path, wheel: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(where)
    python = where / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the checkout in sight
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)], check=True, cwd=where,
                   env=clean, capture_output=True, timeout=300)
    # after the install: pip would otherwise take this venv's editable rlfleet for the wheel's and skip it
    Path(purelib, "dependencies-from-the-test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where / "bin"


@pytest.mark.slow
def test_the_installed_wheel_trains_a_packaged_config_and_a_users_env_from_an_empty_directory(tmp_path: Path) -> None:
    bin_dir = _fresh_venv(tmp_path / "venv", _wheel(tmp_path / "dist"))
    home = tmp_path / "empty"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"

    def rlfleet(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / "rlfleet"), *args], cwd=home, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    where = subprocess.run([str(bin_dir / "python"), "-c", "import rlfleet; print(rlfleet.__file__)"], cwd=home,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tmp_path / "venv")), where  # the wheel's rlfleet, not the checkout's
    assert "cartpole-dqn" in rlfleet("configs", timeout=60).stdout

    shutil.copy(EXAMPLE / "corridor" / "__init__.py", home / "my_env.py")
    config = (EXAMPLE / "corridor.yaml").read_text().replace("corridor:Corridor", "my_env:Corridor")
    (home / "my.yaml").write_text(config)
    mine = rlfleet("up", "--config", "./my.yaml", "--data-dir", "mine", "--port", "0", timeout=300)
    assert mine.returncode == 0, mine.stdout[-3000:] + mine.stderr[-3000:]

    default = rlfleet("up", "--config", "cartpole-dqn", "--data-dir", "default", "--port", "0")
    assert default.returncode == 0, default.stdout[-3000:] + default.stderr[-3000:]
    assert "run solved" in default.stdout + default.stderr
