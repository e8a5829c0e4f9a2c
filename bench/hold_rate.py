"""Do confirmed solves hold? The solve rule against the rule before it, on independent re-tests.

    python bench/hold_rate.py [--cases cartpole-dqn acrobot-ppo ...] [--seeds 0 1 2] [--budget-seconds S]
                              [--retest-episodes 100] [--json out.json]

Each (case, seed) trains once with `rlfleet up`, which stops at the first held-out test that meets the solve rule
(shared/solve_rule.py: the 95% lower prediction bound of an independent re-test's mean reaches the threshold).
The run's test history (its journal) then gives both rules' candidates from the same run: (a) the test the rule
confirmed, and (b) the one the old rule (test mean >= threshold) would have confirmed, the first test in the
history whose mean reaches the threshold, since up to that test both rules saw the same run. Their `wall_seconds`
(run time when the test was reported) are each rule's time to solve.

Each candidate's policy is then played again with `rlfleet test` on a seed block that neither the run's training,
validation nor its own tests used (RETEST_TASK, shared/envs/seeds.py), as many episodes as the run's test. A solve
holds when that re-test's mean reaches the threshold: what a user means by "solved". The coordinator deletes old
policy files as new ones come (RLFLEET_KEEP_POLICIES), so the script copies each policy file as it is published.

Printed per rule: candidates, how many hold (the hold rate), median time to solve (a run without a candidate
counts as slower than every solved one, not left out) and median env steps. `--json` writes every run too.

The default set (5 configs x envs, 3 seeds, budgets chosen to fit about an hour on 2 cores) includes envs the
configs were not tuned for: Acrobot-v1 with the CartPole DQN and PPO configs. MountainCar-v0 is left out: no
config of the project reaches its -110 in a few minutes; add a case here to measure one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rlfleet.coordinator.journal.database import stored_meta  # noqa: E402
from rlfleet.shared.config.run_config import load_run_config  # noqa: E402
from rlfleet.shared.solve_rule import RULE, RULE_TEXT  # noqa: E402
from rlfleet.shared.storage.layout import RunLayout, policy_path  # noqa: E402

RETEST_COUNTER = 1  # `rlfleet test`'s block 0 is what a user's own first re-test uses; this one is ours alone
OLD_RULE = "mean_at_threshold"


@dataclass(frozen=True)
class Case:
    config: str
    overrides: tuple[str, ...]  # `rlfleet up --set` values
    budget_seconds: int  # the run's max_wall_seconds: each case is sized so the default set fits about an hour


CASES = {
    "cartpole-dqn": Case("configs/cartpole_dqn.yaml", (), 180),
    "cartpole-ppo": Case("configs/cartpole_ppo.yaml", (), 180),
    # not tuned for Acrobot: gymnasium's reward_threshold for it is -100
    "acrobot-dqn": Case("configs/cartpole_dqn.yaml", ("env.id=Acrobot-v1", "env.solve_threshold=-100"), 240),
    "acrobot-ppo": Case("configs/cartpole_ppo.yaml", ("env.id=Acrobot-v1", "env.solve_threshold=-100"), 240),
    "pendulum-sac": Case("configs/pendulum_sac.yaml", (), 300),
    # MuJoCo (the `mujoco` extra), not tuned for it: gymnasium's reward_threshold is 950 of at most 1000
    "invertedpendulum-sac": Case("configs/pendulum_sac.yaml", ("env.id=InvertedPendulum-v5",
                                                               "env.solve_threshold=950"), 300),
    # MuJoCo, not tuned for it: gymnasium's reward_threshold is 9100 of at most ~9350
    "inverteddoublependulum-sac": Case("configs/pendulum_sac.yaml", ("env.id=InvertedDoublePendulum-v5",
                                                                     "env.solve_threshold=9100",
                                                                     "budget.max_env_steps=60000"), 600),
}


class PolicyKeeper(threading.Thread):
    """Copies every policy file of the one run under `data_dir` as soon as it appears in the run's store."""

    def __init__(self, data_dir: Path, into: Path) -> None:
        super().__init__(daemon=True)
        self.data_dir, self.into = data_dir, into
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            self.sweep()

    def sweep(self) -> None:
        for policies in (self.data_dir / "runs").glob("*/store/policies"):
            for path in policies.glob("*.safetensors"):
                kept = self.into / path.name
                if not kept.exists():
                    try:
                        shutil.copyfile(path, kept.with_suffix(".part"))
                        kept.with_suffix(".part").rename(kept)
                    except FileNotFoundError:
                        pass  # deleted between listing and copying: a version no test can have asked for

    def stop(self) -> None:
        self.stopped.set()
        self.join()
        self.sweep()


def train(case: Case, seed: int, data_dir: Path, kept: Path, budget: int | None, timeout: float) -> Path:
    """One `rlfleet up` run; returns its run directory."""
    keeper = PolicyKeeper(data_dir, kept)
    keeper.start()
    sets = [*case.overrides, f"budget.max_wall_seconds={budget or case.budget_seconds}"]
    try:
        subprocess.run([sys.executable, "-m", "rlfleet.launcher", "up", "--config", case.config, "--seed", str(seed),
                        "--port", "0", "--data-dir", str(data_dir), *(a for s in sets for a in ("--set", s))],
                       cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                       timeout=timeout)
    finally:
        keeper.stop()
    (run_dir,) = (data_dir / "runs").iterdir()
    return run_dir


