"""Pong learning curves over one frame budget: rlfleet through `rlfleet up` beside Stable-Baselines3 PPO.

  python bench/pong_curve.py [--config configs/pong_ppo.yaml] [--frames 2000000] [--arms rlfleet,sb3]
                             [--out bench/results/pong_curve] [--set PATH=VALUE ...] [--collectors N]

The issue's comparison is one run a side on this machine, one after the other (never side by side: each has the
whole machine). Both train on the same game with the config's hyperparameters and the Nature CNN:

- rlfleet: `rlfleet up CONFIG --set budget.max_env_steps=FRAMES/4` on local processes (coordinator, collectors,
  learner, evaluator). Its curve is the run's own metrics.csv: the mean training return of the last 100 episodes
  against collected env steps and wall time since the coordinator started.
- sb3: SB3 PPO (CnnPolicy, DummyVecEnv, AtariWrapper + VecFrameStack(4)) with as many envs as the collectors step
  in all, the same n_steps, epochs, minibatch, learning rate, clip range and coefficients. Its curve is the mean
  of SB3's own last-100-episode buffer after each rollout, against timesteps and wall time since the script
  started. Monitor sits under AtariWrapper there, so returns are the game's, as rlfleet reports them.

`--collectors N` starts N collectors (`rlfleet up --collectors`; default 2) and gives SB3 as many envs as they
step in all, for a machine with more cores than this one. Frames are env steps x 4 (the frame skip).
`--config configs/pong_impala.yaml --arms rlfleet` draws IMPALA's curve on the same budget (SB3 has no IMPALA).
Writes OUT/curves.csv (arm, frames, wall_seconds, recent_return_mean),
OUT/pong_curve.png (returns against frames and against wall time) and OUT/rlfleet/ (the run's data dir). Its last
line: `pong_curve: ARM frames=F wall=Ws return=R` for each arm, the return being the curve's last point.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.pixels import load, sb3_ppo, set_args  # noqa: E402 - after the repo root is on the path

FRAME_SKIP = 4
ARMS = ("rlfleet", "sb3")


def run_rlfleet(args: argparse.Namespace, out: Path) -> list[tuple[int, float, float]]:
    """`rlfleet up` to the frame budget; its metrics.csv as (frames, wall seconds, recent return) rows."""
    data = out / "rlfleet"
    cmd = [sys.executable, "-m", "rlfleet.launcher", "up", "--config", str(args.config), "--data-dir",
           str(data), "--port", "0", "--collectors", str(args.collectors),
           "--set", f"budget.max_env_steps={args.frames // FRAME_SKIP}", *set_args(args.set)]
    print("running:", " ".join(cmd), flush=True)
    with open(out / "rlfleet.log", "wb") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO).returncode
    runs = sorted((data / "runs").glob("*/metrics.csv"), key=lambda p: p.stat().st_mtime)
    if code not in (0, 1) or not runs:  # 1: ended unsolved (out of budget), the expected end on 2M frames
        raise SystemExit(f"rlfleet up exited {code}; see {out / 'rlfleet.log'}")
    with open(runs[-1], newline="") as fh:
        return [(int(r["env_steps"]) * FRAME_SKIP, float(r["wall_seconds"]), float(r["recent_return_mean"]))
                for r in csv.DictReader(fh) if r.get("recent_return_mean")]


def sb3_worker(config: Path, sets: list[str], frames: int, rows_file: Path, collectors: int) -> None:
    """SB3 PPO on the config's game to `frames`, one row per rollout into `rows_file` (JSON lines)."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    start = time.perf_counter()
    cfg = load(config, sets)
    model = sb3_ppo(cfg, DummyVecEnv, cfg.collector.num_envs * collectors, cfg.seed)

    class Curve(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            returns = [info["r"] for info in self.model.ep_info_buffer]
            if returns:
                with open(rows_file, "a") as fh:
                    fh.write(json.dumps([self.num_timesteps * FRAME_SKIP, time.perf_counter() - start,
                                         sum(returns) / len(returns)]) + "\n")

    model.learn(total_timesteps=frames // FRAME_SKIP, callback=Curve())
    model.get_env().close()


def run_sb3(args: argparse.Namespace, out: Path) -> list[tuple[int, float, float]]:
    rows_file = out / "sb3_rows.jsonl"
    rows_file.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--sb3-worker", "--config", str(args.config), "--frames", str(args.frames),
           "--rows", str(rows_file), "--collectors", str(args.collectors), *set_args(args.set)]
    with open(out / "sb3.log", "wb") as log:  # torch's default threads (every core), as a user runs SB3
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO).returncode
    if code != 0:
        raise SystemExit(f"SB3 exited {code}; see {out / 'sb3.log'}")
    if not rows_file.exists():  # no episode ended within the budget
        return []
    return [tuple(json.loads(line)) for line in rows_file.read_text().splitlines()]  # type: ignore[misc]


def plot(curves: dict[str, list[tuple[int, float, float]]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for arm, rows in curves.items():
        axes[0].plot([r[0] for r in rows], [r[2] for r in rows], label=arm)
        axes[1].plot([r[1] / 60 for r in rows], [r[2] for r in rows], label=arm)
    axes[0].set_xlabel("frames")
    axes[1].set_xlabel("wall-clock minutes")
    axes[0].set_ylabel("training return (last 100 episodes)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def at_frames(rows: list[tuple[int, float, float]], frames: int) -> tuple[float, float] | None:
    """(wall seconds, return) of the first point at or past `frames`."""
    return next(((wall, ret) for f, wall, ret in rows if f >= frames), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=REPO / "configs/pong_ppo.yaml")
    parser.add_argument("--frames", type=int, default=2_000_000)
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, in order, from {', '.join(ARMS)}")
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/pong_curve")
    parser.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                        help="override a config field on both sides")
    parser.add_argument("--collectors", type=int, default=2,
                        help="rlfleet's collectors; SB3 steps as many envs as they do in all")
    parser.add_argument("--sb3-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sb3_worker:
        sb3_worker(args.config, args.set, args.frames, args.rows, args.collectors)
        return
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if set(arms) - set(ARMS):
        parser.error(f"--arms: unknown {sorted(set(arms) - set(ARMS))}; choose from {', '.join(ARMS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    runners: dict[str, Any] = {"rlfleet": run_rlfleet, "sb3": run_sb3}
    curves: dict[str, list[tuple[int, float, float]]] = {}
    for arm in arms:
        print(f"{arm}: {args.frames:,} frames of {args.config.name}", flush=True)
        curves[arm] = runners[arm](args, args.out)
        with open(args.out / "curves.csv", "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["arm", "frames", "wall_seconds", "recent_return_mean"])
            writer.writerows([a, *row] for a, rows in curves.items() for row in rows)
    plot(curves, args.out / "pong_curve.png", f"{args.config.name}, {args.frames:,} frames, this machine")
    marks = [args.frames * k // 4 for k in (1, 2, 3, 4)]
    print("\nframes      " + "".join(f"{arm:>24s}" for arm in curves))
    for mark in marks:
        cells = [at_frames(rows, mark) for rows in curves.values()]
        print(f"{mark:>10,d}  " + "".join(f"{'-':>24s}" if c is None else f"{c[1]:>10.1f} at {c[0]:>7.0f} s"
                                          for c in cells))
    for arm, rows in curves.items():
        frames, wall, ret = rows[-1] if rows else (0, 0.0, float("nan"))
        print(f"pong_curve: {arm} frames={frames} wall={wall:.0f}s return={ret:.1f}")


if __name__ == "__main__":
    main()
