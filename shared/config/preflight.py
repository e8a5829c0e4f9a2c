"""The checks of a run config that need more than its values: building the env, whether the collectors' env
backend can step it, loading the learner hooks, whether the trackers' libraries are installed, and what the env's
spaces decide (the algorithm's own checks and the run plan).

Validating a config (shared/config/run_config.py) is pure, so it costs nothing wherever it happens: every claimed
task carries parts of the config, the coordinator validates live setting changes and stored configs, and a
worker that validates its task must not start a child process or build an env to do it. The checks that do
have effects run here, once, by the two processes that stand before a run: the launcher before it starts any
service, and the coordinator where it loads the run's config. Both build the env, ask about the env backend and
load the hooks in child interpreters (shared/config/envcheck.py, shared/config/backendcheck.py,
shared/config/hookcheck.py), so neither loads gymnasium, torch or a user's module.

A problem is raised as the pydantic ValidationError validation raised before these checks moved here, with the
same message at the same field (`env` for the env section, the run config itself for hooks and the algorithm's
checks), so what the user reads, and what callers catch, did not change.
"""

from __future__ import annotations

from pydantic import ValidationError

from rlfleet.shared.algorithms import spec_of
from rlfleet.shared.config.backendcheck import env_backend_problem
from rlfleet.shared.config.envcheck import build_problem, spaces_of
from rlfleet.shared.config.hookcheck import hooks_problem
from rlfleet.shared.config.plan import RunPlan
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.config.threshold import resolve_threshold
from rlfleet.shared.config.tracking import missing_tracker_extra
from rlfleet.shared.policy.manifest import encoder_features, encoder_for


def _refused(config: RunConfig, problem: str, field: str | None = None) -> ValidationError:
    section = getattr(config, field).model_dump(mode="json", exclude_defaults=True) if field else config
    loc = (field,) if field else ()
    return ValidationError.from_exception_data(type(config).__name__, [
        {"type": "value_error", "loc": loc, "input": section, "ctx": {"error": ValueError(problem)}}])


def preflight(config: RunConfig) -> RunPlan:
    """The run's plan, once the env builds, the algorithm accepts its spaces and every hook loads; its config has
    env.solve_threshold resolved (shared/config/threshold.py: the registration's, where the config left it out).

    Raises ValidationError naming the field at fault (the env section, `collector.env_backend`, `algo.*`, among
    them an `algo.net.encoder` that cannot read the env's observations, `learner.hooks[i]`, or `tracking` naming a
    tracker whose library is not installed), in the order
    validation checked them;
    ValueError (RunPlan.of) when the algorithm cannot act in the env's spaces."""
    problem = build_problem(config.env)
    if problem is not None:
        raise _refused(config, problem, "env")
    problem = env_backend_problem(config.env, config.collector.env_backend)
    if problem is not None:
        raise _refused(config, problem, "collector")
    spec = spec_of(config.algo)
    try:
        spaces = spaces_of(config.env)
    except ValueError:
        pass  # spaces rlfleet cannot train: RunPlan.of below refuses them, naming env.id
    else:
        try:
            encoder_features(encoder_for(config.algo.net, spaces.obs), spaces.obs)  # algo.net.encoder fits the obs
            if spec.fits is not None:
                spec.fits(config, spaces)
        except ValueError as exc:
            raise _refused(config, str(exc)) from exc
    problem = hooks_problem(tuple(hook.call for hook in config.learner.hooks))
    if problem is not None:
        raise _refused(config, problem)
    problem = missing_tracker_extra(config.tracking)
    if problem is not None:
        raise _refused(config, problem, "tracking")
    return RunPlan.of(resolve_threshold(config))
