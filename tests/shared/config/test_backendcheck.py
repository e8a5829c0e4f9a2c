"""collector.env_backend and collector.double_buffer: what cannot work is refused when the config loads, naming
the field and what would work; an EnvPool backend only where EnvPool reproduces the env section."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from pydantic import ValidationError

from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.envs.vector import EnvBackendError, EnvPoolVectorEnv, backend_problem, envpool_task


def config(env: dict[str, Any], **collector: Any) -> RunConfig:
    return RunConfig.model_validate({"env": env, "collector": collector})


def test_an_unknown_backend_is_refused_naming_the_field_and_the_choices() -> None:
    with pytest.raises(ValidationError) as err:
        config({"id": "CartPole-v1"}, env_backend="subprocess")
    assert err.value.errors()[0]["loc"] == ("collector", "env_backend")
    assert "'sync', 'async' or 'envpool'" in str(err.value)


@pytest.mark.parametrize(("collector", "says"), [
    ({"double_buffer": True}, "needs collector.env_backend: async (it is sync)"),
    ({"double_buffer": True, "env_backend": "async", "num_envs": 1}, "set collector.num_envs to 2 or more"),
])
def test_double_buffering_without_two_async_halves_is_refused(collector: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match="collector.double_buffer") as err:
        config({"id": "CartPole-v1"}, **collector)
    assert says in str(err.value)


def test_self_play_is_refused_with_envs_outside_the_collector() -> None:
    with pytest.raises(ValidationError, match="collector.env_backend: async: self_play's opponents"):
        RunConfig.model_validate({"env": {"id": "rlfleet/TicTacToe-v0"}, "algo": "dqn", "self_play": {},
                                  "collector": {"env_backend": "async"}})


@pytest.mark.parametrize(("env", "says"), [
    ({"id": "CartPole-v1", "wrappers": [{"name": "scale_reward", "scale": 0.1}]},
     "env.wrappers (scale_reward) wrap Python envs"),
    ({"id": "tests.support.userenv:CountEnv"}, "EnvPool has no env 'tests.support.userenv:CountEnv'"),
    ({"id": "rlfleet/TicTacToe-v0"}, "EnvPool has no env 'rlfleet/TicTacToe-v0'"),
    ({"id": "CartPole-v1", "kwargs": {"sutton_barto_reward": True}}, "env.kwargs ['sutton_barto_reward']"),
])
def test_an_env_envpool_cannot_step_is_refused_at_load(env: dict[str, Any], says: str) -> None:
    """The preflight (a child interpreter, as in the coordinator and the launcher) refuses it at
    `collector`, saying why and to set env_backend: async."""
    pytest.importorskip("envpool")
    with pytest.raises(ValidationError) as err:
        preflight(config(env, env_backend="envpool"))
    assert err.value.errors()[0]["loc"] == ("collector",)
    message = str(err.value)
    assert "collector.env_backend: envpool:" in message and says in message
    assert "set collector.env_backend: async" in message or "drop the wrappers or set" in message


def test_an_env_envpool_has_passes_the_preflight() -> None:
    pytest.importorskip("envpool")
    assert preflight(config({"id": "CartPole-v1"}, env_backend="envpool")).spaces.obs.shape == (4,)
    assert envpool_task(config({"id": "Pendulum-v1"}).env) == "Pendulum-v1"


def test_an_ale_id_is_refused_not_mistaken_for_envpools_preprocessed_game() -> None:
    pytest.importorskip("envpool")
    with pytest.raises(EnvBackendError, match="EnvPool's Atari games \\(Pong-v5\\) are not ALE/Pong-v5"):
        envpool_task(config({"id": "ALE/Pong-v5"}).env)


def test_envpool_not_installed_is_refused_saying_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A collector host without the extra: found before anything is imported."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "envpool" else find_spec(name, *a))
    env = config({"id": "CartPole-v1"}).env
    problem = backend_problem(env, "envpool")
    assert problem is not None and "EnvPool is not installed here" in problem and "rlfleet[envpool]" in problem
    with pytest.raises(EnvBackendError, match="collector.env_backend: envpool: EnvPool is not installed"):
        EnvPoolVectorEnv(env, 2)


def test_sync_and_async_step_whatever_builds() -> None:
    env = config({"id": "tests.support.userenv:CountEnv"}).env
    assert backend_problem(env, "sync") is None and backend_problem(env, "async") is None
