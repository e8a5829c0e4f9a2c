"""bench/time_to_solve.py's recurrent cases: SB3's side steps the env the rlfleet config describes, with the same
observations, and trains with the config's own hyperparameters on POPGym, with rl-zoo's entry on both sides on
CartPole without velocities."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.preprocessing import get_flattened_obs_dim

from rlfleet.shared.algorithms.recurrent_ppo import RecurrentPPOParams
from rlfleet.shared.config.run_config import RunConfig, load_run_config
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.gymspaces import RawObservation
from rlfleet.shared.envs.wrappers import NormalizeObs, NormalizeReward

REPO = Path(__file__).resolve().parents[2]
COLLECTORS = 2  # `rlfleet up`'s default collector processes (launcher/services.py)


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_time_to_solve", REPO / "bench" / "time_to_solve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


BENCH = _load_bench()
RECURRENT = sorted(name for name, case in BENCH.CASES.items() if case.recurrent is not None)


def test_every_recurrent_case_of_issue_25_is_in_the_table() -> None:
    assert RECURRENT == ["recurrent_ppo", "recurrent_ppo_count_recall", "recurrent_ppo_pendulum",
                         "recurrent_ppo_repeat_previous"]


@pytest.mark.parametrize("algo", RECURRENT)
def test_sb3_steps_the_observations_of_the_rlfleet_config(algo: str) -> None:
    case = BENCH.CASES[algo]
    config = load_run_config(REPO / case.config)
    ours, theirs = make_env(config.env), BENCH.sb3_env(config.env)
    try:
        # SB3's space is the env's own (a Discrete stays one, for SB3 to one-hot encode); in rlfleet's transport
        # form it is exactly rlfleet's, and SB3's network reads as many values as rlfleet's policy encodes
        raw = isinstance(ours, RawObservation)
        assert (RawObservation(theirs) if raw else theirs).observation_space == ours.observation_space
        if isinstance(ours, RawObservation):
            assert get_flattened_obs_dim(theirs.observation_space) == ours.described.encoded_size
        obs, _ = ours.reset(seed=7)
        sb3_obs, _ = theirs.reset(seed=7)
        actions = np.random.default_rng(0).integers(0, 2, 60)
        for step, action in enumerate(actions):
            # the evaluator's batch of rlfleet observations, in the form SB3's policy takes
            np.testing.assert_array_equal(BENCH.sb3_observation(theirs.observation_space, obs[None]),
                                          np.asarray(sb3_obs)[None], err_msg=f"step {step}")
            act = np.array([action * 2.0 - 1.0], np.float32) if isinstance(ours.action_space, gym.spaces.Box) \
                else int(action)
            obs, _, term, trunc, _ = ours.step(act)
            sb3_obs, _, term_sb3, trunc_sb3, _ = theirs.step(act)
            assert (term, trunc) == (term_sb3, trunc_sb3)
            if term or trunc:
                obs, _ = ours.reset(seed=step)
                sb3_obs, _ = theirs.reset(seed=step)
    finally:
        ours.close()
        theirs.close()


def test_the_velocities_are_gone_on_both_sides() -> None:
    for algo, width in (("recurrent_ppo", 2), ("recurrent_ppo_pendulum", 2)):
        env = BENCH.sb3_env(load_run_config(REPO / BENCH.CASES[algo].config).env)
        assert env.observation_space.shape == (width,), algo
        env.close()


@pytest.mark.parametrize("algo", ["recurrent_ppo_repeat_previous", "recurrent_ppo_count_recall"])
def test_popgym_trains_with_the_same_hyperparameters_on_both_sides(algo: str) -> None:
    case = BENCH.CASES[algo]
    config = load_run_config(REPO / case.config)
    algo_config, sb3 = config.algo, case.recurrent.kwargs
    assert isinstance(algo_config, RecurrentPPOParams)
    assert case.recurrent.envs == config.collector.num_envs * COLLECTORS and not case.recurrent.normalize
    assert sb3["n_steps"] == config.collector.chunk_steps
    assert case.sb3_timesteps == config.budget.max_env_steps and case.threshold is None
    assert (sb3["learning_rate"], sb3["gamma"], sb3["gae_lambda"], sb3["clip_range"], sb3["n_epochs"],
            sb3["batch_size"], sb3["vf_coef"], sb3["ent_coef"], sb3["max_grad_norm"]) == (
        algo_config.learning_rate, algo_config.gamma, algo_config.gae_lambda, algo_config.clip_range,
        algo_config.epochs, algo_config.minibatch_size, algo_config.value_coef, algo_config.entropy_coef,
        algo_config.max_grad_norm)
    policy, net = sb3["policy_kwargs"], algo_config.net
    assert net.core is not None and net.core.kind == "lstm"
    assert policy["lstm_hidden_size"] == net.core.hidden and policy["net_arch"] == list(net.hidden)
    assert policy["activation_fn"].__name__.lower() == net.activation
    # rlfleet's critic reads the core's output without training the core: sb3-contrib's shared_lstm
    assert policy["shared_lstm"] and not policy["enable_critic_lstm"]


def rl_zoo_entry(algo: str) -> tuple[Any, RunConfig, RecurrentPPOParams, dict[str, Any]]:
    """A recurrent case that runs one rl-zoo entry on both sides: its SB3 side, the rlfleet config, the config's
    algorithm section and SB3's keyword arguments, checked for the same envs, rollout length and budget."""
    case = BENCH.CASES[algo]
    config = load_run_config(REPO / case.config)
    algo_config, sb3 = config.algo, case.recurrent.kwargs
    assert isinstance(algo_config, RecurrentPPOParams)
    assert case.recurrent.envs == config.collector.num_envs * COLLECTORS
    assert sb3["n_steps"] == config.collector.chunk_steps
    assert case.sb3_timesteps == config.budget.max_env_steps
    return case, config, algo_config, sb3


