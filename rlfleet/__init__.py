"""rlfleet: distributed reinforcement-learning training (a coordinator, collector, learner and evaluator services).

The import package of every service: rlfleet.coordinator, rlfleet.collector_worker, rlfleet.learner_worker,
rlfleet.evaluator, rlfleet.launcher and the code they share, rlfleet.shared. In the repository each lives in its own
top-level folder, linked from here; a wheel holds them under rlfleet/ with the configs `rlfleet up` names.

    policy = rlfleet.load_policy("data/runs/<run>")   # a run's best policy, or a policy file
    action = policy.predict(obs)                      # one observation as the env gives it, or a batch
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_policy"]

if TYPE_CHECKING:
    from rlfleet.shared.policy.predictor import load_policy


def __getattr__(name: str) -> Any:
    """`rlfleet.load_policy`, imported on first use: `import rlfleet.shared...` in every service stays as cheap as
    the module it names (PEP 562)."""
    if name == "load_policy":
        from rlfleet.shared.policy.predictor import load_policy

        return load_policy
    raise AttributeError(f"module 'rlfleet' has no attribute {name!r}")
