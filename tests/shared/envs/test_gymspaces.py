"""Every observation dtype an env may give: boolean and integer images are cast once where the env is built and
described with their value range, so the chunk schema, the actors and the CNN's scaling follow from ObsSpace."""

from __future__ import annotations

import numpy as np
import pytest

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.gymspaces import describe
from rlfleet.shared.envs.seeds import MAX_RUN_SEED, REGIONS, base_seed
from rlfleet.shared.payloads.spaces import ObsSpace
from tests.support.policies import EPSILON_GREEDY

INT_IMAGE = "tests.support.userenv:IntImageEnv"


def spaces_of(env: EnvConfig) -> ObsSpace:
    made = make_env(env)
    try:
        return describe(made).obs
    finally:
        made.close()


def test_minatar_boolean_frames_become_0_1_uint8_images_through_to_a_checked_chunk() -> None:
    pytest.importorskip("minatar", reason="the minatar extra (pip install 'rlfleet[minatar]') is not installed")
    env = EnvConfig(id="MinAtar/Breakout-v1")
    made = make_env(env)
    try:
        spaces = describe(made)
    finally:
        made.close()
    assert spaces.obs == ObsSpace(shape=(10, 10, 4), dtype="uint8", image_max=1)
    assert spaces.obs.image and spaces.obs.channels_last
    # The largest seed the scheme hands out: MinAtar seeds numpy's RandomState, which takes only 32 bits.
    seed = base_seed(MAX_RUN_SEED, "test", REGIONS["test"].tasks - 1, REGIONS["test"].counters - 1)
    rollout = Rollout(env, 4, spaces, EPSILON_GREEDY, seed=seed)
    try:
        chunk = rollout.collect(50, random=True)
    finally:
        rollout.close()
    rollout.schema.check(chunk.arrays, num_envs=4)
    obs = chunk.arrays["obs"]
    assert obs.dtype == np.uint8 and obs.shape == (50, 4, 10, 10, 4) and set(np.unique(obs)) == {0, 1}


@pytest.mark.parametrize(("dtype", "high", "found"), [
    ("int32", 3, ObsSpace(shape=(6, 6, 1), dtype="uint8", image_max=3)),
    ("uint16", 255, ObsSpace(shape=(6, 6, 1), dtype="uint8", image_max=255)),
    ("uint16", 1000, ObsSpace(shape=(6, 6, 1), dtype="float32")),
    ("int32", 70000, ObsSpace(shape=(6, 6, 1), dtype="float32")),
])
def test_integer_images_are_uint8_where_their_bounds_fit_and_float32_otherwise(dtype: str, high: int,
                                                                             found: ObsSpace) -> None:
    env = EnvConfig.model_validate({"id": INT_IMAGE, "kwargs": {"high": high, "dtype": dtype}})
    assert spaces_of(env) == found
    made = make_env(env)
    try:
        made.reset(seed=0)
        obs = made.step(0)[0]
    finally:
        made.close()
    assert obs.dtype == np.dtype(found.dtype) and obs.max() == 1


def test_flat_integer_observations_are_described_as_float32_as_before() -> None:
    assert spaces_of(EnvConfig(id="rlfleet/TicTacToe-v0")).dtype == "float32"