def assert_the_same_network(policy: dict[str, Any], algo_config: RecurrentPPOParams) -> None:
    """sb3-contrib's MlpLstmPolicy kwargs describe the config's network: the LSTM, the layers after it, their
    activation, and a critic with an LSTM of its own."""
    net = algo_config.net
    assert net.core is not None and net.core.kind == "lstm" and policy["lstm_hidden_size"] == net.core.hidden
    assert policy["net_arch"] == {"pi": list(net.hidden), "vf": list(net.hidden)}
    assert policy["activation_fn"].__name__.lower() == net.activation
    assert policy["enable_critic_lstm"] and net.trunk == "separate_core"


def test_cartpole_without_velocities_takes_rl_zoos_entry_on_both_sides() -> None:
    """configs/cartpole_novel_rppo.yaml is rl-zoo's CartPoleNoVel-v1 entry, as the SB3 side runs it: the same
    rollout, optimisation, schedules, normalisation and network, with a critic LSTM of its own on both."""
    case, config, algo_config, sb3 = rl_zoo_entry("recurrent_ppo")
    assert (sb3["gamma"], sb3["gae_lambda"], sb3["n_epochs"], sb3["batch_size"], sb3["ent_coef"]) == (
        algo_config.gamma, algo_config.gae_lambda, algo_config.epochs, algo_config.minibatch_size,
        algo_config.entropy_coef)
    # rl-zoo's lin_0.001 and lin_0.2: SB3 calls them with the progress left (1 at the start, 0 at the end)
    assert (sb3["learning_rate"](1.0), sb3["clip_range"](1.0)) == (algo_config.learning_rate, algo_config.clip_range)
    assert (sb3["learning_rate"](0.0), sb3["clip_range"](0.0)) == (0.0, 0.0)
    for name in ("learning_rate", "clip_range"):
        schedule = algo_config.schedules[name]
        assert (schedule.kind, schedule.end, schedule.over, schedule.unit) == (
            "linear", 0.0, config.budget.max_env_steps, "env_steps")
    # rl-zoo's normalize: true is VecNormalize on observations and rewards, its discount the algorithm's
    wrappers = {type(w): w for w in config.env.wrappers}
    assert case.recurrent.normalize and NormalizeObs in wrappers
    reward = wrappers[NormalizeReward]
    assert isinstance(reward, NormalizeReward) and reward.gamma == algo_config.gamma
    assert_the_same_network(sb3["policy_kwargs"], algo_config)


def test_pendulum_without_velocity_takes_rl_zoos_entry_with_gsde_on_both_sides() -> None:
    """configs/pendulum_novel_rppo.yaml is rl-zoo's PendulumNoVel-v1 entry as the SB3 side runs it: the same
    rollout, optimisation, budget, network, critic LSTM, reward normalisation and gSDE resampled every 4 steps
    (the observations, cos and sin of the angle, are left as they are on rlfleet's side)."""
    case, config, algo_config, sb3 = rl_zoo_entry("recurrent_ppo_pendulum")
    assert (sb3["gamma"], sb3["gae_lambda"], sb3["n_epochs"], sb3["ent_coef"], sb3["learning_rate"],
            sb3["clip_range"]) == (algo_config.gamma, algo_config.gae_lambda, algo_config.epochs,
                                   algo_config.entropy_coef, algo_config.learning_rate, algo_config.clip_range)
    assert "batch_size" not in sb3 and algo_config.minibatch_size == 128  # sb3-contrib's default batch
    assert sb3["use_sde"] and sb3["sde_sample_freq"] == algo_config.sde_sample_freq
    wrappers = {type(w): w for w in config.env.wrappers}
    reward = wrappers[NormalizeReward]
    assert case.recurrent.normalize and isinstance(reward, NormalizeReward) and reward.gamma == algo_config.gamma
    assert_the_same_network(sb3["policy_kwargs"], algo_config)
    assert not sb3["policy_kwargs"]["ortho_init"] and algo_config.net.init != "orthogonal"
    assert algo_config.log_std_init == 0.0  # SB3's default
