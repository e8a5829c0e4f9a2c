"""rlfleet test's logic: statistics, the held-out seed block, where policies are found, what is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import imageio.v3 as iio
import pytest
import torch

from rlfleet.evaluator.testing import Subject, UsageError, describe, load_subject, resolve_inputs, run_test
from rlfleet.evaluator.video import VideoError
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.envs.seeds import ENVS_PER_BLOCK, base_seed, decode
from tests.support.policies import flat_spaces, random_actor
from tests.support.run_files import write_run
from tests.support.userenv import PaintedCountEnv

torch.set_num_threads(1)
RUN_SEED = 7


class SeedLogEnv(PaintedCountEnv):
    """Remembers every seed it is reset with, so a test can see which seeds a vector env handed out."""

    seeds: ClassVar[list[int]] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is not None:
            SeedLogEnv.seeds.append(seed)
        return super().reset(seed=seed, options=options)


def subject(env: dict[str, Any], tmp_path: Path) -> Subject:
    config = RunConfig.model_validate({"seed": RUN_SEED, "env": {**env, "solve_threshold": 3.0}})
    return Subject(tmp_path / "p.safetensors", tmp_path / "c.yaml", config, random_actor(flat_spaces(2, 2)))


@pytest.fixture
def seed_log() -> list[int]:
    SeedLogEnv.seeds.clear()
    return SeedLogEnv.seeds


def test_the_report_says_the_solve_rule_the_t_interval_and_where_the_mean_stands(tmp_path: Path) -> None:
    sub = subject({"id": "tests.support.userenv:CountEnv", "kwargs": {"length": 3}}, tmp_path)
    report = run_test(sub, episodes=4, num_envs=2, counter=0, video=None)
    assert (report["std"], report["ci95"], report["retest_lower_bound"]) == (0.0, (3.0, 3.0), 3.0)
    assert (report["solve_rule"], report["solved"], report["reaches_threshold"]) == ("retest_lower_bound_95", True,
                                                                                    True)
    # the same shape of report for a spread test whose mean clears 3 but whose re-test bound does not
    spread = {**report, "mean": 3.5, "std": 1.2, "ci95": (1.59, 5.41), "retest_lower_bound": 1.51, "solved": False}
    lines = describe(spread).splitlines()
    assert "std 1.20, 95% CI [1.59, 5.41] (Student's t, 3 df)" in lines[3]
    assert lines[4] == ("solved   no: re-test lower bound 1.51 < env.solve_threshold 3 (95% lower prediction bound "
                        "of an independent re-test's mean >= threshold); the mean 3.50 reaches it")


def test_one_episode_has_no_spread_and_confirms_nothing(tmp_path: Path) -> None:
    report = run_test(subject({"id": "tests.support.userenv:CountEnv", "kwargs": {"length": 3}}, tmp_path),
                      episodes=1, num_envs=1, counter=0, video=None)
    assert (report["std"], report["ci95"], report["retest_lower_bound"], report["solved"]) == (None, None, None, False)
    assert "solved   no: one episode bounds no re-test" in describe(report)


def test_envs_play_exactly_the_test_block(tmp_path: Path, seed_log: list[int]) -> None:
    report = run_test(subject({"id": "tests.evaluator.test_testing:SeedLogEnv", "kwargs": {"length": 3}}, tmp_path),
                      episodes=6, num_envs=3, counter=2, video=tmp_path / "v.mp4")
    base = base_seed(RUN_SEED, "test", 1, 2)
    assert seed_log == [base, base + 1, base + 2, base + 3]  # three test envs, then the video's episode
    for seed in seed_log:
        block, offset = divmod(seed, ENVS_PER_BLOCK)
        assert decode(RUN_SEED, block * ENVS_PER_BLOCK) == ("test", 1, 2) and offset <= 3
    others = {base_seed(RUN_SEED, mode, task, counter) // ENVS_PER_BLOCK
              for mode in ("train", "valid") for task in range(8) for counter in range(8)}
    assert not others & {seed // ENVS_PER_BLOCK for seed in seed_log}
    assert report["seeds"] == {"run_seed": RUN_SEED, "mode": "test", "task": 1, "counter": 2, "base": base,
                               "env_seeds": [base, base + 2]}
    assert report["video"]["seed"] == base + 3
    assert report["returns"] == [3.0] * 6 and report["lengths"] == [3] * 6
    assert (report["mean"], report["solved"]) == (3.0, True)  # no spread: the re-test bound is the mean, 3 >= 3


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_the_video_holds_one_frame_per_step_and_the_first(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"episode{suffix}"
    report = run_test(subject({"id": "tests.support.userenv:PaintedCountEnv", "kwargs": {"length": 5}}, tmp_path),
                      episodes=2, num_envs=2, counter=0, video=path)
    assert report["video"] == {"path": str(path), "seed": report["seeds"]["base"] + 2, "return": 5.0, "length": 5,
                               "frames": 6}
    frames = list(iio.imiter(path))
    assert len(frames) == 6
    assert [round(frame.mean() / 40) for frame in frames] == [0, 1, 2, 3, 4, 5]  # frame t shows step t (lossy mp4)


def test_an_env_that_cannot_render_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(VideoError, match="CountEnv cannot render a video"):
        run_test(subject({"id": "tests.support.userenv:CountEnv"}, tmp_path), 2, 2, 0, tmp_path / "v.gif")


def test_bad_requests_are_refused_before_any_episode(tmp_path: Path, seed_log: list[int]) -> None:
    sub = subject({"id": "tests.evaluator.test_testing:SeedLogEnv"}, tmp_path)
    with pytest.raises(UsageError, match=r"--episodes \(25\) must be a multiple of --num-envs \(10\)"):
        run_test(sub, 25, 10, 0, None)
    with pytest.raises(VideoError, match="give a .mp4 or .gif file"):
        run_test(sub, 2, 2, 0, tmp_path / "v.avi")
    assert seed_log == []


def test_a_run_dir_gives_its_best_policy_config_and_json(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunConfig(name="r"))
    policy, config, out = resolve_inputs(run_dir, None, None, None)
    assert (policy, config, out) == (run_dir / "best/policy.safetensors", run_dir / "config.yaml",
                                     run_dir / "test.json")
    store = run_dir / "store" / "policies"
    store.mkdir(parents=True)
    (store / "v00000012.safetensors").write_bytes(policy.read_bytes())
    assert resolve_inputs(run_dir, None, None, 12)[0] == store / "v00000012.safetensors"
    assert resolve_inputs(run_dir, tmp_path / "x", tmp_path / "y", None) == (tmp_path / "x", tmp_path / "y",
                                                                             run_dir / "test.json")
    assert resolve_inputs(None, tmp_path / "x", tmp_path / "y", None) == (tmp_path / "x", tmp_path / "y", None)


@pytest.mark.parametrize(("args", "message"), [
    (("runs/missing", None, None, None), "no run directory"),
    ((".", None, None, None), "is not a run directory"),
    (("runs/r", None, None, 3), "policy v3 is not in"),
    (("runs/r", "p", None, 3), "give --policy or --version, not both"),
    ((None, "p", None, None), "give RUN_DIR, or both --policy FILE and --config CONFIG"),
    ((None, "p", "c", 2), "--version picks a policy from RUN_DIR's store"),
])
def test_inputs_that_name_no_policy_are_refused(tmp_path: Path, args: tuple, message: str) -> None:
    write_run(tmp_path, RunConfig(name="r"))
    paths = [None if a is None else tmp_path / a for a in args[:3]]
    with pytest.raises(UsageError, match=message):
        resolve_inputs(*paths, args[3])


def test_a_run_without_a_best_policy_yet_is_refused(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunConfig(name="r"))
    (run_dir / "best" / "policy.safetensors").unlink()
    with pytest.raises(UsageError, match="has no best policy yet"):
        resolve_inputs(run_dir, None, None, None)


def test_a_policy_made_for_another_env_is_refused(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunConfig(name="r"), spaces=flat_spaces(3, 2))
    with pytest.raises(UsageError, match=r"made for float32 observations of shape \(3,\).*CartPole-v1.*\(4,\)"):
        load_subject(run_dir / "best/policy.safetensors", run_dir / "config.yaml")


@pytest.mark.parametrize(("policy", "config", "message"), [
    ("missing.safetensors", "runs/r/config.yaml", "no policy file"),
    ("runs/r/config.yaml", "runs/r/config.yaml", "cannot read policy .*not a safetensors file"),
    ("runs/r/best/policy.safetensors", "missing.yaml", "no run config"),
    ("runs/r/best/policy.safetensors", "bad.yaml", r"invalid run config .*bad.yaml: evaluation.episodes"),
])
def test_unreadable_inputs_are_refused_in_one_line(tmp_path: Path, policy: str, config: str, message: str) -> None:
    write_run(tmp_path, RunConfig(name="r"))
    (tmp_path / "bad.yaml").write_text("evaluation: {episodes: -1}\n")
    with pytest.raises(UsageError, match=message) as caught:
        load_subject(tmp_path / policy, tmp_path / config)
    assert "\n" not in str(caught.value)


def test_a_board_game_policy_is_tested_against_each_baseline_alone(tmp_path: Path) -> None:
    """For a two-player game, the report adds won / drawn / lost against every baseline over the same games."""
    from rlfleet.shared.envs.build import make_vector_env
    from rlfleet.shared.envs.gymspaces import describe

    env = {"id": "rlfleet/TicTacToe-v0", "kwargs": {"opponent": {"random": 0.5, "lookahead": 0.5}}}
    vec = make_vector_env(RunConfig.model_validate({"env": {**env, "solve_threshold": 0.5}}).env, 1)
    spaces = describe(vec)
    vec.close()
    config = RunConfig.model_validate({"seed": RUN_SEED, "env": {**env, "solve_threshold": 0.5}})
    actor = random_actor(spaces, "q_values", (8,))
    report = run_test(Subject(tmp_path / "p.safetensors", tmp_path / "c.yaml", config, actor), 200, 10, 0, None)
    battles = {b["opponent"]: b for b in report["battles"]}
    assert set(battles) == {"random", "lookahead"}
    assert all(b["games"] == b["wins"] + b["draws"] + b["losses"] == 200 for b in battles.values())
    # an untrained (masked, so always legal) policy loses more often to the lookahead than to random play
    assert battles["lookahead"]["losses"] > battles["random"]["losses"]
    assert "battle   vs lookahead: " in describe_report(report)


def test_a_run_with_a_battle_rule_is_solved_by_its_bars_not_by_the_threshold(tmp_path: Path) -> None:
    """`rlfleet test` judges a battle-rule run as the judge does: every baseline's bar over its games."""
    from rlfleet.shared.config.plan import RunPlan

    rule = {"random": {"min_win_or_draw": 0.5}, "lookahead": {"min_win": 0.99}}
    config = RunConfig.model_validate({"seed": RUN_SEED, "env": {"id": "rlfleet/TicTacToe-v0", "solve_threshold": -5},
                                       "evaluation": {"against": rule}})
    actor = random_actor(RunPlan.of(config).spaces, "q_values", (8,))
    report = run_test(Subject(tmp_path / "p.safetensors", tmp_path / "c.yaml", config, actor), 100, 10, 0, None)
    assert report["mean"] >= -5 and not report["solved"]  # the threshold would pass; the lookahead bar does not
    assert report["rule"]["lookahead"] == {"bar": "win >= 0.99", "met": False}
    assert "solved   no: vs random win or draw >= 0.5: " in describe_report(report)
    assert "vs lookahead win >= 0.99: not met" in describe_report(report)


def describe_report(report: dict[str, Any]) -> str:
    from rlfleet.evaluator.testing import describe

    return describe(report)


def test_a_run_with_no_threshold_gets_a_score_and_no_verdict(tmp_path: Path) -> None:
    config = RunConfig.model_validate({"seed": RUN_SEED, "env": {"id": "tests.support.userenv:PaintedCountEnv",
                                                                 "kwargs": {"length": 3}, "solve_threshold": None}})
    report = run_test(Subject(tmp_path / "p.safetensors", tmp_path / "c.yaml", config, random_actor(flat_spaces(2, 2))),
                      episodes=2, num_envs=2, counter=0, video=None)
    assert (report["mean"], report["solve_threshold"], report["solved"]) == (3.0, None, None)
    assert "solved   no threshold (env.solve_threshold is null): a score, no verdict" in describe(report)


def test_a_config_that_leaves_the_threshold_out_is_tested_against_the_registrations(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, RunConfig(name="r"))  # CartPole-v1, env.solve_threshold left out: 475
    assert load_subject(*resolve_inputs(run_dir, None, None, None)[:2]).config.env.threshold == 475.0
