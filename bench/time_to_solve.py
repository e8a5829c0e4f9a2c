"""Launch-to-solved time: rlfleet (full distributed stack) vs Stable-Baselines3 in one process, side by side.

  pip install -e '.[bench]'
  python bench/time_to_solve.py [--algos dqn ppo sac a2c impala recurrent_ppo ...] [--seeds 0 1 2] [--json out.json]

Each run is a whole process timed from launch until it reports "solved", by the same rule on both sides: the
mean return of 10 greedy validation episodes (evaluator/episodes.py for both) reaches the env's
threshold (475 on CartPole-v1 for dqn and ppo, -200 on Pendulum-v1 for sac) and beats the test mean of every
candidate tested so far, and then 100 held-out test episodes on test seeds (shared/envs/seeds.py) confirm it by
rlfleet's solve rule (shared/solve_rule.py: the 95% lower prediction bound of an independent re-test's mean
reaches the threshold; the same function on both sides). rlfleet validates
every published policy version in its evaluator process; SB3 validates in-process every --sb3-eval-every env
steps (default: each algorithm's own, see CASES). Each plays its episodes the way its users would: rlfleet's
evaluator on gymnasium's own vectorized implementation of the env where one is registered (CartPole's: one env
per episode), SB3 on 10 copies of the env (a SyncVectorEnv, as SB3's DummyVecEnv; SB3's VecEnv API cannot take
gymnasium's vector envs); --sb3-native-eval gives SB3 the vectorized env too. Runs alternate rlfleet / SB3 per
seed. Peak memory is the largest sum of PSS over the run's whole process tree, sampled every 0.5 s. SB3 uses the rl-zoo
hyperparameters of each algorithm for its env, as do rlfleet's configs (CASES names them). SB3 has no IMPALA:
rlfleet's IMPALA (asynchronous collectors) is measured against rlfleet's synchronous PPO of the same benchmark
run instead, and the script prints that ratio whenever both are run.

Recurrent cases (issue 25) set sb3-contrib's RecurrentPPO('MlpLstmPolicy') beside rlfleet's recurrent_ppo: on
CartPole and Pendulum without velocities (rl-zoo's CartPoleNoVel-v1 and PendulumNoVel-v1 hyperparameters on the
SB3 side) and on POPGym's memory tasks (the same hyperparameters on both sides). SB3 steps the env the rlfleet
config describes, built by rlfleet's own env builder (shared/envs/build.py make_env: obs_filter drops the
velocities there, where rl-zoo's wrapper zeroes them), so both sides see the same observations; a Discrete or
MultiDiscrete POPGym observation reaches SB3 as that space, which SB3 one-hot encodes as rlfleet's policy does.
Both sides' validations and tests carry the policy's memory through each episode and reset it at episode starts
(evaluator/episodes.py's `reset`). POPGym has no threshold: neither side can solve it, both train to the same
env-step budget and test their best validated policy on the test seeds, and the script compares the test means.

Every solved rlfleet run is then re-tested independently with `rlfleet test` (100 more greedy episodes on a
seed block none of the run used); a solve holds when the re-test's mean reaches the threshold. Both sides report
how many validation passes their test rejected. bench/hold_rate.py measures the hold rate over more envs.

Policy propagation (rlfleet): for each version N the learner publishes, the time from its "publishing policy
vN" log line until every collector has logged "acting with policy vM", M >= N (all on one machine clock).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from rlfleet.shared.config.run_config import EnvConfig

REPO = Path(__file__).resolve().parent.parent
# rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1
SB3_DQN: dict[str, Any] = dict(
    learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
    exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]))
# rl-baselines3-zoo, hyperparams/ppo.yml, CartPole-v1 (learning rate and clip range decay linearly to 0)
SB3_PPO: dict[str, Any] = dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                               learning_rate=lambda f: f * 1e-3, clip_range=lambda f: f * 0.2)
SB3_PPO_ENVS = 8
# rl-baselines3-zoo, hyperparams/sac.yml, Pendulum-v1: SB3's defaults (batch 256, tau 0.005, 100 warm-up steps,
# one gradient step per env step, 256x256 nets, auto entropy coefficient) with learning_rate 1e-3
SB3_SAC: dict[str, Any] = dict(learning_rate=1e-3)
# rl-baselines3-zoo, hyperparams/a2c.yml, CartPole-v1: SB3's A2C defaults (n_steps 5, RMSprop lr 7e-4), 8 envs
SB3_A2C: dict[str, Any] = dict(ent_coef=0.0)
SB3_A2C_ENVS = 8
# rl-baselines3-zoo, hyperparams/ppo_lstm.yml (commit 22e3ff2), CartPoleNoVel-v1: 8 envs under VecNormalize
# (observations and rewards), learning rate and clip range decay linearly to 0, one LSTM of 64 units for the actor
# and one for the critic, 64-unit ReLU heads without orthogonal init
SB3_RPPO_POLICY: dict[str, Any] = dict(ortho_init=False, activation_fn=nn.ReLU, lstm_hidden_size=64,
                                       enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64]))
SB3_RPPO_CARTPOLE: dict[str, Any] = dict(
    n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
    learning_rate=lambda f: f * 1e-3, clip_range=lambda f: f * 0.2, policy_kwargs=SB3_RPPO_POLICY)
# ppo_lstm.yml, PendulumNoVel-v1: 4 envs under VecNormalize, gSDE resampled every 4 steps, sb3-contrib's default
# batch of 128, the same policy as CartPoleNoVel-v1's
SB3_RPPO_PENDULUM: dict[str, Any] = dict(
    n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3, clip_range=0.2,
    use_sde=True, sde_sample_freq=4, policy_kwargs=SB3_RPPO_POLICY)
# POPGym: configs/popgym_*_rppo.yaml's own hyperparameters (tests/bench/test_time_to_solve.py holds them equal):
# 16 envs x 64 steps, one LSTM of 256 units whose features the critic reads without training it (rlfleet's
# recurrent_ppo, sb3-contrib's shared_lstm), 64x64 tanh heads
SB3_RPPO_POPGYM: dict[str, Any] = dict(
    n_steps=64, batch_size=256, gae_lambda=0.95, gamma=0.99, n_epochs=10, ent_coef=0.01, vf_coef=0.5,
    learning_rate=3e-4, clip_range=0.2, max_grad_norm=0.5,
    policy_kwargs=dict(lstm_hidden_size=256, shared_lstm=True, enable_critic_lstm=False, net_arch=[64, 64],
                       activation_fn=nn.Tanh))


@dataclass(frozen=True)
class Recurrent:
    """SB3's side of a recurrent case: RecurrentPPO('MlpLstmPolicy') with `kwargs` on `envs` copies of the config's
    env, under VecNormalize where rl-zoo normalizes."""

    envs: int
    normalize: bool
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Case:
    config: str  # rlfleet's run config
    env_id: str  # what SB3 plays, where `recurrent` is None (otherwise the config's whole env section)
    threshold: float | None  # None: no threshold; both sides train to the budget and test their best policy
    sb3_timesteps: int  # SB3's budget: rl-zoo's n_timesteps, or more; without a threshold, the config's
    sb3_eval_every: int  # env steps between SB3's evaluations
    sb3: bool = True  # SB3 has this algorithm
    recurrent: Recurrent | None = None  # SB3's RecurrentPPO settings for a recurrent case


# rlfleet's SAC publishes (and so is evaluated) every 100 updates; SB3 does one update per env step and is
# evaluated as often, so neither side is found solved later for being looked at less often (an evaluation
# costs SB3 about 0.1 s).
CASES = {
    "dqn": Case("configs/cartpole_dqn.yaml", "CartPole-v1", 475.0, 50_000, 1000),
    "ppo": Case("configs/cartpole_ppo.yaml", "CartPole-v1", 475.0, 100_000, 1000),
    "sac": Case("configs/pendulum_sac.yaml", "Pendulum-v1", -200.0, 20_000, 100),
    "a2c": Case("configs/cartpole_a2c.yaml", "CartPole-v1", 475.0, 500_000, 1000),
    "impala": Case("configs/cartpole_impala.yaml", "CartPole-v1", 475.0, 0, 0, sb3=False),
    # SB3's validations: about every 4 RecurrentPPO updates on CartPole (8 x 32 steps each) and POPGym (16 x 64),
    # every update on Pendulum (4 x 1,024)
    "recurrent_ppo": Case("configs/cartpole_novel_rppo.yaml", "CartPole-v1", 475.0, 100_000, 1000,
                          recurrent=Recurrent(8, True, SB3_RPPO_CARTPOLE)),
    "recurrent_ppo_pendulum": Case("configs/pendulum_novel_rppo.yaml", "Pendulum-v1", -200.0, 100_000, 4096,
                                   recurrent=Recurrent(4, True, SB3_RPPO_PENDULUM)),
    "recurrent_ppo_repeat_previous": Case(
        "configs/popgym_repeat_previous_rppo.yaml", "popgym.envs.repeat_previous:RepeatPreviousMedium", None,
        300_000, 4096, recurrent=Recurrent(16, False, SB3_RPPO_POPGYM)),
    "recurrent_ppo_count_recall": Case(
        "configs/popgym_count_recall_rppo.yaml", "popgym.envs.count_recall:CountRecallEasy", None, 300_000, 4096,
        recurrent=Recurrent(16, False, SB3_RPPO_POPGYM)),
}
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*(publishing|acting with) policy v(\d+)")


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, []))
    return pids


def _pss_mib(pids: list[int]) -> float:
    total_kib = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
        except OSError:
            continue
    return total_kib / 1024


class PeakMemory(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._done = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.5):
            self.peak = max(self.peak, _pss_mib(_tree(self.pid)))

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak


def _log_time(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def propagation_ms(logs: Path) -> list[float]:
    """Per published version: ms until every collector acts with it (or newer); versions some collector
    never reached (published at the very end) are left out."""
    published: dict[int, float] = {}
    loads: dict[str, list[tuple[float, int]]] = {}
    for log in logs.glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            found = LOG_LINE.match(line)
            if found is None:
                continue
            when, what, version = _log_time(found.group(1)), found.group(2), int(found.group(3))
            if what == "publishing" and log.name.startswith("learner"):
                published[version] = when
            elif what == "acting with" and log.name.startswith("collector"):
                loads.setdefault(log.name, []).append((when, version))
    delays = []
    for version, when in sorted(published.items()):
        reached = [min((t for t, v in seen if v >= version and t >= when - 1.0), default=None)
                   for seen in loads.values()]
        if loads and all(t is not None for t in reached):
            delays.append(max(0.0, (max(t for t in reached if t is not None) - when) * 1000))
    return delays


def run_rlfleet(seed: int, algo: str, timeout: float) -> dict:
    """One `rlfleet up` run. It ends well when it is solved or, with no threshold, when it has trained to its budget
    (and tested its best policy): `solved` says that, and `final_test` holds that test."""
    case = CASES[algo]
    ended = re.compile(rf"run {'budget_exhausted' if case.threshold is None else 'solved'} [\d.]+s after launch")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlfleet.launcher", "up", "--config", case.config, "--seed", str(seed),
             "--port", "0", "--data-dir", tmp],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        memory = PeakMemory(proc.pid)
        memory.start()
        seconds, steps, lines = None, None, []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if seconds is None and ended.match(line):
                seconds = time.monotonic() - t0
            found = re.search(r"after ([\d,]+) env steps", line)
            if found:
                steps = int(found.group(1).replace(",", ""))
            if time.monotonic() - t0 > timeout:
                proc.kill()
        proc.wait()
        peak = memory.stop()
        solved = seconds is not None and proc.returncode == 0
        (run_dir,) = (Path(tmp) / "runs").iterdir()
        summary = json.loads((run_dir / "summary.json").read_text()) if solved else {}
        return {"system": "rlfleet", "algo": algo, "seed": seed, "solved": solved,
                "seconds": seconds, "env_steps": steps, "peak_pss_mib": peak,
                "rejected": summary.get("tests_rejected"), "confirmed_by": confirmed(summary.get("confirmed_by")),
                "final_test": confirmed(summary.get("latest_test")) if case.threshold is None else None,
                "retest": retest(run_dir) if solved else None,
                "propagation_ms": propagation_ms(run_dir / "logs"), "tail": "".join(lines[-3:])}


def confirmed(test: dict | None) -> dict | None:
    """A held-out test (HoldoutResult): the one that confirmed a solve, or a run's without a threshold at the end of
    its budget; with its interval and the bound the rule compared."""
    return None if test is None else {k: test.get(k) for k in ("mean", "ci95", "bound", "rule", "episodes")}


def retest(run_dir: Path) -> dict:
    """`rlfleet test` on the run's best policy after the run: 100 more greedy episodes on a seed block that
    neither the run's training, validation nor its own test used (shared/envs/seeds.py, RETEST_TASK)."""
    out = run_dir / "retest.json"
    subprocess.run([sys.executable, "-m", "rlfleet.launcher", "test", str(run_dir), "--json", str(out)], cwd=REPO,
                   check=True, capture_output=True, stdin=subprocess.DEVNULL)
    report = json.loads(out.read_text())
    return {"mean": report["mean"], "ci95": report["ci95"], "episodes": report["episodes"],
            "holds": report["reaches_threshold"]}


