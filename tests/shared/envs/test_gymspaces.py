"""Every observation dtype an env may give: boolean and integer images are cast once where the env is built and
described with their value range, so the chunk schema, the actors and the CNN's scaling follow from ObsSpace."""

from __future__ import annotations

import numpy as np
import pytest

from rlfleet.collector_worker.rollout import Rollout
from rlfleet.shared.config.envcheck import EnvSectionError
from rlfleet.shared.config.run_config import EnvConfig
from rlfleet.shared.envs.build import make_env
from rlfleet.shared.envs.gymspaces import describe
from rlfleet.shared.envs.seeds import MAX_RUN_SEED, REGIONS, base_seed
from rlfleet.shared.payloads.spaces import (
    BoxPart,
    DiscretePart,
    ImagePart,
    MultiBinaryPart,
    MultiDiscretePart,
    ObsSpace,
    Spaces,
)
from rlfleet.shared.policy.actors import legal
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


def any_space(space: str, **kwargs: object) -> EnvConfig:
    return EnvConfig.model_validate({"id": "tests.support.userenv:AnySpace", "kwargs": {"space": space, **kwargs}})


@pytest.mark.parametrize(("space", "found"), [
    ("discrete", ObsSpace(shape=(1,), dtype="uint8", parts=(DiscretePart(n=4),))),
    ("discrete_300", ObsSpace(shape=(1,), dtype="int16", parts=(DiscretePart(n=300),))),
    ("discrete_negative", ObsSpace(shape=(1,), dtype="int8", parts=(DiscretePart(n=5, start=-2),))),
    ("multidiscrete", ObsSpace(shape=(3,), dtype="uint8", parts=(MultiDiscretePart(nvec=(3, 2, 4), start=(0, 0, 0)),))),
    ("multidiscrete_2d", ObsSpace(shape=(4,), dtype="int8",
                                  parts=(MultiDiscretePart(nvec=(2, 3, 4, 5), start=(0, 1, 0, -1)),))),
    ("multidiscrete_huge", ObsSpace(shape=(1,), dtype="int32", parts=(MultiDiscretePart(nvec=(2**20,), start=(0,)),))),
    ("multibinary", ObsSpace(shape=(5,), dtype="uint8", parts=(MultiBinaryPart(size=5),))),
    ("tuple", ObsSpace(shape=(5,), dtype="float32",
                       parts=(DiscretePart(n=3), BoxPart(size=2), MultiBinaryPart(size=2)))),
    ("nested", ObsSpace(shape=(9,), dtype="float32", parts=(  # keys sorted, depth first: a.flags, a.pos, z.0, z.1
        MultiBinaryPart(size=3), BoxPart(size=3), DiscretePart(n=2), MultiDiscretePart(nvec=(3, 3), start=(0, 0))))),
    ("camera", ObsSpace(shape=(74,), dtype="float32", parts=(  # cam, gear, speed: an image beside a box is float32
        ImagePart(shape=(6, 4, 3)), DiscretePart(n=3), BoxPart(size=1)))),
    ("grid_and_cue", ObsSpace(shape=(26,), dtype="uint8", parts=(ImagePart(shape=(1, 5, 5), image_max=1),
                                                                 DiscretePart(n=2)))),
])
def test_every_observation_space_is_stored_raw_in_the_smallest_integer_dtype(space: str, found: ObsSpace) -> None:
    env = any_space(space)
    assert spaces_of(env) == found
    made = make_env(env)
    try:
        first, _ = made.reset(seed=0)
        later = made.step(0)[0]
    finally:
        made.close()
    for obs in (first, later):
        assert obs.dtype == np.dtype(found.dtype) and obs.shape == found.shape


def test_unsupported_observation_spaces_are_refused_naming_what_is_supported() -> None:
    with pytest.raises(EnvSectionError, match="Text.*not supported: use Box, Discrete, MultiDiscrete, MultiBinary"):
        spaces_of(any_space("text"))


def test_an_image_inside_a_dict_needs_1_3_or_4_channels_first_or_last() -> None:
    with pytest.raises(EnvSectionError, match=r"entry 'img' is a uint8 image of shape \(5, 5, 5\) without 1, 3 or 4"):
        spaces_of(any_space("five_channel_image"))


def test_an_image_inside_a_dict_is_stored_pixel_for_pixel_in_c_order() -> None:
    made = make_env(any_space("camera"))
    try:
        raw = made.reset(seed=3)[0]
        made.unwrapped.observation_space.seed(3)  # type: ignore[attr-defined]
        original = made.unwrapped.observation_space.sample()  # type: ignore[attr-defined]
    finally:
        made.close()
    np.testing.assert_array_equal(raw[:72], original["cam"].reshape(-1))
    assert raw[72] == original["gear"] and raw[73] == original["speed"][0]


def test_an_observation_outside_its_space_is_an_env_error_never_trained_on() -> None:
    """Step 3 of every episode observes 6 + 5 in Discrete(4, start=3): stored as uint8 it would be a valid-looking
    value, one-hot it would index past the part; it is counted as an env error, the row invalid, the env reset."""
    env = any_space("discrete_from_3", out_of_range_at=3)
    spaces = spaces_of_env(env)
    rollout = Rollout(env, 2, spaces, EPSILON_GREEDY, seed=0)
    try:
        chunk = rollout.collect(6, random=True)
    finally:
        rollout.close()
    a = chunk.arrays
    assert chunk.env_errors == 4  # steps 3 and 6 (step 3 of the next episode) of both envs
    assert not a["valid"][[2, 5]].any() and a["valid"][[0, 1, 3, 4]].all()
    rollout.schema.check(a, num_envs=2)
    rollout.schema.check_values(a, 12)
    assert a["obs"].dtype == np.uint8 and ((a["obs"] >= 3) & (a["obs"] <= 6)).all()


def test_an_action_mask_is_found_in_raw_columns_after_integer_parts() -> None:
    """Dict keys sort 'a_mode' (one raw column, three one-hot ones) before 'action_mask': the mask starts at raw
    column 1, where the actors read it, not at 3."""
    spaces = spaces_of_env(any_space("masked"))
    assert spaces.action_mask_offset == 1 and spaces.obs.dtype == "uint8"
    obs = np.array([[2, 0, 1], [0, 1, 1], [1, 0, 0]], np.uint8)
    assert legal(spaces, obs).tolist() == [[False, True], [True, True], [True, True]]


def spaces_of_env(env: EnvConfig) -> Spaces:
    made = make_env(env)
    try:
        return describe(made)
    finally:
        made.close()
