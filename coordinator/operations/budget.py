"""The end of the budget: every operation that counts env steps, and the clock, check it here; a dataset run
whose epochs were all trained ends through it too (coordinator/operations/datasets.py).

A run with a solve rule (a threshold, or a battle rule) that uses up its budget ends at once, budget_exhausted:
it did not reach its threshold. A run with no threshold was only ever going to train to its budget, so its end is
its success: training stops (collectors and learners are told the budget is exhausted and exit), the judge asks
the evaluator for the held-out test of the best validated version (coordinator/state/judge.py), and the run ends
once that test reports, its message naming the best policy with its test and the last policy. What the run
keeps: the best in the `best` store (the evaluator writes it at each better validation) and in the policy store
(its file outlives the book: publishing.py), the last in the policy store (the book never drops its newest).
"""

from __future__ import annotations

from rlfleet.coordinator.operations.context import RunContext
from rlfleet.shared.wire import HoldoutResult


def check_budget(ctx: RunContext) -> None:
    """End the run, or stop its training, when a budget is used up; the caller commits."""
    reason = ctx.lifecycle.budget_used(ctx.data.env_steps, ctx.clock())
    if reason is not None:
        training_over(ctx, reason)


def training_over(ctx: RunContext, reason: str) -> None:
    """Training is over for `reason` (a budget used up, a dataset's last epoch trained): a run with a solve rule
    ends now, unsolved; a run with no threshold first tests its best policy. The caller commits."""
    if ctx.judge.no_threshold and ctx.judge.request_final():
        ctx.lifecycle.finish(reason)
    else:
        ctx.lifecycle.end("budget_exhausted", _untested(ctx, reason) if ctx.judge.no_threshold else reason,
                          ctx.clock())
    # waiters hear of it once the caller's commit is durable (RunContext.commit announces it)


def tested(ctx: RunContext, result: HoldoutResult) -> None:
    """A held-out test reported while the run waits for its end-of-budget test: end the run if it tested the best
    validated version. Otherwise ask for the test of the best now: the test was an operator's, asked before the
    budget ran out, or a validation that was under way when training stopped found a better version meanwhile.
    The caller commits."""
    if ctx.lifecycle.final is None or not ctx.lifecycle.running:
        return
    best = ctx.judge.best
    if best is None or result.policy_version != best.policy_version:
        ctx.judge.request_final()
        return
    low, high = result.ci95
    ctx.end("budget_exhausted", (
        f"{ctx.lifecycle.final}; no threshold: best policy v{result.policy_version} (validation "
        f"{result.validation_mean:.1f}; held-out test {result.mean:.1f} ± {result.std:.1f} over {result.episodes} "
        f"episodes, 95% CI {low:.1f} .. {high:.1f}) kept in best/; {_last(ctx)}"))


def _untested(ctx: RunContext, reason: str) -> str:
    return f"{reason}; no threshold: no policy was validated, so none was tested; {_last(ctx)}"


def _last(ctx: RunContext) -> str:
    latest = ctx.policies.latest
    return "no policy was published" if latest is None else f"last policy v{latest.version} in {latest.path}"
