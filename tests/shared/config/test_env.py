"""The env section: registered ids and user entry points with kwargs, time limits, and bad input refused by the
preflight, before anything starts, with a message naming the field and what would work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from rlfleet.shared.config import envcheck
from rlfleet.shared.config.env import REGISTERED
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import EnvConfig, RunConfig, load_run_config
from rlfleet.shared.envs.build import make_vector_env
from tests.support import userenv
from tests.support.repo import REPO

COUNT = "tests.support.userenv:CountEnv"


def _load(tmp_path: Path, env: dict) -> EnvConfig:
    """The env section of a config file, as the launcher and the coordinator take it: loaded, then preflighted."""
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"env": env}))
    config = load_run_config(path)
    preflight(config)
    return config.env


def _steps(env: EnvConfig, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Observations, rewards, terminated and truncated of `steps` steps of one env."""
    vec = make_vector_env(env, 1)
    try:
        vec.reset(seed=0)
        rows = [vec.step(np.zeros(1, np.int64))[:4] for _ in range(steps)]
    finally:
        vec.close()
    return tuple(np.stack([r[k][0] for r in rows]) for k in range(4))  # type: ignore[return-value]


def test_user_class_is_built_with_its_kwargs_and_the_configured_time_limit(tmp_path: Path) -> None:
    env = _load(tmp_path, {"id": COUNT, "kwargs": {"length": 50, "reward": 2.0}, "max_episode_steps": 3})
    obs, rewards, terminated, truncated = _steps(env, 4)
    assert obs[0].tolist() == [1, 50]  # [t, length]: the kwarg reached the constructor
    assert rewards.tolist() == [2.0] * 4
    assert truncated.tolist() == [False, False, True, False]  # the time limit, long before length=50
    assert not terminated.any()


def test_user_factory_is_called_with_its_kwargs(tmp_path: Path) -> None:
    env = _load(tmp_path, {"id": "tests.support.userenv:short_count_env", "kwargs": {"length": 2}})
    obs, rewards, terminated, truncated = _steps(env, 3)
    assert obs[0].tolist() == [1, 2]
    assert rewards.tolist() == [0.5] * 3
    assert terminated.tolist() == [False, True, False] and not truncated.any()


def test_registered_id_takes_kwargs_and_max_episode_steps(tmp_path: Path) -> None:
    env = _load(tmp_path, {"id": "CartPole-v1", "kwargs": {"sutton_barto_reward": True}, "max_episode_steps": 2})
    _, rewards, _, truncated = _steps(env, 2)
    assert rewards.tolist() == [0.0, 0.0]  # Sutton and Barto's reward: 0 per step, -1 on failure
    assert truncated.tolist() == [False, True]


def test_the_env_section_survives_json_as_every_task_carries_it() -> None:
    env = EnvConfig(id=COUNT, kwargs={"length": 4, "reward": 0.5}, max_episode_steps=3,
                    wrappers=[{"name": "scale_reward", "scale": 0.1}, {"name": "frame_stack", "frames": 2}])
    assert EnvConfig.model_validate_json(env.model_dump_json()) == env


def test_a_section_is_built_once_however_often_it_is_preflighted(monkeypatch: pytest.MonkeyPatch) -> None:
    built = []
    monkeypatch.setattr(userenv, "short_count_env", lambda length: built.append(length) or userenv.CountEnv(length))
    for _ in range(3):
        preflight(RunConfig(env=EnvConfig(id="tests.support.userenv:short_count_env", kwargs={"length": 7})))
    assert built == [7]


