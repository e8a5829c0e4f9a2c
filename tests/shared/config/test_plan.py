"""Planning a run: the env's spaces read where the env section was built, the algorithm's fit checked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.payloads.spaces import BoxActions, BoxPart, DiscreteActions, DiscretePart, ImagePart, ObsSpace
from tests.support.policies import CARTPOLE
from tests.support.repo import REPO

PPO_QUEUE = {"sampling": {"unit": "chunk"}, "replay": {"sampler": "fifo", "max_use": 1}}


def test_cartpole_plan_for_the_default_run() -> None:
    plan = RunPlan.of(RunConfig())
    assert plan.spaces == CARTPOLE and plan.behaviour.head == "q_values" and not plan.behaviour.sample
    assert plan.behaviour.epsilon == RunConfig().collector.epsilon
    assert "logp" not in plan.schema.columns


def test_continuous_actions_get_a_gaussian_head_and_log_probs() -> None:
    cfg = RunConfig.model_validate({"env": {"id": "Pendulum-v1"}, "algo": {"name": "ppo"}, **PPO_QUEUE})
    plan = RunPlan.of(cfg)
    assert isinstance(plan.spaces.action, BoxActions) and plan.spaces.action.low == (-2.0,)
    assert plan.behaviour.head == "gaussian" and plan.behaviour.sample and "logp" in plan.schema.columns


def test_state_dependent_exploration_gets_a_gaussian_sde_head_and_its_sample_freq() -> None:
    cfg = RunConfig.model_validate({"env": {"id": "Pendulum-v1"}, "algo": {"name": "ppo", "sde_sample_freq": 4},
                                    **PPO_QUEUE})
    plan = RunPlan.of(cfg)
    assert plan.behaviour.head == "gaussian_sde" and plan.behaviour.sde_sample_freq == 4
    assert plan.behaviour.sample and "logp" in plan.schema.columns


def test_an_algorithm_paired_with_a_space_it_cannot_handle_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match="algo.name 'dqn' cannot train env.id 'Pendulum-v1'.*Discrete action space"
                                         ".*algorithms that can: .*ppo"):
        RunPlan.of(RunConfig.model_validate({"env": {"id": "Pendulum-v1"}}))


def test_an_env_that_cannot_be_built_is_refused_with_its_error() -> None:
    with pytest.raises(ValueError, match="env.id: 'NoSuchEnv-v9' is not a registered gymnasium id"):
        RunPlan.of(RunConfig.model_validate({"env": {"id": "NoSuchEnv-v9"}}))  # the preflight refuses it first


def test_a_process_without_gymnasium_reads_the_spaces_from_a_child() -> None:
    script = ("import sys; from rlfleet.shared.config.run_config import RunConfig; "
              "from rlfleet.shared.config.envcheck import spaces_of; "
              "print(spaces_of(RunConfig().env).action.kind, 'gymnasium' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["discrete", "False"]
    assert isinstance(spaces_of(RunConfig().env).action, DiscreteActions)


def test_dict_observations_are_flattened_the_same_everywhere() -> None:
    cfg = RunConfig.model_validate({"env": {"id": "tests.support.userenv:DictObs"}})
    plan = RunPlan.of(cfg)
    # keys sorted: the mode's integer, then the position's 2 floats; the policy reads the mode one-hot (3 + 2)
    assert plan.spaces.obs == ObsSpace(shape=(3,), dtype="float32", parts=(DiscretePart(n=3), BoxPart(size=2)))
    assert plan.spaces.obs.encoded_size == 5


def test_dict_observations_with_images_plan_a_cnn_for_the_image_beside_the_other_entries() -> None:
    plan = RunPlan.of(RunConfig.model_validate({"env": {"id": "tests.support.userenv:DictObs",
                                                        "kwargs": {"image": True}}}))
    # keys sorted: mode, pixels, position; a Box entry makes the vector float32
    assert plan.spaces.obs == ObsSpace(shape=(195,), dtype="float32", parts=(
        DiscretePart(n=3), ImagePart(shape=(8, 8, 3)), BoxPart(size=2)))
    assert plan.spaces.obs.encoded_size == 5  # the image goes to its CNN, not the one-hot / box encoding


@pytest.mark.parametrize(("wrappers", "obs", "stack"), [
    ([{"name": "frame_stack", "frames": 4}], ("uint8", (4, 84, 84)), 4),
    ([{"name": "frame_stack", "frames": 2}, {"name": "scale_reward", "scale": 0.1}], ("uint8", (2, 6, 7, 3)), 2),
    ([{"name": "frame_stack", "frames": 2}, {"name": "normalize_reward"}, {"name": "clip_actions"}],
     ("uint8", (2, 6, 7, 3)), 2),  # wrappers that keep observations may follow the stack
    ([{"name": "frame_stack", "frames": 2}, {"name": "gymnasium", "call": "gymnasium.wrappers:TimeAwareObservation"}],
     ("uint8", (2, 6, 7, 3)), None),  # one that may change them hides the stack
    ([], ("uint8", (84, 84, 3)), None),  # one image, no stack: nothing recurs between rows
    ([{"name": "frame_stack", "frames": 4}], ("float32", (4, 3)), None),  # stacked vectors stay flat
    ([{"name": "frame_stack", "frames": 4}], ("uint8", (4, 10)), None),  # stacks of 1-D frames stay flat
    ([{"name": "frame_stack", "frames": 3}, {"name": "frame_stack", "frames": 2}], ("uint8", (2, 3, 6, 7)), 2),
])
def test_only_frame_stacked_images_get_the_compact_chunk_layout(wrappers: list, obs: tuple, stack: int | None) -> None:
    from rlfleet.shared.config.env import EnvConfig
    from rlfleet.shared.config.plan import chunk_schema, stacked_frames
    from rlfleet.shared.payloads.spaces import ObsSpace, Spaces
    from tests.support.policies import EPSILON_GREEDY

    spaces = Spaces(obs=ObsSpace(shape=obs[1], dtype=obs[0]), action=DiscreteActions(n=2))
    env = EnvConfig.model_validate({"id": "x.y:Z", "wrappers": wrappers})
    assert stacked_frames(env, spaces) == stack
    columns = chunk_schema(spaces, EPSILON_GREEDY, env).columns
    assert ("frame" in columns) == (stack is not None) and ("obs" in columns) == (stack is None)
