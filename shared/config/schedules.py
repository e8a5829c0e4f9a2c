"""Hyperparameter schedules (`algo.schedules`): a learning rate, entropy coefficient or clip range that changes as
the run trains, as CleanRL anneals its learning rates and rl-baselines3-zoo writes `lin_1e-3`.

A schedule starts from the field's configured value and moves with the run's env steps (every env step the
collectors have had acknowledged, the x-axis of the run's curves and of `budget.max_env_steps`) or with the
learner's updates. Keeping the start in the field itself leaves every algorithm's parameter model a plain float
(what its learner reads), and a config without `schedules` trains exactly as before. The learner applies the
schedules before every update (learner_worker/schedules.py) and reports each scheduled value with its losses, so
status and TensorBoard show it; a resumed learner continues from the run's env steps or its restored update count.

A schedule changed while the run trains (a live setting) takes over from where the run stands instead of jumping: the
coordinator gives the new schedule a `begin` (the env steps, or the learner's reported updates, at the change) and a
`start` (the value the old schedule had reached there), and the new shape runs from that point and value. Both are
in the run config, so a restarted learner, status and the journal all see the same schedule.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from rlfleet.shared.config.base import Strict

# The fields a schedule may drive: they are read by the learner at every update (never baked into a network or the
# collectors' behaviour). Exploration epsilon has its own linear decay (collector.epsilon).
SCHEDULABLE = ("learning_rate", "entropy_coef", "clip_range", "clip_ratio")
ScheduleUnit = Literal["env_steps", "updates"]


class Schedule(Strict):
    """linear: start -> `end` over `over` units, then `end`; cosine: the same path along half a cosine (slow at both
    ends); piecewise: straight lines through (0, start) and `points`, the last value held after them."""

    kind: Literal["linear", "cosine", "piecewise"]
    """Shape of the schedule."""
    end: float | None = None
    """linear and cosine: the value reached after `over` units."""
    over: Annotated[int, Field(ge=1)] | None = None
    """linear and cosine: units (env steps or updates) from the start to `end`."""
    points: tuple[tuple[Annotated[float, Field(gt=0)], float], ...] = ()
    """piecewise: (units, value) knots after (0, the field's value), units strictly increasing."""
    unit: ScheduleUnit = "env_steps"
    """What moves the schedule: the run's env steps or the learner's updates."""
    begin: Annotated[int, Field(ge=0)] = 0
    """Units at which the schedule begins (the value is `start` until then): set by a live change (module doc)."""
    start: float | None = None
    """The value at `begin`; null: the field's configured value."""

    def taking_over(self, current: float, at: int) -> Schedule:
        """This schedule as a live change made `at` units into the run, when the field's value was `current`:
        it runs from there (a `begin` or `start` given explicitly is kept)."""
        update: dict[str, float | int] = {}
        if "begin" not in self.model_fields_set:
            update["begin"] = at
        if "start" not in self.model_fields_set:
            update["start"] = current
        return self.model_copy(update=update)

    def scaled_rest(self, configured: float, at: int, new_value: float) -> Schedule:
        """The rest of this schedule from `at` units on, scaled to pass through `new_value` there: a live change of
        the field itself (population-based training perturbs it) keeps the anneal still to come, in proportion. A
        schedule that has reached 0 cannot be scaled, and holds `new_value` from there on."""
        current = self.value(configured, at)
        elapsed = max(0, at - self.begin)
        held = Schedule(kind="linear", end=new_value, over=1, unit=self.unit, begin=at, start=new_value)
        if current == 0:
            return held
        factor = new_value / current
        if self.kind == "piecewise":
            points = tuple((x - elapsed, y * factor) for x, y in self.points if x > elapsed)
            return self.model_copy(update={"points": points, "begin": at, "start": new_value}) if points else held
        assert self.end is not None and self.over is not None
        if self.over <= elapsed:
            return held
        return self.model_copy(update={"end": self.end * factor, "over": self.over - elapsed, "begin": at,
                                       "start": new_value})

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> Schedule:
        if self.kind == "piecewise":
            if not self.points or self.end is not None or self.over is not None:
                raise ValueError("a piecewise schedule takes `points` ((units, value) knots), not end or over")
            units = [x for x, _ in self.points]
            if any(b <= a for a, b in zip(units, units[1:], strict=False)):
                raise ValueError(f"piecewise points must have strictly increasing units, got {units}")
        elif self.end is None or self.over is None or self.points:
            raise ValueError(f"a {self.kind} schedule takes `end` and `over` (units to reach it), not points")
        return self

    def value(self, configured: float, at: float) -> float:
        """The scheduled value `at` units into the run, from `configured` (the field's configured value) unless the
        schedule has a `start` of its own, counted from `begin`."""
        start = configured if self.start is None else self.start
        at = max(0.0, at - self.begin)
        if self.kind == "piecewise":
            x0, y0 = 0.0, start
            for x1, y1 in self.points:
                if at <= x1:
                    return y0 + (y1 - y0) * max(0.0, at - x0) / (x1 - x0)
                x0, y0 = x1, y1
            return y0
        assert self.end is not None and self.over is not None
        done = min(1.0, max(0.0, at / self.over))
        if self.kind == "linear":
            return start + (self.end - start) * done
        return self.end + (start - self.end) * 0.5 * (1.0 + math.cos(math.pi * done))


def live_changes(algo: Any, settings: dict[str, Any], env_steps: int, updates: int) -> dict[str, Any]:
    """`settings` (a live change of the run config's dotted paths) with the schedules it touches made to continue
    from where the run stands (module doc): a new `algo.schedules.<field>` takes over from the value its field has
    reached, and a new `algo.<field>` for a scheduled field scales the rest of its schedule. `algo` is the run's
    algorithm parameters before the change; `updates` the learner's last reported update count."""
    changed = dict(settings)
    for key, value in settings.items():
        path = key.split(".")
        if path[:2] == ["algo", "schedules"] and len(path) == 3 and isinstance(value, dict):
            field = path[2]
            if field not in SCHEDULABLE or getattr(algo, field, None) is None:
                continue  # refused by the config's own validation, naming what can be scheduled
            new = Schedule.model_validate(value)
            now = env_steps if new.unit == "env_steps" else updates
            changed[key] = new.taking_over(_current(algo, field, env_steps, updates), now).model_dump(mode="json")
        elif path[0] == "algo" and len(path) == 2 and path[1] in algo.schedules and isinstance(value, (int, float)):
            old: Schedule = algo.schedules[path[1]]
            if f"algo.schedules.{path[1]}" in settings:
                continue  # the new schedule given with it takes over
            now = env_steps if old.unit == "env_steps" else updates
            changed[f"algo.schedules.{path[1]}"] = old.scaled_rest(getattr(algo, path[1]), now,
                                                                  float(value)).model_dump(mode="json")
    return changed


def _current(algo: Any, field: str, env_steps: int, updates: int) -> float:
    """The value `field` has where the run stands: its schedule's, or its configured one."""
    configured = float(getattr(algo, field))
    schedule: Schedule | None = algo.schedules.get(field)
    if schedule is None:
        return configured
    return schedule.value(configured, env_steps if schedule.unit == "env_steps" else updates)