def test_validating_builds_no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every claimed task carries the env section: validating it must cost nothing (the preflight builds it)."""

    def refuse(*_: object) -> envcheck.Verdict:
        raise AssertionError("built")

    monkeypatch.setattr(envcheck, "_build_here", refuse)
    monkeypatch.setattr(envcheck, "_build_in_child", refuse)
    assert EnvConfig(solve_threshold=10).id == "CartPole-v1"
    # the default threshold is the registration's: left for the preflight to read (shared/config/threshold.py)
    assert EnvConfig.model_validate({"id": "CartPole-v1", "kwargs": {}, "wrappers": []}).solve_threshold == REGISTERED
    section = {"id": "tests.support.userenv:short_count_env", "kwargs": {"length": 7}, "max_episode_steps": 9}
    assert EnvConfig.model_validate(section).max_episode_steps == 9
    assert RunConfig.model_validate({"env": {"id": "NoSuchEnv-v9"}}).env.id == "NoSuchEnv-v9"


# ----- bad input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("env", "field", "hints"), [
    ({"id": "CartPole-v7"}, "env.id", ["not a registered gymnasium id", "'CartPole-v1'", "entry point"]),
    ({"id": "tests.shared.no_such_module:Env"}, "env.id", ["cannot import module 'tests.shared.no_such_module'",
                                                           "PYTHONPATH"]),
    ({"id": "tests.support.userenv:CountEnvv"}, "env.id", ["has no class or function 'CountEnvv'", "'CountEnv'"]),
    ({"id": "tests.support.userenv:not_an_env"}, "env.id", ["returned a object, not a gymnasium.Env"]),
    ({"id": COUNT, "kwargs": {"lenght": 5}}, "env.kwargs", ["unexpected keyword argument 'lenght'",
                                                             "accepts: length, reward"]),
    ({"id": "tests.support.userenv:short_count_env"}, "env.kwargs", ["missing 1 required positional argument",
                                                                    "accepts: length"]),
    ({"id": "CartPole-v1", "kwargs": {"gravity": 3}}, "env.kwargs", ["unexpected keyword argument 'gravity'",
                                                                     "accepts: sutton_barto_reward"]),
    ({"wrappers": [{"name": "clip_actions"}]}, "env.wrappers[0]", ["clip_actions", "Box", "Discrete(2)"]),
    ({"id": COUNT, "wrappers": [{"name": "frame_stack", "frames": 2}, {"name": "clip_actions"}]},
     "env.wrappers[1]", ["clip_actions", "Box"]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_env_is_refused_at_load_naming_the_field(tmp_path: Path, env: dict, field: str,
                                                     hints: list[str]) -> None:
    with pytest.raises(ValidationError) as info:
        _load(tmp_path, env)
    message = str(info.value)
    assert f"{field}: " in message
    for hint in hints:
        assert hint in message


@pytest.mark.parametrize(("env", "loc", "hint"), [
    ({"wrappers": [{"name": "normalize"}]}, "env.wrappers.0", "'clip_actions', 'frame_stack', 'scale_reward'"),
    ({"wrappers": [{"frames": 4}]}, "env.wrappers.0", "discriminator 'name'"),
    ({"wrappers": [{"name": "frame_stack"}]}, "env.wrappers.0.frame_stack.frames", "Field required"),
    ({"wrappers": [{"name": "frame_stack", "frames": 0}]}, "env.wrappers.0.frame_stack.frames", "greater than"),
    ({"wrappers": [{"name": "scale_reward", "scale": 0}]}, "env.wrappers.0.scale_reward.scale", "greater than"),
    ({"wrappers": [{"name": "scale_reward", "scale": float("nan")}]}, "env.wrappers.0.scale_reward.scale",
     "finite"),
    ({"wrappers": [{"name": "clip_actions", "low": -1}]}, "env.wrappers.0.clip_actions.low", "Extra inputs"),
    ({"max_episode_steps": 0}, "env.max_episode_steps", "greater than"),
    ({"kwargs": {"when": "2026-01-01"}}, "env.kwargs.when", "JSON value"),  # YAML reads it as a date
    ({"kwargs": {"x": float("inf")}}, "env.kwargs.x", "finite"),
    ({"kwargs": [1, 2]}, "env.kwargs", "valid dictionary"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_malformed_env_section_is_refused_before_anything_is_built(tmp_path: Path, env: dict, loc: str,
                                                                   hint: str) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"env": env}).replace("'2026-01-01'", "2026-01-01"))
    with pytest.raises(ValidationError) as info:
        load_run_config(path)
    assert loc in str(info.value) and hint in str(info.value)


def test_a_process_without_gymnasium_checks_the_env_in_a_child_and_stays_without_it(tmp_path: Path) -> None:
    """The coordinator never loads gymnasium (nor the user's env module): its preflight still refuses a bad env."""
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump({"env": {"id": COUNT, "kwargs": {"length": 3}}}))
    bad.write_text(yaml.safe_dump({"env": {"id": COUNT, "kwargs": {"length": 3, "colour": "red"}}}))
    script = f"""
import sys
from pydantic import ValidationError
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import load_run_config
print(preflight(load_run_config(__import__("pathlib").Path({str(good)!r}))).config.env.kwargs)
try:
    preflight(load_run_config(__import__("pathlib").Path({str(bad)!r})))
except ValidationError as exc:
    print(str(exc).splitlines()[2])
print(sorted(m for m in ("gymnasium", "tests.support.userenv") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    kwargs, error, loaded = done.stdout.strip().splitlines()
    assert kwargs == "{'length': 3}"
    assert "env.kwargs: " in error and "unexpected keyword argument 'colour'" in error
    assert loaded == "[]"
