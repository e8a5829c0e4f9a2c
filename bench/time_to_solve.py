"""Launch-to-solved time: rlfleet (full distributed stack) vs Stable-Baselines3 in one process, side by side.

  pip install -e '.[bench]'
  python bench/time_to_solve.py [--seeds 0 1 2] [--json bench/results/time_to_solve.json]

Each run is a whole process timed from launch until it reports "solved": the mean return of 10 greedy
episodes (10 envs, one episode each, evaluator/episodes.py for both) >= 475 on CartPole-v1. rlfleet evaluates
every published policy version in its evaluator process; SB3 evaluates in-process every --sb3-eval-every env
steps. Runs alternate rlfleet / SB3 per seed. Peak memory is the largest sum of PSS over the run's whole
process tree, sampled every 0.5 s. SB3 uses the rl-zoo CartPole-v1 DQN hyperparameters.
PPO joins the comparison once rlfleet has a PPO learner (issue 3).
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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
THRESHOLD = 475.0
# rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1
SB3_DQN: dict[str, Any] = dict(
    learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1000, gamma=0.99,
    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
    exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]))
SB3_DQN_TIMESTEPS = 50_000


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


def run_rlfleet(seed: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "launcher", "up", "--config", "configs/cartpole_dqn.yaml", "--seed", str(seed),
             "--port", "0", "--data-dir", tmp],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        memory = PeakMemory(proc.pid)
        memory.start()
        seconds, steps, lines = None, None, []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if seconds is None and re.match(r"run solved [\d.]+s after launch", line):
                seconds = time.monotonic() - t0
            found = re.search(r"after ([\d,]+) env steps", line)
            if found:
                steps = int(found.group(1).replace(",", ""))
            if time.monotonic() - t0 > timeout:
                proc.kill()
        proc.wait()
        solved = seconds is not None and proc.returncode == 0
        return {"system": "rlfleet", "algo": "dqn", "seed": seed, "solved": solved,
                "seconds": seconds, "env_steps": steps, "peak_pss_mib": memory.stop(),
                "tail": "".join(lines[-3:])}


def sb3_worker(seed: int, eval_every: int, launched: float) -> None:
    """Runs in its own process: train SB3 DQN, evaluate greedily every `eval_every` steps, print one JSON line
    with the time since `launched` (the parent's wall clock when it started this process)."""
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    from evaluator.episodes import evaluate

    torch.set_num_threads(1)

    class SolveCheck(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.solved_at: tuple[float, int] | None = None

        def _on_step(self) -> bool:
            if self.num_timesteps % eval_every:
                return True
            q_net = self.model.q_net  # type: ignore[attr-defined]  # a DQN: greedy action = argmax of q_net
            returns, _ = evaluate(q_net, "CartPole-v1", 10, 10, seed + self.num_timesteps)
            if sum(returns) / len(returns) >= THRESHOLD:
                self.solved_at = (time.time() - launched, self.num_timesteps)
                return False
            return True

    check = SolveCheck()
    DQN("MlpPolicy", "CartPole-v1", seed=seed, device="cpu", **SB3_DQN).learn(SB3_DQN_TIMESTEPS, callback=check)
    seconds, steps = check.solved_at if check.solved_at else (None, SB3_DQN_TIMESTEPS)
    print(json.dumps({"seconds": seconds, "env_steps": steps}))


def run_sb3(seed: int, eval_every: int, timeout: float) -> dict:
    proc = subprocess.Popen([sys.executable, __file__, "--sb3-worker", "--seed", str(seed), "--sb3-eval-every",
                             str(eval_every), "--launched", repr(time.time())],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    memory = PeakMemory(proc.pid)
    memory.start()
    out, err = proc.communicate(timeout=timeout)
    lines = out.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"seconds": None, "env_steps": None}
    solved = result["seconds"] is not None
    return {"system": "sb3", "algo": "dqn", "seed": seed, "solved": solved, "seconds": result["seconds"],
            "env_steps": result["env_steps"], "peak_pss_mib": memory.stop(),
            "tail": "" if solved else err[-300:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sb3-eval-every", type=int, default=1000, help="SB3 env steps between evaluations")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", type=Path, help="write all results here")
    parser.add_argument("--sb3-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--launched", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sb3_worker:
        sb3_worker(args.seed, args.sb3_eval_every, args.launched)
        return
    results = []
    for seed in args.seeds:  # interleaved: A B A B, so drifts in machine load hit both alike
        for system in ("rlfleet", "sb3"):
            r = run_rlfleet(seed, args.timeout) if system == "rlfleet" else run_sb3(seed, args.sb3_eval_every,
                                                                                    args.timeout)
            results.append(r)
            shown = f"{r['seconds']:.1f}s" if r["solved"] else "NOT SOLVED"
            print(f"seed {seed} {r['system']:7} dqn: {shown}, {r['env_steps']} env steps, "
                  f"peak PSS {r['peak_pss_mib']:.0f} MiB", flush=True)
    print()
    for system in ("rlfleet", "sb3"):
        times = [r["seconds"] for r in results if r["system"] == system and r["solved"]]
        solved = sum(r["solved"] for r in results if r["system"] == system)
        median = statistics.median(times) if times else float("nan")
        print(f"{system:7} dqn: solved {solved}/{len(args.seeds)}, median {median:.1f}s")
    rl = [r["seconds"] for r in results if r["system"] == "rlfleet" and r["solved"]]
    sb = [r["seconds"] for r in results if r["system"] == "sb3" and r["solved"]]
    if rl and sb:
        print(f"ratio rlfleet / sb3 (median time to solve, dqn): {statistics.median(rl) / statistics.median(sb):.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
