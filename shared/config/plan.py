"""A run's plan: its config joined with the env's spaces and what the algorithm makes of them.

The preflight (shared/config/preflight.py) builds it before the run starts, and the coordinator once more at start,
with the spaces of the env the preflight built (in a child process: shared/config/envcheck.py). That is where an
algorithm paired with a space it cannot handle is refused; the parts every worker needs (spaces, behaviour) travel
in their tasks, and the chunk schema is derived from them by one function on every side.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlfleet.shared.algorithms import REGISTRY, AlgorithmSpec, spec_of
from rlfleet.shared.config.env import EnvConfig
from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.envs.wrappers import FrameStack
from rlfleet.shared.payloads.schema import ChunkSchema
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


def stacked_frames(env: EnvConfig, spaces: Spaces) -> int | None:
    """k when the run's observations are stacks of k uint8 image frames made by gymnasium's FrameStackObservation,
    the last wrapper that changes observations; None otherwise (the flat chunk layout).

    Only then does each frame of an observation recur in its neighbours, so a chunk can store it once (the
    compact layout); the collector checks that the stacks it sees do continue one another."""
    obs_wrappers = [w for w in env.wrappers if not w.KEEPS_OBS]
    last = obs_wrappers[-1] if obs_wrappers else None
    if not isinstance(last, FrameStack):
        return None
    shape = spaces.obs.shape
    if spaces.obs.dtype != "uint8" or len(shape) < 3 or shape[0] != last.frames:
        return None
    return last.frames


def chunk_schema(spaces: Spaces, behaviour: Behaviour, env: EnvConfig) -> ChunkSchema:
    return ChunkSchema.of(spaces, behaviour_logp=behaviour.sample, stack=stacked_frames(env, spaces),
                          core_state=None if behaviour.core is None else behaviour.core.state_shape)


def _handles(spec: AlgorithmSpec, spaces: Spaces) -> bool:
    try:
        spec.head(spaces)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class RunPlan:
    config: RunConfig
    spec: AlgorithmSpec
    spaces: Spaces
    behaviour: Behaviour

    @classmethod
    def of(cls, config: RunConfig) -> RunPlan:
        """Raises ValueError naming the algorithm and the env when they do not fit together."""
        spaces = spaces_of(config.env)
        spec = spec_of(config.algo)
        try:
            behaviour = spec.behaviour(config, spaces)
        except ValueError as exc:
            able = [name for name, other in REGISTRY.items() if _handles(other, spaces)]
            raise ValueError(f"algo.name {spec.name!r} cannot train env.id {config.env.id!r}: {exc}; algorithms "
                             f"that can: {', '.join(able) or 'none'}") from exc
        return cls(config, spec, spaces, behaviour)

    @property
    def schema(self) -> ChunkSchema:
        return chunk_schema(self.spaces, self.behaviour, self.config.env)
