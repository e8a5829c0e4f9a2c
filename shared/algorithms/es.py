"""Evolution strategies' registry entry (Salimans et al. 2017): antithetic perturbations from a shared noise
table, centred ranks, SGD with momentum or Adam with weight decay on the flat parameter vector.

The learner is the ES master: each generation it publishes its policy, opens a generation of perturbations in
the coordinator and updates from the returns collectors report (learner_worker/algorithms/es.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from rlfleet.shared.algorithms.base import AlgorithmSpec, PopulationParams, sampled_head
from rlfleet.shared.config.base import NetConfig
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.manifest import Behaviour


class ESParams(PopulationParams):
    """Defaults solve CartPole-v1 within a few dozen generations of 32 members (configs/cartpole_es.yaml)."""

    name: Literal["es"] = "es"
    """Algorithm name."""
    net: NetConfig = NetConfig(hidden=(16,), activation="tanh")
    """The policy network's hidden layers and activation."""
    sigma: Annotated[float, Field(gt=0, le=10, description="perturbation scale")] = 0.1
    learning_rate: Annotated[float, Field(gt=0)] = 0.03
    """Optimizer step size."""
    optimizer: Literal["adam", "sgd"] = Field("adam", description="adam: AdamW; sgd: SGD with momentum")
    momentum: Annotated[float, Field(ge=0, lt=1, description="sgd's momentum")] = 0.9
    weight_decay: Annotated[float, Field(ge=0, description="decoupled for adam, L2 for sgd")] = 0.005
    noise_seed: Annotated[int, Field(ge=0, lt=2**63, description="seed of the shared noise table")] = 1234
    noise_table_size: Annotated[int, Field(ge=1024, le=2**28, description=(
        "float32 entries of the shared noise table, built in every process (4 bytes each)"))] = 2**22

    @model_validator(mode="after")
    def _antithetic(self) -> ESParams:
        if self.population % 2:
            raise ValueError(f"population ({self.population}) must be even: members come in antithetic pairs")
        return self


def _behaviour(config: object, spaces: Spaces) -> Behaviour:
    """Members are evaluated greedily (the argmax, or the gaussian's mean): ES optimises the deterministic policy."""
    return Behaviour(head=sampled_head(spaces), sample=False)


def _fits(config: object, spaces: Spaces) -> None:
    """The noise table must hold a distinct offset for every antithetic pair of the policy's parameters."""
    from rlfleet.shared.config.run_config import RunConfig
    from rlfleet.shared.policy.flat_params import parameter_count, policy_shapes
    from rlfleet.shared.policy.manifest import PolicyManifest
    from rlfleet.shared.policy.noise_table import check_capacity

    assert isinstance(config, RunConfig) and isinstance(config.algo, ESParams)
    try:
        head = sampled_head(spaces)
    except ValueError:
        return  # an action space nothing acts in is refused by the run plan, naming the algorithms that can
    algo = config.algo
    manifest = PolicyManifest.of(spaces, algo.net, head)
    if manifest.encoder.kind != "mlp":
        raise ValueError(f"algo.name es perturbs flat MLP policies, not a {manifest.encoder.kind} encoder: use "
                         "another algorithm for image observations, or algo.net.encoder: {kind: mlp}")
    dim = parameter_count(policy_shapes(manifest))
    try:
        check_capacity(algo.noise_table_size, dim, algo.population // 2)
    except ValueError as exc:
        raise ValueError(f"algo.population / algo.noise_table_size: {exc}") from exc


SPEC = AlgorithmSpec(name="es", summary="evolution strategies: antithetic noise-table perturbations, centred ranks",
                     params=ESParams, loop="population", learner="rlfleet.learner_worker.algorithms.es:ES",
                     head=sampled_head, behaviour=_behaviour, fits=_fits)
