"""User errors on the command line: one line per problem naming the field, the value and what to write, exit 2 and
no traceback (a real `rlfleet` process, its output captured); `--debug` keeps the traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import one_line_exit_2, rlfleet


def test_a_config_typo_is_one_line_per_key_with_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "my.yaml").write_text("name: mine\ncolector:\n  num_envs: 2\ndqn:\n  batchsize: 32\n")
    first, second = one_line_exit_2(rlfleet("up", "--config", "my.yaml", cwd=tmp_path), lines=2)
    assert first == "rlfleet up: my.yaml: algo.dqn.batchsize: unknown key (value 32); did you mean 'batch_size'?"
    assert second == "rlfleet up: my.yaml: colector: unknown key (value {'num_envs': 2}); did you mean 'collector'?"


def test_a_bad_value_names_the_field_the_value_and_the_rule(tmp_path: Path) -> None:
    (tmp_path / "my.yaml").write_text("collector:\n  num_envs: many\n")
    done = rlfleet("up", "--config", "my.yaml", "--set", "budget.max_env_steps=0", cwd=tmp_path)
    file_value, override = one_line_exit_2(done, lines=2)
    assert file_value.startswith("rlfleet up: my.yaml: collector.num_envs: Input should be a valid integer")
    assert file_value.endswith("(value 'many')")
    assert override == "rlfleet up: my.yaml: budget.max_env_steps: Input should be greater than or equal to 1 (value 0)"


def test_a_yaml_syntax_error_names_the_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "my.yaml").write_text("name: mine\nenv:\n  id: [CartPole-v1\n")
    (line,) = one_line_exit_2(rlfleet("up", "--config", "my.yaml", cwd=tmp_path))
    assert line.startswith("rlfleet up: my.yaml:4:1: YAML syntax error: expected ',' or ']', but got "
                           "'<stream end>' (while parsing a flow sequence at line 3); fix the YAML there")


def test_a_missing_config_file_says_where_it_looked(tmp_path: Path) -> None:
    (line,) = one_line_exit_2(rlfleet("up", "--config", "nowhere/my.yaml", cwd=tmp_path))
    assert line == (f"rlfleet up: no such file or directory: nowhere/my.yaml; check the path (relative paths start "
                    f"from {tmp_path})")


def test_an_unknown_config_name_suggests_the_shipped_ones(tmp_path: Path) -> None:
    (line,) = one_line_exit_2(rlfleet("up", "--config", "cartpole-dq", cwd=tmp_path))
    assert line.startswith("rlfleet up: --config cartpole-dq: no config of that name (did you mean 'cartpole-dqn'")
    assert "the shipped configs are breakout-ppo, cartpole-a2c," in line and "or give a path to a YAML file" in line


def test_a_shipped_config_name_is_a_config_for_test_too(tmp_path: Path) -> None:
    (line,) = one_line_exit_2(rlfleet("test", "--policy", "p.safetensors", "--config", "cartpole-dqn", cwd=tmp_path))
    assert line == "rlfleet test: no policy file p.safetensors"  # the config was found: the policy is what is missing


def test_debug_shows_the_traceback_of_a_user_error(tmp_path: Path) -> None:
    done = rlfleet("--debug", "up", "--config", "cartpole-dq", cwd=tmp_path)
    assert done.returncode == 1 and "UserError" in done.stderr and "Traceback" in done.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (["up", "--bogus"], "rlfleet up: No such option: --bogus; see `rlfleet up --help`"),
    (["export", "p.safetensors", "out.x", "--format", "tflite"],
     "rlfleet export: Invalid value for '--format': 'tflite' is not one of 'onnx', 'torchscript'; see "
     "`rlfleet export --help`"),
    (["ctl", "set", "foo"], "rlfleet ctl set: Invalid value for SETTINGS: override 'foo' must look like key=value "
                            "(e.g. seed=3); see `rlfleet ctl set --help`"),
    (["plot", "/nowhere"], "rlfleet plot: /nowhere is not a run directory (<data dir>/runs/<name> with its "
                           "journal, coordinator.sqlite): give one as `rlfleet runs` lists them"),
], ids=["unknown-option", "bad-choice", "nested-command", "not-a-run"])
def test_a_mistyped_option_or_argument_is_one_line_too(tmp_path: Path, args: list[str], expected: str) -> None:
    assert one_line_exit_2(rlfleet(*args, cwd=tmp_path)) == [expected]


def test_version_prints_one_line(tmp_path: Path) -> None:
    done = rlfleet("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("rlfleet 0.") and done.stdout.count("\n") == 1
