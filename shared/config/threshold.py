"""The run's solve threshold, resolved once before the run starts.

`env.solve_threshold` left out means 'registered': the reward_threshold of the env's gymnasium registration
(CartPole-v1: 475, InvertedPendulum-v5: 950), or no threshold where it registers none (Pendulum-v1, the user's own
entry point). Validation is pure, so it cannot look the registration up; the env check that builds the section
anyway (shared/config/envcheck.py, in a child interpreter where gymnasium is not loaded) reads it. The coordinator
resolves the config it starts a run with, so the journal, the run's config.yaml and every task carry the number
or null that applied, and a resumed run keeps it whatever the registration says later.

No threshold (null) is a run of its own kind: validations never nominate a version for a held-out test on their
score; the run trains to its budget, keeps the best validated policy (best/) and the last one, tests the best,
and ending on its budget is its success (coordinator/state/judge.py, coordinator/operations/budget.py).
"""

from __future__ import annotations

from rlfleet.shared.config.env import REGISTERED
from rlfleet.shared.config.envcheck import registered_threshold
from rlfleet.shared.config.run_config import RunConfig


def resolve_threshold(config: RunConfig) -> RunConfig:
    """`config` with env.solve_threshold a number or null; ValueError naming the env section when its default
    must be read from an env that does not build."""
    if config.env.solve_threshold != REGISTERED:
        return config
    env = config.env.model_copy(update={"solve_threshold": registered_threshold(config.env)})
    return config.model_copy(update={"env": env})


def has_solve_rule(config: RunConfig) -> bool:
    """Whether a resolved run can be 'solved': it has a threshold, or a battle rule (evaluation.against) that
    replaces it."""
    return bool(config.evaluation.against) or config.env.threshold is not None


def threshold_note(given: RunConfig, resolved: RunConfig) -> str:
    """One line for the start-up log: which threshold applies, and where it comes from."""
    env, threshold = resolved.env, resolved.env.threshold
    if resolved.evaluation.against:
        return "solve rule: the battle rule of evaluation.against (env.solve_threshold is not used)"
    if given.env.solve_threshold != REGISTERED:
        source = "set in the config"
    elif threshold is None:
        source = f"{env.id} registers no reward_threshold"
    else:
        source = f"the reward_threshold of {env.id}'s gymnasium registration"
    if threshold is None:
        return (f"env.solve_threshold: none ({source}): the run trains to its budget, keeps the best and the last "
                f"policy and tests the best at the end")
    return f"env.solve_threshold: {threshold:g} ({source})"
