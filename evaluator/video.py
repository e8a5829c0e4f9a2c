"""One greedy episode rendered to a video file (`rlfleet test --video`): watching a policy shows what its mean
return cannot, such as a cart that drifts to the edge or a lander that hovers until the time limit.

Frames are the env's own, from `render_mode="rgb_array"`: one after the reset and one after every step, so an
episode of L steps gives L + 1 frames, played at the env's `render_fps`. imageio encodes them, streaming .mp4
frames to the ffmpeg binary that the imageio-ffmpeg wheel bundles, and .gif through pillow, which stores
identical consecutive frames as one longer frame (a .gif may hold fewer frames, playing just as long). imageio,
imageio-ffmpeg and pygame (which draws gymnasium's classic-control envs) come with the `video` extra.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from rlfleet.evaluator.episodes import Act
from rlfleet.shared.config.envcheck import EnvSectionError
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import make_env

DEFAULT_FPS = 30
SUFFIXES = (".mp4", ".gif")


class VideoError(ValueError):
    """No video can be made: an unknown file type, the video extra missing, or an env that cannot render."""


@dataclass(frozen=True)
class Recording:
    path: Path
    seed: int
    episode_return: float
    length: int
    frames: int


def check_video_path(path: Path) -> None:
    """Refuse a video before any episode is played: a file type imageio is not set up for, or no imageio."""
    if path.suffix.lower() not in SUFFIXES:
        raise VideoError(f"--video {path}: give a .mp4 or .gif file")
    try:
        import imageio  # noqa: F401
        import imageio_ffmpeg  # noqa: F401
    except ImportError as exc:
        raise VideoError(f"--video needs the video extra ({exc.name} is missing): pip install 'rlfleet[video]'"
                         ) from exc


def record_episode(act: Act, env: EnvConfig, seed: int, path: Path) -> Recording:
    """Play one greedy episode from `seed` (training-only wrappers left out, as in evaluation) into `path`."""
    import imageio.v2 as imageio  # its get_writer streams frames to the encoder as they come

    # rgb_array needs no display; pygame-drawn envs still initialise one and complain on headless machines
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    try:
        made = make_env(env, training=False, render_mode="rgb_array")
    except EnvSectionError as exc:
        raise VideoError(f"cannot build the env to render it: {exc}") from exc
    try:
        obs, _ = made.reset(seed=seed)
        first = _frame(made, env.id)
        options = _writer_options(path.suffix.lower(), made.metadata.get("render_fps") or DEFAULT_FPS)
        path.parent.mkdir(parents=True, exist_ok=True)
        total, steps, done = 0.0, 0, False
        writer = imageio.get_writer(path, **options)
        try:
            writer.append_data(first)
            while not done:
                obs, reward, terminated, truncated, _ = made.step(act(np.asarray(obs)[None])[0])
                total, steps, done = total + float(reward), steps + 1, bool(terminated or truncated)
                writer.append_data(_frame(made, env.id))
        finally:
            writer.close()
        return Recording(path=path, seed=seed, episode_return=total, length=steps, frames=steps + 1)
    finally:
        made.close()


def _writer_options(suffix: str, fps: float) -> dict[str, Any]:
    if suffix == ".mp4":
        # libx264's yuv420p needs even sizes; imageio's default macro block of 16 would rescale most frames (600x400)
        return {"fps": fps, "macro_block_size": 2}
    return {"duration": 1000 / fps, "loop": 0}  # gif, through pillow: milliseconds per frame, looping for ever


def _frame(env: gym.Env, env_id: str) -> np.ndarray:
    """The env's current frame; anything else than an RGB(A) image, or an error, means it cannot render."""
    try:
        frame = env.render()
    except Exception as exc:  # a user's env: gym.Env.render itself raises NotImplementedError
        raise VideoError(f"{env_id} cannot render a video: render() raised {exc!r}") from exc
    if isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] in (3, 4):
        return frame
    got = type(frame).__name__ if not isinstance(frame, np.ndarray) else f"an array {frame.shape} {frame.dtype}"
    raise VideoError(f"{env_id} cannot render a video: with render_mode='rgb_array' its render() returned {got}, "
                     f"not an RGB image (uint8, height x width x 3)")