def candidates(tests: list[dict[str, Any]], threshold: float) -> dict[str, dict[str, Any] | None]:
    """Each rule's candidate in one run's test history (HoldoutResult JSON, oldest first)."""
    return {RULE: next((t for t in tests if t["confirmed"] and t.get("rule") == RULE), None),
            OLD_RULE: next((t for t in tests if t["mean"] >= threshold), None)}


def retest(run_dir: Path, policy: Path, episodes: int) -> dict[str, Any]:
    out = policy.with_suffix(".retest.json")
    subprocess.run([sys.executable, "-m", "rlfleet.launcher", "test", str(run_dir), "--policy", str(policy), "--episodes",
                    str(episodes), "--seed-counter", str(RETEST_COUNTER), "--json", str(out)],
                   cwd=REPO, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    report = json.loads(out.read_text())
    return {"mean": report["mean"], "std": report["std"], "ci95": report["ci95"], "episodes": report["episodes"],
            "holds": report["reaches_threshold"]}


def measure(name: str, seed: int, budget: int | None, retest_episodes: int | None, timeout: float) -> dict[str, Any]:
    case = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        kept = Path(tmp) / "policies"
        kept.mkdir()
        started = time.monotonic()
        run_dir = train(case, seed, Path(tmp) / "data", kept, budget, timeout)
        seconds = time.monotonic() - started
        layout = RunLayout(run_dir.parent.parent, run_dir.name)
        meta = stored_meta(layout.journal, "lifecycle", "judge")
        config = load_run_config(layout.config_file)
        threshold = config.env.solve_threshold
        tests = (meta.get("judge") or {}).get("tests", [])
        row: dict[str, Any] = {"case": name, "seed": seed, "env": config.env.id, "threshold": threshold,
                               "run_state": meta.get("lifecycle", {}).get("state"), "launch_seconds": seconds,
                               "tests": len(tests), "rules": {}}
        for rule, test in candidates(tests, threshold).items():
            if test is None:
                row["rules"][rule] = None
                continue
            policy = kept / Path(policy_path(test["policy_version"])).name
            row["rules"][rule] = {
                "policy_version": test["policy_version"], "wall_seconds": test["wall_seconds"],
                "env_steps": test["env_steps"], "test_mean": test["mean"], "test_ci95": test["ci95"],
                "bound": test.get("bound"),
                "retest": retest(run_dir, policy, retest_episodes or test["episodes"]) if policy.exists() else None}
        return row


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary = {}
    for rule in (RULE, OLD_RULE):
        solved = [r["rules"][rule] for r in rows if r["rules"][rule] is not None]
        retested = [s["retest"] for s in solved if s["retest"] is not None]
        holding = sum(t["holds"] for t in retested)
        ranked = [r["rules"][rule]["wall_seconds"] if r["rules"][rule] is not None else float("inf") for r in rows]
        summary[rule] = {"runs": len(rows), "solved": len(solved), "retested": len(retested), "holding": holding,
                         "hold_rate": holding / len(retested) if retested else float("nan"),
                         "median_seconds_to_solve": _median(ranked),
                         "median_env_steps_to_solve": _median([s["env_steps"] for s in solved])}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget-seconds", type=int, help="every run's max_wall_seconds (default: per case)")
    parser.add_argument("--retest-episodes", type=int, help="re-test episodes (default: as many as the run's test)")
    parser.add_argument("--timeout", type=float, default=1200, help="kill a run that takes longer than this")
    parser.add_argument("--json", type=Path, help="write the summary and every run here")
    args = parser.parse_args()
    print(f"rule: {RULE_TEXT} ({RULE}); old rule: test mean >= threshold ({OLD_RULE})", flush=True)
    rows = []
    for seed in args.seeds:
        for name in args.cases:
            row = measure(name, seed, args.budget_seconds, args.retest_episodes, args.timeout)
            rows.append(row)
            parts = []
            for rule, found in row["rules"].items():
                if found is None:
                    parts.append(f"{rule}: no solve")
                    continue
                again = found["retest"]
                held = "policy file lost" if again is None else (
                    f"re-test {again['mean']:.1f} [{again['ci95'][0]:.1f}, {again['ci95'][1]:.1f}] "
                    f"{'holds' if again['holds'] else 'DOES NOT HOLD'}")
                bound = "" if found["bound"] is None else f", bound {found['bound']:.1f}"
                parts.append(f"{rule}: v{found['policy_version']} at {found['wall_seconds']:.0f}s, test "
                             f"{found['test_mean']:.1f}{bound}, {held}")
            print(f"{name} seed {seed} ({row['env']}, threshold {row['threshold']:g}, {row['run_state']}, "
                  f"{row['tests']} tests): " + "; ".join(parts), flush=True)
    summary = summarize(rows)
    print()
    for rule, s in summary.items():
        print(f"{rule:22} solved {s['solved']}/{s['runs']}, re-tests holding {s['holding']}/{s['retested']} "
              f"(hold rate {s['hold_rate']:.1%}), median time to solve {s['median_seconds_to_solve']:.1f}s, "
              f"median env steps {s['median_env_steps_to_solve']:.0f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
