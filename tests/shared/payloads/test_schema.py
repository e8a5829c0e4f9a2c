"""The chunk schema: derived from the spaces, allocates what the collector fills, refuses what does not match."""

from __future__ import annotations

import numpy as np
import pytest

from rlfleet.shared.payloads.schema import ChunkSchema, SchemaError
from rlfleet.shared.payloads.spaces import BoxActions, DiscreteActions, MultiDiscreteActions, ObsSpace, Spaces
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


def _filled(schema: ChunkSchema, steps: int = 4, envs: int = 2) -> dict[str, np.ndarray]:
    arrays = schema.allocate(steps, envs)
    for name, arr in arrays.items():
        if name != "valid":
            arr[...] = 0
    return arrays


def test_content_that_agrees_with_the_report_passes() -> None:
    schema = ChunkSchema.of(CARTPOLE, True)
    arrays = _filled(schema)
    arrays["actions"][:] = 1
    arrays["rewards"][:] = -1e9  # the bound itself is allowed
    schema.check_values(arrays, rows=8)


@pytest.mark.parametrize(("action", "change", "message"), [
    (DiscreteActions(n=2), lambda a: a.__setitem__("actions", a["actions"] - 1),
     r"column 'actions' is outside the action space \[2\] on 8 valid row\(s\), first row 0"),
    (MultiDiscreteActions(nvec=(2, 3)), lambda a: a["actions"].__setitem__((3, 1, 1), 3),
     r"outside the action space \[2, 3\] on 1 valid row\(s\), first row 7: \[0, 3\]"),
    (DiscreteActions(n=2), lambda a: a["obs"].__setitem__((1, 0, 2), np.inf), r"column 'obs' is non-finite"),
    (DiscreteActions(n=2), lambda a: a["logp"].__setitem__((0, 1), np.nan), r"column 'logp' is non-finite"),
    (BoxActions(low=(-1.0,), high=(1.0,)), lambda a: a["actions"].__setitem__((2, 0, 0), -2e9),
     r"column 'actions' is non-finite or beyond ±1e\+09 on 1 valid row\(s\), first row 4"),
])
def test_content_that_could_stop_a_learner_is_refused(action, change, message: str) -> None:
    schema = ChunkSchema.of(Spaces(obs=ObsSpace(shape=(4,), dtype="float32"), action=action), True)
    arrays = _filled(schema)
    change(arrays)
    with pytest.raises(SchemaError, match=message):
        schema.check_values(arrays, rows=8)


def test_box_actions_outside_the_bounds_are_the_policys_own_units() -> None:
    """A Gaussian policy's raw action may exceed the env's bounds (it is clipped when applied): not corrupt."""
    schema = ChunkSchema.of(Spaces(obs=ObsSpace(shape=(3,), dtype="float32"),
                                   action=BoxActions(low=(-1.0,), high=(1.0,))), False)
    arrays = _filled(schema)
    arrays["actions"][:] = 5.0
    schema.check_values(arrays, rows=8)


def test_rows_where_the_env_failed_are_not_checked() -> None:
    schema = ChunkSchema.of(CARTPOLE, False)
    arrays = _filled(schema)
    arrays["valid"][2, 1] = False
    arrays["rewards"][2, 1], arrays["actions"][2, 1], arrays["next_obs"][2, 1] = np.nan, -5, np.inf
    schema.check_values(arrays, rows=8)
    arrays["valid"][2, 1] = True
    with pytest.raises(SchemaError, match="first row 5"):
        schema.check_values(arrays, rows=8)


def test_the_row_count_must_be_the_reported_one() -> None:
    schema = ChunkSchema.of(CARTPOLE, False)
    with pytest.raises(SchemaError, match="the payload holds 8 rows, its report said 10"):
        schema.check_values(_filled(schema), rows=10)
