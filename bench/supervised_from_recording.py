"""The supervised trainer on a recording of a solved CartPole run: two targets, 3 seeds each.

    python bench/supervised_from_recording.py [--expert-config configs/cartpole_es.yaml] [--episodes 20]

1. `rlfleet up` trains the expert until a 100-episode test confirms its solve; `rlfleet record` plays its best
   policy for --episodes episodes into `cartpole-expert` (bench/bc_from_recording.py's steps 1 and 2).
2. `rlfleet up --config configs/cartpole_supervised.yaml` per seed and target:
   * dynamics: next observation from observation and action (mse; valid R^2),
   * the expert's action from the observation (cross-entropy; valid accuracy).
Printed per run: the valid split's scores after the first, fifth and last epoch, the epoch of the best model
(lowest valid loss, best/model.safetensors, which must be there) and the seconds from launch.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bc_from_recording import record_expert, up  # type: ignore[import-not-found]  # the neighbouring bench script

TARGETS = {
    "dynamics": ["algo.inputs=[obs, actions]", "algo.target=next_obs", "algo.loss=mse"],
    "action": ["algo.inputs=[obs]", "algo.target=actions", "algo.loss=cross_entropy"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expert-config", default="configs/cartpole_es.yaml")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlfleet-sl-") as tmp:
        data = Path(tmp)
        record_expert(data, args.expert_config, args.episodes)
        for target, overrides in TARGETS.items():
            for seed in args.seeds:
                run_dir, summary = up(data, "configs/cartpole_supervised.yaml", seed,
                                      *[a for o in overrides for a in ("--set", o)])
                scores = summary["dataset"]["epoch_scores"]
                if not (run_dir / "best" / "model.safetensors").is_file():
                    raise SystemExit(f"{run_dir.name}: no best/model.safetensors")
                best = min(scores, key=lambda s: s["scores"]["valid_loss"])["epoch"]
                shown = " | ".join(f"epoch {s['epoch']}: " + ", ".join(f"{k} {v:.4g}" for k, v in s["scores"].items())
                                   for s in (scores[0], scores[4], scores[-1]))
                print(f"{target} seed {seed}: {shown}; best epoch {best}; {summary['launch_seconds']:.1f}s from "
                      "launch")

if __name__ == "__main__":
    main()
