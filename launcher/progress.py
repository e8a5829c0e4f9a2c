"""One-line progress of a run: redrawn in place on a terminal, a plain log line every few seconds otherwise."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

from rlfleet.shared.solve_rule import shown

if TYPE_CHECKING:
    from rlfleet.shared.wire import Status


def describe(st: Status) -> str:
    ev = st.latest_evaluation
    best = st.best_evaluation
    kinds = {k: sum(w.kind == k for w in st.workers) for k in ("collector", "learner", "evaluator")}
    parts = [
        f"{st.wall_seconds:6.1f}s",
        f"steps {st.env_steps:,} ({st.env_steps_per_second:,.0f}/s)",
        f"policy v{st.policy_version}",
        f"iter {st.learner.iteration:,}",
        f"train return {shown(st.recent_return_mean)}" if st.recent_return_mean is not None else "train return -",
        f"eval {shown(ev.mean)} (best {shown(best.mean)})" if ev and best else "eval -",
        _tests(st),
        f"workers {kinds['collector']}c/{kinds['learner']}l/{kinds['evaluator']}e",
    ]
    restarts = sum(w.restarts for w in st.workers) + st.coordinator_resumes
    if restarts:
        parts.append(f"restarts {restarts}")
    parts += _tracker_problems(st)
    return " | ".join(parts)


def _tracker_problems(st: Status) -> list[str]:
    """A tracker that failed (switched off; the run goes on) or dropped scalars: said on every line, since
    its curves are incomplete from then on; nothing while they all keep up."""
    problems = []
    for tracker in st.trackers:
        if tracker.state == "failed":
            problems.append(f"tracker {tracker.name} failed: {tracker.error}")
        elif tracker.dropped:
            problems.append(f"tracker {tracker.name} dropped {tracker.dropped:,} scalars")
    return problems


def _tests(st: Status) -> str:
    """The held-out tests: which one is running, the last result (mean, 95% t interval and, under the threshold
    rule, the re-test lower bound that decided it), and how many passes they rejected."""
    last = st.latest_test
    parts = [f"testing v{st.test_in_flight}"] if st.test_in_flight is not None else []
    if last is not None:
        low, high = last.ci95
        bound = "" if last.bound is None else f", re-test bound {shown(last.bound)}"
        verdict = "(no threshold)" if st.no_threshold else "confirmed" if last.confirmed else "rejected"
        parts.append(f"test v{last.policy_version} {shown(last.mean)} [{shown(low)}, {shown(high)}]{bound} {verdict}")
    if st.tests_rejected:
        parts.append(f"{st.tests_rejected} rejected")
    return "tests: " + (", ".join(parts) if parts else "-")


class Progress:
    def __init__(self, out: TextIO = sys.stdout, interval: float = 5.0) -> None:
        self.out = out
        self.tty = out.isatty()
        self.interval = interval
        self._last = 0.0

    def show(self, st: Status) -> None:
        line = describe(st)
        if self.tty:
            self.out.write("\r\033[K" + line)
            self.out.flush()
        elif time.monotonic() - self._last >= self.interval:
            self._last = time.monotonic()
            print(line, file=self.out, flush=True)

    def note(self, message: str) -> None:
        """An event worth its own line (a service restart), without breaking the progress line."""
        if self.tty:
            self.out.write("\r\033[K")
        print(message, file=self.out, flush=True)

    def done(self, message: str) -> None:
        if self.tty:
            self.out.write("\n")
        print(message, file=self.out, flush=True)
