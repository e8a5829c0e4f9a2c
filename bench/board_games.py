"""Board games (issue 15): train through `rlfleet up` per seed, then judge each run's best policy on held-out games
against each baseline opponent alone.

    python bench/board_games.py [--config configs/tictactoe_dqn.yaml] [--seeds 0 1 2] [--games 400] [--keep DIR]

Prints, per seed: time to the run's own confirmed solve, env steps, and win / draw / loss against the uniform
random player and against the one-step lookahead (evaluator/battles.py), over `--games` greedy games on a seed
block that neither training nor the run's own tests used; then the issue's rule (win or draw >= 0.95 against
random, win >= 0.6 against the lookahead) per run. For a self-play run (configs/*_selfplay.yaml)
also the Elo rating of the confirmed version and the best one, and the training games by kind of opponent.
`--keep DIR` copies each run's summary, evaluations.csv and learning-curve image (with its Elo panel) there.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rlfleet.evaluator.battles import against  # noqa: E402
from rlfleet.evaluator.testing import load_subject, resolve_inputs  # noqa: E402
from rlfleet.shared.envs.seeds import base_seed  # noqa: E402

HELD_OUT_TASK = 7  # a test-mode task index no run uses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/tictactoe_dqn.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--games", type=int, default=400)
    parser.add_argument("--keep", type=Path, help="copy each run's summary, evaluations and curve image here")
    args = parser.parse_args()
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "rlfleet.launcher", "up", "--config", args.config, "--data-dir", tmp,
                                   "--port", "0", "--seed", str(seed)], cwd=REPO, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL)
            wall = time.monotonic() - started
            (run_dir,) = (Path(tmp) / "runs").iterdir()
            summary = json.loads((run_dir / "summary.json").read_text())
            if args.keep is not None:
                kept = args.keep / f"seed{seed}"
                kept.mkdir(parents=True, exist_ok=True)
                for name in ("summary.json", "evaluations.csv", "tests.csv", "learning_curve.png"):
                    if (run_dir / name).exists():
                        shutil.copy(run_dir / name, kept / name)
            if done.returncode != 0 or summary["run_state"] != "solved":
                print(f"seed {seed}: {summary['run_state']} after {wall:.1f} s: {summary['run_message']}")
                continue
            policy, config, _ = resolve_inputs(run_dir, None, None, None)
            subject = load_subject(policy, config)
            held_out = base_seed(seed, "test", HELD_OUT_TASK, 0)
            records = [against(subject.actor.greedy, subject.config.env, opponent, args.games, 10, held_out)
                       for opponent in ("random", "lookahead")]
            rule = records[0].win_or_draw_rate >= 0.95 and records[1].win_rate >= 0.6
            print(f"seed {seed}: solved in {wall:.1f} s from launch, {summary['env_steps']:,} env steps, "
                  f"policy v{summary['confirmed_by']['policy_version']}; issue rule {'met' if rule else 'NOT met'}")
            for record in records:
                print(f"  {record}")
            if summary.get("self_play"):
                _self_play(summary, run_dir)


def _self_play(summary: dict, run_dir: Path) -> None:
    sp = summary["self_play"]
    confirmed = summary["confirmed_by"]["policy_version"]
    with open(run_dir / "evaluations.csv") as fh:
        elo = next((row["elo"] for row in csv.DictReader(fh) if int(row["policy_version"]) == confirmed), None)
    games = ", ".join(f"{kind} {sum(t.values()):,} (won {t['wins']:,})" for kind, t in sp["training"].items())
    print(f"  Elo of v{confirmed}: {elo}; best {sp['best_elo']}; pool {sp['pool_versions']}; training games: {games}")


if __name__ == "__main__":
    main()
