"""Pixels side by side on this machine: rlfleet's collection path and whole stack against the same wrapped envs
stepped in-process, and against Stable-Baselines3 PPO on the same game with the same hyperparameters.

  python bench/pixels.py [--config configs/pong_ppo.yaml] [--window 150] [--warmup 30] [--repeats 3]
                         [--collectors 2] [--arms raw_random,raw,collect,stack,stack_lag1,sb3_dummy,sb3_subproc]
                         [--set collector.env_backend=async ...] [--learner-threads N] [--json F]

Every arm runs alone, one after the other, in the order given, `--repeats` times (alternating, so load from
elsewhere falls on all alike); each figure is the median of its repeats, in env steps per second:

- raw_random / raw / raw_write: the physical limit. `--collectors` processes, each stepping the config's
  `collector.num_envs` envs the way a collector does (`collector.env_backend`, `collector.double_buffer`), acting
  at random / with the run's CNN policy (a fresh one, as the learner publishes it first), writing nothing /
  writing each chunk's payload on a thread as the uploader does (not among the default arms: it shows whether
  payload writes stall the envs).
- collect: the collection path alone. `rlfleet`'s coordinator, `--collectors` collectors acting with the CNN, and a
  learner that only consumes: it publishes its initial policy, then takes and decodes every chunk as the learner
  does and trains on none (so nothing waits for training: sampling.force_sync is off in this arm). Env steps
  acknowledged by the coordinator. Bytes per env step: the coordinator's payload bytes per env step (status).
- stack: the whole stack training, as configured: env steps the learner trained on per second. The learner
  computes with the torch threads `rlfleet up` would give it (launcher/up.py `learner_threads`).
- stack_lag1: the same with collection overlapping training: `sampling.force_sync` off and `max_policy_lag: 1`,
  so the collectors fill the next batch (up to `replay.tolerance_transitions` waiting) with the policy the learner
  is training from while it trains, and each batch is at most one version old (PPO's importance ratio divides by
  the behaviour policy's recorded log-probabilities; Sample Factory's APPO runs the same way). The hyperparameters
  stay the config's. Both stack arms also print the share of the env steps collected that were trained on by the
  window's end (the rest: the batch in flight, chunks still queued, any dropped as stale).
- sb3_dummy / sb3_subproc: Stable-Baselines3 PPO (CnnPolicy: the Nature CNN) with DummyVecEnv / SubprocVecEnv and
  its AtariWrapper + VecFrameStack(4) on the config's game, with the config's PPO hyperparameters and as many envs
  as the collectors step in all: timesteps trained on per second.
- Sample Factory's APPO: not run. Its newest release pins gymnasium<1.0 and numpy<2, so it does not install
  beside this project's gymnasium 1.4.0; the script says so.

Its last line: `pixels: collect/raw=R1 stack/sb3=R2 bytes_per_step=B stack_lag1/sb3=R3` (against SB3's better vec
env).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_CONFIG = REPO / "configs/pong_ppo.yaml"
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # as services run
ARMS = ("raw_random", "raw", "raw_write", "collect", "stack", "stack_lag1", "sb3_dummy", "sb3_subproc")
DEFAULT_ARMS = ("raw_random", "raw", "collect", "stack", "stack_lag1", "sb3_dummy", "sb3_subproc")
LAG1 = {"sampling.force_sync": False, "sampling.max_policy_lag": 1}
# Checked 2026-11-27 with `pip install --dry-run sample-factory` in a venv beside this project's packages.
SF_SKIPPED = ("sample-factory 2.1.1, the newest, pins gymnasium<1.0 and numpy<2 (pip would install gymnasium "
              "0.29.1 and numpy 1.26.4), so it cannot run beside this project's gymnasium 1.4.0 and numpy 2")


def load(config: Path, sets: list[str], overrides: dict[str, Any] | None = None) -> Any:
    """The run config with `--set PATH=VALUE`s (YAML values) and `overrides` applied, its budget out of reach."""
    import yaml

    from rlfleet.shared.config.run_config import load_run_config

    given = {path: yaml.safe_load(value) for path, _, value in (s.partition("=") for s in sets)}
    return load_run_config(config, {"budget.max_env_steps": 10**12, "budget.max_wall_seconds": 10**7,
                                    **given, **(overrides or {})})


def set_args(sets: list[str]) -> list[str]:
    return [arg for s in sets for arg in ("--set", s)]


# --- raw: the same envs, stepped in-process -------------------------------------------------------------------


def raw_worker(config: Path, sets: list[str], seconds: float, warmup: float, random: bool, write: bool) -> None:
    """One process's env steps/s over `seconds` after `warmup`, stepping like a collector; with `write`, each
    chunk is encoded and written to a payload directory on a thread as the collector's uploader does (less its
    HTTP report), which shows whether payload writes stall the envs."""
    import queue
    import threading

    import torch

    from rlfleet.collector_worker.rollout import Rollout
    from rlfleet.collector_worker.stepping import make_stepped_env
    from rlfleet.shared.config.plan import RunPlan
    from rlfleet.shared.policy.manifest import PolicyManifest
    from rlfleet.shared.policy.nets import PolicyNet

    torch.set_num_threads(1)
    cfg = load(config, sets)
    plan = RunPlan.of(cfg)
    col = cfg.collector
    if random:  # the envs alone: every sampled action goes straight to them
        env = make_stepped_env(cfg.env, col.num_envs, col.env_backend, col.double_buffer)
        env.reset(seed=0)

        def run() -> int:
            for _ in range(col.chunk_steps):
                env.step(env.action_space.sample())
            return col.chunk_steps * col.num_envs
    else:
        rollout = Rollout(cfg.env, col.num_envs, plan.spaces, plan.behaviour, seed=0, backend=col.env_backend,
                          double_buffer=col.double_buffer)
        manifest = PolicyManifest.of(plan.spaces, cfg.algo.net, plan.behaviour.head)  # what the learner publishes
        rollout.load_policy(manifest, {k: v.numpy() for k, v in PolicyNet(manifest).state_dict().items()})

        written: queue.Queue[Any] = queue.Queue(maxsize=2)  # the uploader's depth

        def run() -> int:
            chunk = rollout.collect(col.chunk_steps)
            if write:
                written.put(chunk)
            return chunk.env_steps

        if write:
            threading.Thread(target=write_chunks, args=(written,), daemon=True).start()
    end_warm = time.perf_counter() + warmup
    while time.perf_counter() < end_warm:
        run()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += run()
    print(json.dumps({"steps_per_second": steps / (time.perf_counter() - start)}))


def write_chunks(chunks: Any) -> None:
    """Encode and write each chunk taken from `chunks` as collector_worker/uploader.py does, then delete it."""
    from rlfleet.shared.payloads.codec import encode_chunk
    from rlfleet.shared.storage.local import LocalStore

    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp))
        for i in iter(int, 1):
            chunk = chunks.get()
            store.put(f"chunks/bench/{i}.msgpack", encode_chunk(chunk.arrays, {"chunk": i}))
            store.delete(f"chunks/bench/{i}.msgpack")


def run_raw(args: argparse.Namespace, random: bool, write: bool = False) -> float:
    """The summed rate of `--collectors` raw processes running side by side."""
    cmd = [sys.executable, __file__, "--raw-worker", "--config", str(args.config), "--window", str(args.window),
           "--warmup", str(args.warmup), *set_args(args.set)] + (["--random"] if random else []) + (
               ["--write"] if write else [])
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              env={**os.environ, **SINGLE_THREADED}) for _ in range(args.collectors)]
    total = 0.0
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"raw worker failed: {err[-2000:]}")
        total += float(json.loads(out.strip().splitlines()[-1])["steps_per_second"])
    return total


# --- collect / stack: rlfleet's services ----------------------------------------------------------------------


def consume_only_learner() -> int:
    """The learner service with a loop that trains on nothing: it publishes its initial policy (collectors act
    with it), then takes every chunk the queue serves, read and decoded on its fetcher thread as the learner's
    are, and drops it."""
    from rlfleet.learner_worker import loops
    from rlfleet.learner_worker.main import run_learner
    from rlfleet.shared.worker.settings import WorkerSettings

    class ConsumeOnly(loops.ChunkTrainer):
        def loop(self, running: Any) -> None:
            if self.version == 0:
                self.publish()
            while running():
                self.fetcher.get(timeout=0.5)

    loops.ChunkTrainer = ConsumeOnly  # type: ignore[misc]  # the loop kind names this class (shared/loops/)
    return run_learner(WorkerSettings())


@dataclass
class FleetRate:
    rate: float  # env steps/s trained on (train) or acknowledged
    bytes_per_step: float | None = None  # payload bytes per env step (consume-only arm)
    trained_share: float | None = None  # of the env steps collected by the window's end, the share trained on


def run_fleet(args: argparse.Namespace, train: bool, extra: dict[str, Any] | None = None) -> FleetRate:
    """Env steps/s trained on with `train` (and the share of those collected meanwhile), else acknowledged with a
    consume-only learner (whose payload bytes per env step come too). `extra`: config overrides of the arm."""
    from rlfleet.launcher.up import learner_threads
    from rlfleet.shared.config.run_config import dump_run_config
    from rlfleet.shared.tokens import generate_tokens_file
    from tests.support.fleet import Fleet

    # Every update reported: the learner's count in the status moves only with a report (default: every 10-100).
    overrides: dict[str, Any] = {"name": "pixels", "algo.report_every": 1, **(extra or {})}
    if not train:
        overrides.update({"sampling.force_sync": False})
    cfg = load(args.config, args.set, overrides)
    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        data = tmp / "data"
        tokens = generate_tokens_file(data / "tokens.json")
        config_file = tmp / "pixels.yaml"
        config_file.write_text(dump_run_config(cfg))
        fleet = Fleet(tmp, data, config_file, tokens)
        try:
            fleet.start_coordinator()
            for i in range(args.collectors):
                fleet.start_worker(f"collector-{i}", "collector")
            if train:  # the torch threads `rlfleet up` would give it beside these collectors, or --learner-threads
                threads = args.learner_threads or learner_threads(args.collectors, 1, cfg.sampling.policy_lag)
                fleet.start("learner", "learner", {**fleet.worker_env, "RLFLEET_TORCH_THREADS": str(threads)})
            else:
                shell = {k: v for k, v in os.environ.items() if not k.startswith("RLFLEET_")}
                log = open(tmp / "learner.log", "wb")  # noqa: SIM115 - owned by the child process
                fleet.procs["learner"] = subprocess.Popen(
                    [sys.executable, __file__, "--consume-only-learner"], stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO, env={
                        **shell, **fleet.worker_env, "PYTHONUNBUFFERED": "1", "RLFLEET_WORKER_NAME": "learner"})
            count = ((lambda: fleet.status().learner.transitions_trained) if train
                     else (lambda: fleet.status().env_steps))
            fleet.wait_for(lambda: count() > 0, 600, "the first chunk " + ("trained on" if train else "collected"))
            time.sleep(args.warmup)
            rate = counted_rate(count, args.window)
            status = fleet.status()
            if not train:
                return FleetRate(rate, bytes_per_step=status.payload_bytes_per_env_step)
            # since the start (a window's ends cut updates in two): what was not trained on is the batch in
            # flight, chunks still queued, and any dropped as stale
            return FleetRate(rate, trained_share=status.learner.transitions_trained / max(1, status.env_steps))
        finally:
            fleet.close()


def counted_rate(count: Any, seconds: float) -> float:
    """Per second of a counter over `seconds`, polled twice a second: between its first and its last change in
    the window where it changed twice or more (a learner's count moves in steps of one update's rows, each many
    seconds apart on Pong: the window's ends would cut updates in two), else over the window."""
    start = time.perf_counter()
    s0 = count()
    changes: list[tuple[float, int]] = []
    while time.perf_counter() - start < seconds:
        time.sleep(0.5)
        now = count()
        if now != (changes[-1][1] if changes else s0):
            changes.append((time.perf_counter(), now))
    if len(changes) >= 2:
        (t_first, c_first), (t_last, c_last) = changes[0], changes[-1]
        return (c_last - c_first) / (t_last - t_first)
    return ((changes[-1][1] if changes else s0) - s0) / (time.perf_counter() - start)


# --- Stable-Baselines3 ----------------------------------------------------------------------------------------


def sb3_game(cfg: Any) -> tuple[str, dict[str, Any]]:
    """The config's game as an ALE id for SB3's make_atari_env, with ALE's own frame skip off (AtariWrapper
    skips 4 frames itself)."""
    kwargs = dict(cfg.env.kwargs)
    if cfg.env.id.startswith("ALE/"):
        env_id = cfg.env.id
    elif "game" in kwargs:  # bench/atari_factory.py's
        env_id = f"ALE/{kwargs.pop('game')}-v5"
    else:
        raise SystemExit(f"{cfg.env.id} is not an ALE game: the SB3 arms need one (env.id ALE/<Game>-v5)")
    return env_id, {"frameskip": 1, **kwargs}


def sb3_worker(config: Path, sets: list[str], vec: str, envs: int, seconds: float, warmup: float) -> None:
    """SB3 PPO's timesteps trained on per second over `seconds` after `warmup` (both in wall time)."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    cfg = load(config, sets)
    model = sb3_ppo(cfg, DummyVecEnv if vec == "dummy" else SubprocVecEnv, envs, seed=0)

    class Window(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start = time.perf_counter()
            self.marks: list[tuple[float, int]] = []

        def _on_step(self) -> bool:
            now = time.perf_counter() - self.start
            if not self.marks and now >= warmup:
                self.marks.append((now, self.num_timesteps))
            return not self.marks or now < warmup + seconds

    window = Window()
    model.learn(total_timesteps=10**9, callback=window)
    at, steps = window.marks[0]
    print(json.dumps({"steps_per_second": (model.num_timesteps - steps) / (time.perf_counter() - window.start - at)}))
    model.get_env().close()


def sb3_ppo(cfg: Any, vec_cls: Any, envs: int, seed: int) -> Any:
    """SB3 PPO (CnnPolicy: the Nature CNN) on the config's game with its PPO hyperparameters: `envs` envs in
    `vec_cls`, AtariWrapper and a 4-frame stack, as rl-zoo trains Atari."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from bench.atari_factory import ale  # SubprocVecEnv's workers make the env: there too ale_py must register it

    algo = cfg.algo
    env_id, env_kwargs = sb3_game(cfg)
    env = VecFrameStack(make_atari_env(functools.partial(ale, env_id), n_envs=envs, seed=seed, vec_env_cls=vec_cls,
                                       env_kwargs=env_kwargs), 4)
    return PPO("CnnPolicy", env, n_steps=cfg.collector.chunk_steps, batch_size=algo.minibatch_size,
               n_epochs=algo.epochs, learning_rate=algo.learning_rate, clip_range=algo.clip_range,
               ent_coef=algo.entropy_coef, vf_coef=algo.value_coef, gamma=algo.gamma, gae_lambda=algo.gae_lambda,
               max_grad_norm=algo.max_grad_norm, seed=seed, verbose=0)


def run_sb3(args: argparse.Namespace, vec: str, envs: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--sb3-worker", vec, "--sb3-envs", str(envs), "--config",
                          str(args.config), "--window", str(args.window), "--warmup", str(args.warmup),
                          *set_args(args.set)],
                         capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        raise RuntimeError(f"SB3 ({vec}) failed: {out.stderr[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["steps_per_second"])


# --- the side-by-side ----------------------------------------------------------------------------------------


def measure(args: argparse.Namespace, arm: str, envs: int) -> FleetRate:
    if arm in ("raw_random", "raw", "raw_write"):
        return FleetRate(run_raw(args, random=arm == "raw_random", write=arm == "raw_write"))
    if arm in ("collect", "stack", "stack_lag1"):
        return run_fleet(args, train=arm != "collect", extra=LAG1 if arm == "stack_lag1" else None)
    return FleetRate(run_sb3(args, arm.removeprefix("sb3_"), envs))


def ratio(results: dict[str, list[float]], top: str, *bottoms: str) -> str:
    present = [statistics.median(results[b]) for b in bottoms if results.get(b)]
    if not results.get(top) or not present:
        return "n/a"
    return f"{statistics.median(results[top]) / max(present):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG,
                        help="the run config (default configs/pong_ppo.yaml; bench/pong_factory_ppo.yaml where "
                             "that is missing)")
    parser.add_argument("--window", type=float, default=150.0, help="seconds measured per arm and repeat")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds before each window")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--collectors", type=int, default=2, help="collector processes (and raw processes)")
    parser.add_argument("--arms", default=",".join(DEFAULT_ARMS), help=f"comma-separated, from {', '.join(ARMS)}")
    parser.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                        help="override a config field, as `rlfleet up --set` does (collector.env_backend=async)")
    parser.add_argument("--learner-threads", type=int, help="the stack arms' learner's torch threads (default: what "
                                                               "`rlfleet up` gives it beside the collectors)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--raw-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--random", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--write", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sb3-worker", choices=("dummy", "subproc"), help=argparse.SUPPRESS)
    parser.add_argument("--sb3-envs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--consume-only-learner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_worker:
        raw_worker(args.config, args.set, args.window, args.warmup, args.random, args.write)
        return
    if args.sb3_worker:
        sb3_worker(args.config, args.set, args.sb3_worker, args.sb3_envs, args.window, args.warmup)
        return
    if args.consume_only_learner:
        sys.exit(consume_only_learner())
    arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    unknown = set(arms) - set(ARMS)
    if unknown:
        parser.error(f"--arms: unknown {sorted(unknown)}; choose from {', '.join(ARMS)}")
    if not args.config.exists():
        parser.error(f"--config {args.config} does not exist; bench/pong_factory_ppo.yaml runs the same game "
                     f"through a factory entry point")
    cfg = load(args.config, args.set)
    envs = args.collectors * cfg.collector.num_envs
    print(f"{cfg.env.id}: {args.collectors} collectors x {cfg.collector.num_envs} envs "
          f"({cfg.collector.env_backend}{', double-buffered' if cfg.collector.double_buffer else ''}) x "
          f"{cfg.collector.chunk_steps} steps; {args.window:g}s windows after {args.warmup:g}s, {args.repeats} "
          f"repeats, arms alternating", flush=True)
    results: dict[str, list[float]] = {arm: [] for arm in arms}
    per_step: list[float] = []
    shares: dict[str, list[float]] = {}
    for i in range(args.repeats):
        for arm in arms:
            got = measure(args, arm, envs)
            results[arm].append(got.rate)
            if got.bytes_per_step is not None:
                per_step.append(got.bytes_per_step)
            if got.trained_share is not None:
                shares.setdefault(arm, []).append(got.trained_share)
            print(f"repeat {i + 1}: {arm:12s} {got.rate:8,.0f} env steps/s"
                  + ("" if got.bytes_per_step is None else f"  ({got.bytes_per_step:,.0f} payload bytes per env step)")
                  + ("" if got.trained_share is None else f"  ({got.trained_share:.0%} of all collected trained on)"),
                  flush=True)
    print("\nmedians (env steps/s):")
    for arm in arms:
        print(f"  {arm:12s} {statistics.median(results[arm]):8,.0f}")
    print(f"Sample Factory APPO: skipped: {SF_SKIPPED}")
    b = f"{statistics.median(per_step):.0f}" if per_step else "n/a"
    collect_raw, stack_sb3 = ratio(results, "collect", "raw"), ratio(results, "stack", "sb3_dummy", "sb3_subproc")
    lag1_sb3 = ratio(results, "stack_lag1", "sb3_dummy", "sb3_subproc")
    if args.json:
        args.json.write_text(json.dumps({"config": str(args.config), "results": results, "bytes_per_step": per_step,
                                         "trained_share": shares, "collect_raw": collect_raw, "stack_sb3": stack_sb3,
                                         "stack_lag1_sb3": lag1_sb3, "sample_factory": f"skipped: {SF_SKIPPED}"},
                                        indent=2))
    print(f"pixels: collect/raw={collect_raw} stack/sb3={stack_sb3} bytes_per_step={b} stack_lag1/sb3={lag1_sb3}")


if __name__ == "__main__":
    main()
