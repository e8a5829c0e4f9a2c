"""Chunk payload size and codec time on real Pong frames: the flat layout against the compact one, uncompressed
and zstd at levels 1 and 3.

  python bench/payload_codec.py [--envs 8] [--steps 128] [--chunks 4] [--repeats 5]

Pong-v5 (ale-py) under gymnasium's AtariPreprocessing (84x84 grayscale, frame skip 4, noop starts) and rlfleet's
`frame_stack` wrapper (4 frames), stepped by the collector's own Rollout with random actions. Each chunk is encoded
and decoded `--repeats` times per variant (decoding includes rebuilding the stacks, as the learner's reader does);
the figures are medians per chunk. Bytes per env step is the payload
file's size over the chunk's env steps; the last line:
`payload_codec: flat=B0 compact=B1 zstd1=B2 zstd3=B3 frame=7056` (bytes per env step).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def pong(**kwargs: Any) -> Any:
    """ALE Pong as gymnasium's Atari preprocessing makes it (entry point of the bench's env section)."""
    import ale_py
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing

    gym.register_envs(ale_py)
    return AtariPreprocessing(gym.make("ALE/Pong-v5", frameskip=1, **kwargs), frame_skip=4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from rlfleet.collector_worker.rollout import Rollout
    from rlfleet.shared.config.env import EnvConfig
    from rlfleet.shared.envs.build import make_env
    from rlfleet.shared.envs.gymspaces import describe
    from rlfleet.shared.envs.wrappers import FrameStack
    from rlfleet.shared.payloads.codec import decode_chunk, encode_chunk
    from rlfleet.shared.payloads.framestack import flat_columns
    from rlfleet.shared.policy.manifest import Behaviour

    env = EnvConfig(id="bench.payload_codec:pong", wrappers=(FrameStack(frames=4),), solve_threshold=None)
    single = make_env(env)
    spaces = describe(single)
    single.close()
    rollout = Rollout(env, args.envs, spaces, Behaviour(head="q_values", sample=False), seed=0)
    try:
        chunks = [rollout.collect(args.steps, random=True).arrays for _ in range(args.chunks)]
    finally:
        rollout.close()
    variants: dict[str, tuple[str, int, bool]] = {  # name: compression, level, compact
        "flat": ("none", 1, False), "compact": ("none", 1, True), "zstd1": ("zstd", 1, True),
        "zstd3": ("zstd", 3, True)}
    per_step: dict[str, float] = {}
    for name, (compression, level, compact) in variants.items():
        sizes, encode, decode = [], [], []
        for arrays in chunks:
            data = arrays if compact else flat_columns(arrays)
            rows = int(data["rewards"].size)
            for _ in range(args.repeats):
                start = time.perf_counter()
                raw = encode_chunk(data, compression=compression, level=level)  # type: ignore[arg-type]
                mid = time.perf_counter()
                flat_columns(decode_chunk(raw)[0])  # what the learner's reader does: stacks rebuilt
                end = time.perf_counter()
                encode.append(mid - start)
                decode.append(end - mid)
            sizes.append(len(raw) / rows)
        per_step[name] = statistics.median(sizes)
        print(f"{name:8s} {per_step[name]:9.0f} bytes/env step  encode {1e3 * statistics.median(encode):7.1f} ms  "
              f"decode+rebuild {1e3 * statistics.median(decode):7.1f} ms  per chunk of {args.steps}x{args.envs}")
    print("payload_codec: " + " ".join(f"{k}={v:.0f}" for k, v in per_step.items()) + " frame=7056")


if __name__ == "__main__":
    main()