def sb3_env(env: EnvConfig) -> gym.Env:
    """The env of a recurrent case's config as rlfleet's collectors build it (shared/envs/build.py make_env, its
    wrappers included: obs_filter drops the velocities), so SB3 trains on the observations rlfleet's policy sees.
    rlfleet's last wrapper, RawObservation, is left off: it is rlfleet's transport form of a Discrete or
    MultiDiscrete observation (its raw integers in a Box), which SB3 must see as that space to one-hot encode it,
    as rlfleet's policy does."""
    from rlfleet.shared.envs.build import make_env
    from rlfleet.shared.envs.gymspaces import RawObservation

    made = make_env(env)
    return made.env if isinstance(made, RawObservation) else made


def sb3_observation(space: gym.Space, raw: np.ndarray) -> np.ndarray:
    """A batch of observations as the evaluator steps them (RawObservation's raw integers for a Discrete or
    MultiDiscrete space) in the form SB3's policy takes for `space`, the env's own."""
    if isinstance(space, gym.spaces.Discrete):
        return raw[:, 0].astype(np.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return raw.reshape(len(raw), *space.shape).astype(np.int64)
    return raw


def sb3_worker(algo: str, seed: int, eval_every: int, launched: float, native_eval: bool) -> None:
    """Runs in its own process: train SB3, evaluate greedily every `eval_every` steps, print one JSON line
    with the time since `launched` (the parent's wall clock when it started this process)."""
    import torch
    from stable_baselines3 import A2C, DQN, PPO, SAC
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from rlfleet.evaluator.episodes import evaluate
    from rlfleet.shared import solve_rule
    from rlfleet.shared.config.run_config import load_run_config
    from rlfleet.shared.envs.seeds import Mode, base_seed

    torch.set_num_threads(1)
    case = CASES[algo]
    config = load_run_config(REPO / case.config)
    # a recurrent case plays its config's env section (wrappers included) on both sides
    env_section = config.env if case.recurrent is not None else EnvConfig(id=case.env_id)
    normalized: VecNormalize | None = None

    class SolveCheck(BaseCallback):
        """rlfleet's rule (coordinator/state/judge.py): a validation pass that beats the test mean of every
        candidate tested so far is tested on held-out seeds, and only a test that meets the solve rule solves.
        Without a threshold nothing solves: each validation that beats every earlier one is tested, so the last
        test is the best validated policy's, as rlfleet tests it at the end of its budget."""

        def __init__(self) -> None:
            super().__init__()
            self.solved_at: tuple[float, int] | None = None
            self.confirmed_by: dict | None = None
            self.final_test: dict | None = None
            self.next_eval = eval_every
            self.best_tested = float("-inf")
            self.best_validation = float("-inf")
            self.rejected = 0

        def _returns(self, mode: Mode, counter: int, episodes: int) -> list[float]:
            model = self.model
            # native=False: copies of the env, as SB3's DummyVecEnv steps them (SB3's VecEnv API cannot take
            # gymnasium's own vectorized CartPole, which rlfleet's evaluator plays on) unless --sb3-native-eval
            if case.recurrent is None:
                returns, _ = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], env_section,
                                      10, episodes, base_seed(seed, mode, 0, counter), native=native_eval)
                return returns
            space = model.observation_space
            memory: dict[str, Any] = {"state": None, "starts": None}

            def act(obs: np.ndarray) -> np.ndarray:
                seen = sb3_observation(space, obs)
                if normalized is not None:
                    seen = np.asarray(normalized.normalize_obs(seen))
                actions, memory["state"] = model.predict(seen, state=memory["state"], episode_start=memory["starts"],
                                                         deterministic=True)
                return actions

            def reset(starting: np.ndarray | None) -> None:  # evaluate() says which envs begin an episode next
                memory["starts"] = None if starting is None else starting.astype(np.float32)
                if starting is None:
                    memory["state"] = None  # a fresh zero state for every env, as for the first step of all

            returns, _ = evaluate(act, env_section, 10, episodes, base_seed(seed, mode, 0, counter),
                                  native=native_eval, reset=reset)
            return returns

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return True
            self.next_eval += eval_every
            number = self.next_eval // eval_every - 1  # a seed block per evaluation (env steps overflow counters)
            returns = self._returns("valid", number, config.evaluation.episodes)
            validation = sum(returns) / len(returns)
            if case.threshold is None:
                if validation > self.best_validation:
                    self.best_validation = validation
                    verdict = solve_rule.judge(self._returns("test", number, config.evaluation.test_episodes), None)
                    self.final_test = held_out(verdict)
                return True
            if validation < case.threshold or validation <= self.best_tested:
                return True
            verdict = solve_rule.judge(self._returns("test", number, config.evaluation.test_episodes),
                                       case.threshold)
            self.best_tested = verdict.estimate.mean
            if verdict.confirmed:
                self.solved_at = (time.time() - launched, self.num_timesteps)
                self.confirmed_by = held_out(verdict)
                return False
            self.rejected += 1
            return True

    def held_out(verdict: solve_rule.Verdict) -> dict:
        return {"mean": verdict.estimate.mean, "ci95": verdict.estimate.ci95, "bound": verdict.bound,
                "rule": solve_rule.RULE, "episodes": verdict.estimate.episodes}

    check = SolveCheck()
    model: BaseAlgorithm
    if case.recurrent is not None:
        from sb3_contrib import RecurrentPPO
        from stable_baselines3.common.torch_layers import FlattenExtractor

        class Flatten(FlattenExtractor):
            """SB3's FlattenExtractor with a Python int for its width: SB3 sums a MultiDiscrete space's nvec into a
            numpy int64 (CountRecallEasy's), which torch's LSTM refuses as its input_size."""

            def __init__(self, observation_space: gym.Space) -> None:
                super().__init__(observation_space)
                self._features_dim = int(self._features_dim)

        env = make_vec_env(lambda: sb3_env(env_section), n_envs=case.recurrent.envs, seed=seed)
        if case.recurrent.normalize:  # rl-zoo's `normalize: True`: observations and rewards, its gamma
            env = normalized = VecNormalize(env, gamma=case.recurrent.kwargs["gamma"])
        kwargs = dict(case.recurrent.kwargs)
        kwargs["policy_kwargs"] = {**kwargs["policy_kwargs"], "features_extractor_class": Flatten}
        model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, device="cpu", **kwargs)
    elif algo == "dqn":
        model = DQN("MlpPolicy", case.env_id, seed=seed, device="cpu", **SB3_DQN)
    elif algo == "ppo":
        env = make_vec_env(case.env_id, n_envs=SB3_PPO_ENVS, seed=seed)
        model = PPO("MlpPolicy", env, seed=seed, device="cpu", **SB3_PPO)
    elif algo == "a2c":
        env = make_vec_env(case.env_id, n_envs=SB3_A2C_ENVS, seed=seed)
        model = A2C("MlpPolicy", env, seed=seed, device="cpu", **SB3_A2C)
    else:
        model = SAC("MlpPolicy", case.env_id, seed=seed, device="cpu", **SB3_SAC)
    model.learn(case.sb3_timesteps, callback=check)
    # without a threshold the run ends well at its budget, with its best validated policy tested
    ended = check.solved_at or ((time.time() - launched, case.sb3_timesteps) if check.final_test else None)
    seconds, steps = ended if ended else (None, case.sb3_timesteps)
    print(json.dumps({"seconds": seconds, "env_steps": steps, "rejected": check.rejected,
                      "confirmed_by": check.confirmed_by, "final_test": check.final_test}))


