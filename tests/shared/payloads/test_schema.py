"""The chunk schema: derived from the spaces, allocates what the collector fills, refuses what does not match."""

from __future__ import annotations

import numpy as np
import pytest

from shared.payloads.schema import ChunkSchema, SchemaError
from shared.payloads.spaces import DiscreteActions, MultiDiscreteActions, ObsSpace, Spaces
from tests.support.policies import CARTPOLE, PENDULUM

IMAGE = Spaces(obs=ObsSpace(shape=(8, 8, 3), dtype="uint8"), action=MultiDiscreteActions(nvec=(3, 2)))


@pytest.mark.parametrize(("spaces", "logp", "actions"), [
    (CARTPOLE, False, ("int64", ())), (PENDULUM, True, ("float32", (1,))), (IMAGE, True, ("int64", (2,)))])
def test_columns_follow_the_spaces(spaces: Spaces, logp: bool, actions: tuple) -> None:
    schema = ChunkSchema.of(spaces, behaviour_logp=logp)
    assert ("logp" in schema.columns) == logp
    col = schema.columns["actions"]
    assert (col.dtype, col.shape) == actions
    assert schema.columns["obs"].dtype == spaces.obs.dtype and schema.columns["obs"].shape == spaces.obs.shape
    arrays = schema.allocate(5, 3)
    assert arrays["obs"].shape == (5, 3, *spaces.obs.shape) and arrays["valid"].all()
    schema.check(arrays, num_envs=3)


def test_images_stay_uint8() -> None:
    arrays = ChunkSchema.of(IMAGE, True).allocate(2, 1)
    assert arrays["obs"].dtype == np.uint8 and arrays["next_obs"].dtype == np.uint8


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: a.pop("valid"), r"missing \['valid'\]"),
    (lambda a: a.__setitem__("extra", np.zeros((4, 2))), r"unexpected \['extra'\]"),
    (lambda a: a.__setitem__("actions", a["actions"].astype(np.float32)), "column 'actions' is float32"),
    (lambda a: a.__setitem__("obs", a["obs"][:, :, :3]), "column 'obs' is float32\\[4, 2, 3\\]"),
    (lambda a: a.__setitem__("rewards", a["rewards"][:, :1]), "rewards has shape"),
])
def test_a_chunk_that_breaks_the_schema_is_refused(change, message: str) -> None:
    schema = ChunkSchema.of(CARTPOLE, False)
    arrays = schema.allocate(4, 2)
    change(arrays)
    with pytest.raises(SchemaError, match=message):
        schema.check(arrays, num_envs=2)


def test_the_reported_env_count_must_match() -> None:
    schema = ChunkSchema.of(Spaces(obs=ObsSpace(shape=(2,), dtype="float32"), action=DiscreteActions(n=2)), False)
    with pytest.raises(SchemaError, match="expected \\[steps, 3\\]"):
        schema.check(schema.allocate(4, 2), num_envs=3)
