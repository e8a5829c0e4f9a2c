"""`rlfleet test` end to end: a run directory with a CartPole policy, tested in a real process, its JSON and its
video read back; input that cannot be tested ends with exit code 2 and one line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from rlfleet.evaluator.episodes import evaluate
from rlfleet.launcher.cli import app
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.seeds import base_seed, decode
from rlfleet.shared.policy.actors import build_actor
from rlfleet.shared.policy.files import decode_policy
from tests.support.policies import flat_spaces
from tests.support.repo import REPO
from tests.support.run_files import write_run

torch.set_num_threads(1)
CARTPOLE_FPS = 50


def rlfleet_test(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rlfleet.launcher", "test", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def replay_length(run_dir: Path, seed: int) -> int:
    """Our own count of the video's episode: the best policy, played greedily on CartPole from `seed`."""
    actor = build_actor(*decode_policy((run_dir / "best/policy.safetensors").read_bytes()))
    env = make_env(RunConfig().env, training=False)
    obs, _ = env.reset(seed=seed)
    steps, done = 0, False
    while not done:
        obs, _, terminated, truncated, _ = env.step(actor.greedy(np.asarray(obs)[None])[0])
        steps, done = steps + 1, terminated or truncated
    return steps


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "data", RunConfig(name="cartpole", seed=4))


def test_a_run_is_tested_on_its_test_block_and_its_video_is_one_episode(run_dir: Path, tmp_path: Path) -> None:
    done = rlfleet_test(run_dir, "--episodes", 20, "--video", tmp_path / "out.mp4", "--json", tmp_path / "out.json")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    base = base_seed(4, "test", 1, 0)
    assert decode(4, report["seeds"]["base"]) == ("test", 1, 0) and report["seeds"]["base"] == base
    assert (report["episodes"], report["num_envs"], len(report["returns"])) == (20, 10, 20)
    actor = build_actor(*decode_policy((run_dir / "best/policy.safetensors").read_bytes()))
    returns, lengths = evaluate(actor.greedy, RunConfig().env, 10, 20, base)
    assert (report["returns"], report["lengths"]) == (returns, lengths)  # the same episodes, played here
    assert report["mean"] == pytest.approx(np.mean(returns))
    assert report["std"] == pytest.approx(np.std(returns, ddof=1))
    half = 2.09302 * report["std"] / np.sqrt(20)  # t(0.975, 19), from the tables
    assert report["ci95"] == pytest.approx([report["mean"] - half, report["mean"] + half], abs=1e-4)
    bound = report["mean"] - 1.72913 * report["std"] * np.sqrt(2 / 20)  # t(0.95, 19)
    assert report["retest_lower_bound"] == pytest.approx(bound, abs=1e-4)
    assert report["solve_threshold"] == 475.0 and report["solve_rule"] == "retest_lower_bound_95"
    assert report["solved"] is bool(bound >= 475.0) and report["reaches_threshold"] is bool(report["mean"] >= 475.0)

    video = report["video"]
    assert video["seed"] == base + 10
    assert video["length"] == replay_length(run_dir, base + 10) == video["return"]  # CartPole pays 1 per step
    assert video["frames"] == video["length"] + 1
    assert sum(1 for _ in iio.imiter(tmp_path / "out.mp4")) == video["length"] + 1
    assert f"seeds    {base}..{base + 9}: run seed 4, test block of task 1, counter 0" in done.stdout
    assert (f"solved   {'yes' if report['solved'] else 'no'}: re-test lower bound {report['retest_lower_bound']:.2f}"
            in done.stdout)


def test_a_gif_plays_the_episode_and_the_json_goes_to_the_run_dir(run_dir: Path, tmp_path: Path) -> None:
    done = rlfleet_test(run_dir, "--episodes", 4, "--num-envs", 2, "--seed-counter", 3, "--video",
                        tmp_path / "out.gif")
    assert done.returncode == 0, done.stderr
    report = json.loads((run_dir / "test.json").read_text())
    base = base_seed(4, "test", 1, 3)
    assert report["seeds"]["base"] == base and report["video"]["seed"] == base + 2
    length = replay_length(run_dir, base + 2)
    assert report["video"]["length"] == length
    gif = Image.open(tmp_path / "out.gif")
    durations = []
    for index in range(gif.n_frames):
        gif.seek(index)
        durations.append(gif.info["duration"])
    # pillow stores identical consecutive frames as one longer frame: the episode's L + 1 frames play as long
    assert gif.n_frames <= length + 1
    assert sum(durations) == (length + 1) * 1000 // CARTPOLE_FPS


def test_bad_input_in_a_real_process_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = rlfleet_test(tmp_path / "data" / "runs" / "missing")
    assert done.returncode == 2
    assert done.stderr == f"rlfleet test: no run directory {tmp_path / 'data' / 'runs' / 'missing'}\n"
    assert done.stdout == ""


@pytest.mark.parametrize(("args", "message"), [
    (["{run}", "--episodes", "25"], "--episodes (25) must be a multiple of --num-envs (10)"),
    (["{run}", "--video", "{tmp}/out.avi"], "give a .mp4 or .gif file"),
    (["{run}", "--version", "2"], "policy v2 is not in"),
    (["{run}", "--policy", "{tmp}/other.safetensors"], "was made for float32 observations of shape (3,)"),
    (["{run}", "--config", "{tmp}/missing.yaml"], "no run config"),
    (["--policy", "{tmp}/other.safetensors"], "give RUN_DIR, or both --policy FILE and --config CONFIG"),
    (["{tmp}/nobest/data/runs/r"], "has no best policy yet"),
])
def test_bad_input_is_refused_with_exit_2_and_one_line(run_dir: Path, tmp_path: Path, args: list[str],
                                                       message: str) -> None:
    other = write_run(tmp_path / "other", RunConfig(name="o"), spaces=flat_spaces(3, 2))
    (other / "best/policy.safetensors").rename(tmp_path / "other.safetensors")
    write_run(tmp_path / "nobest" / "data", RunConfig(name="r"))
    (tmp_path / "nobest/data/runs/r/best/policy.safetensors").unlink()
    result = CliRunner().invoke(app, ["test", *(a.format(run=run_dir, tmp=tmp_path) for a in args)])
    assert result.exit_code == 2
    assert result.stderr.startswith("rlfleet test: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