def run_sb3(seed: int, algo: str, eval_every: int | None, timeout: float, native_eval: bool) -> dict:
    eval_every = eval_every or CASES[algo].sb3_eval_every
    proc = subprocess.Popen([sys.executable, __file__, "--sb3-worker", "--algo", algo, "--seed", str(seed),
                             *(["--sb3-native-eval"] if native_eval else []),
                             "--sb3-eval-every", str(eval_every), "--launched", repr(time.time())],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    memory = PeakMemory(proc.pid)
    memory.start()
    out, err = proc.communicate(timeout=timeout)
    lines = out.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"seconds": None, "env_steps": None, "rejected": None,
                                                  "confirmed_by": None, "final_test": None}
    solved = result["seconds"] is not None
    return {"system": "sb3", "algo": algo, "seed": seed, "solved": solved, "seconds": result["seconds"],
            "env_steps": result["env_steps"], "rejected": result["rejected"],
            "confirmed_by": result["confirmed_by"], "final_test": result["final_test"], "peak_pss_mib": memory.stop(),
            "tail": "" if solved else err[-300:]}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sb3-eval-every", type=int, help="SB3 env steps between evaluations (default: per algo)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", type=Path, help="write all results here")
    parser.add_argument("--sb3-native-eval", action="store_true",
                        help="SB3 also plays its evaluations on gymnasium's vectorized env where one exists, as "
                             "rlfleet's evaluator does (SB3 users would need an adapter of their own for that)")
    parser.add_argument("--sb3-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--algo", default="dqn", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--launched", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sb3_worker:
        sb3_worker(args.algo, args.seed, args.sb3_eval_every, args.launched, args.sb3_native_eval)
        return
    from rlfleet.shared.solve_rule import RULE, RULE_TEXT

    results = []
    print(f"solve rule, both sides: {RULE_TEXT} ({RULE})", flush=True)
    for algo in args.algos:
        for seed in args.seeds:  # interleaved: A B A B, so drifts in machine load hit both alike
            for system in ("rlfleet", "sb3") if CASES[algo].sb3 else ("rlfleet",):
                r = (run_rlfleet(seed, algo, args.timeout) if system == "rlfleet"
                     else run_sb3(seed, algo, args.sb3_eval_every, args.timeout, args.sb3_native_eval))
                results.append(r)
                budgeted = CASES[algo].threshold is None
                shown = f"{r['seconds']:.1f}s" if r["solved"] else "NOT SOLVED"
                test = r.get("confirmed_by")
                if test is not None:
                    shown += (f" (test {test['mean']:.1f} [{test['ci95'][0]:.1f}, {test['ci95'][1]:.1f}], re-test "
                              f"bound {test['bound']:.1f} >= {CASES[algo].threshold:g}: {test['rule']})")
                final = r.get("final_test")
                if budgeted:
                    shown = "NOT TRAINED TO ITS BUDGET" if final is None else (
                        f"best validated policy's test {final['mean']:.3f} [{final['ci95'][0]:.3f}, "
                        f"{final['ci95'][1]:.3f}] over {final['episodes']} episodes, trained to its budget in "
                        f"{r['seconds']:.1f}s")
                again = r.get("retest")
                verdict = "" if budgeted else f": {'holds' if again and again['holds'] else 'DOES NOT HOLD'}"
                digits = 3 if budgeted else 1  # POPGym's returns lie in [-1, 1]
                held = "" if again is None else (
                    f", re-test {again['mean']:.{digits}f} [{again['ci95'][0]:.{digits}f}, "
                    f"{again['ci95'][1]:.{digits}f}] over {again['episodes']} episodes{verdict}")
                print(f"seed {seed} {r['system']:7} {algo}: {shown}, {r['env_steps']} env steps, "
                      f"{r['rejected']} validation passes rejected by the test{held}, "
                      f"peak PSS {r['peak_pss_mib']:.0f} MiB", flush=True)
    print()
    summary = {}
    for algo in args.algos:
        row: dict[str, Any] = {}
        for system in ("rlfleet", "sb3") if CASES[algo].sb3 else ("rlfleet",):
            runs = [r for r in results if r["system"] == system and r["algo"] == algo]
            times = [r["seconds"] for r in runs if r["solved"]]
            # a run that never solved counts as slower than every solved one (not left out, which would flatter)
            ranked = [r["seconds"] if r["solved"] else float("inf") for r in runs]
            retests = [r["retest"] for r in runs if r.get("retest")]
            verdicts = system == "rlfleet" and CASES[algo].threshold is not None  # re-tests with a verdict
            row[system] = {"solved": len(times), "runs": len(runs), "median_seconds": _median(ranked),
                           "rejected": [r["rejected"] for r in runs],
                           "retests_holding": sum(t["holds"] for t in retests) if verdicts else None,
                           "median_env_steps": _median([r["env_steps"] for r in runs if r["solved"]]),
                           "max_peak_pss_mib": max((r["peak_pss_mib"] for r in runs), default=float("nan"))}
            ended = "solved" if CASES[algo].threshold is not None else "trained to the budget"
            print(f"{system:7} {algo}: {ended} {len(times)}/{len(runs)}, median {row[system]['median_seconds']:.1f}s, "
                  f"median env steps {row[system]['median_env_steps']:.0f}, "
                  f"peak PSS up to {row[system]['max_peak_pss_mib']:.0f} MiB, validation passes rejected per run "
                  f"{row[system]['rejected']}" + ("" if not verdicts else
                                                  f", re-tests holding {row[system]['retests_holding']}/{len(times)}"))
        if CASES[algo].threshold is None:  # no solve to time: the best policies' test means at the same budget
            for system in row:
                means = [r["final_test"]["mean"] for r in results
                         if r["system"] == system and r["algo"] == algo and r.get("final_test")]
                row[system]["final_test_means"] = means
                print(f"{system:7} {algo}: best validated policy's test mean at the budget, over {len(means)} "
                      f"seeds: {_mean(means):.3f} (each: {', '.join(f'{m:.3f}' for m in means)})")
        elif "sb3" in row:
            row["ratio"] = row["rlfleet"]["median_seconds"] / row["sb3"]["median_seconds"]
            print(f"ratio rlfleet / sb3 (median time to solve, {algo}): {row['ratio']:.2f}")
        delays = [d for r in results if r["system"] == "rlfleet" and r["algo"] == algo for d in r["propagation_ms"]]
        row["propagation_ms"] = {"versions": len(delays), "median": _median(delays), "p99": _p99(delays)}
        print(f"policy propagation ({algo}, {len(delays)} versions): median {_median(delays):.0f} ms, "
              f"p99 {_p99(delays):.0f} ms")
        summary[algo] = row
    if "impala" in summary and "ppo" in summary:
        ratio = summary["impala"]["rlfleet"]["median_seconds"] / summary["ppo"]["rlfleet"]["median_seconds"]
        summary["impala"]["ratio_to_ppo"] = ratio
        print(f"ratio rlfleet impala / rlfleet ppo (median time to solve; asynchronous vs synchronous, <= 1 wanted): "
              f"{ratio:.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "runs": results}, indent=2))


if __name__ == "__main__":
    main()
