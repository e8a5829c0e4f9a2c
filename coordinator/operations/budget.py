"""The end of the budget: every operation that counts env steps, and the clock, check it here; a dataset run
whose epochs were all trained ends through it too (coordinator/operations/datasets.py).

A run with a solve rule (a threshold, or a battle rule) that uses up its budget ends at once, budget_exhausted:
it did not reach its threshold. A run with no threshold was only ever going to train to its budget, so its end is
its success: training stops (collectors and learners are told the budget is exhausted and exit), the judge asks
the evaluator for the held-out test of the best validated version (coordinator/state/judge.py), and the run ends
once that test reports, its message naming the best policy with its test and the last policy. What the run
keeps: the best in the `best` store (the evaluator writes it at each better validation) and in the policy store
(its file outlives the book: publishing.py), the last in the policy store (the book never drops its newest).

A run with a solve rule whose budget runs out while the held-out test of a candidate is under way (nominated by a
validation, or asked by an operator, before the end) stops training the same way and waits for that test: a policy
trained within the budget that the rule confirms solves the run. Seen in a sweep: a test reported 5,536 env steps
after a 60,000-step budget had ended its run unsolved, and it confirmed. If the test rejects the candidate, or the
evaluator running it is gone (its lease expired), the run ends budget_exhausted, saying so.
"""

from __future__ import annotations

from rlfleet.coordinator.operations.context import RunContext
from rlfleet.shared.solve_rule import shown
from rlfleet.shared.wire import HoldoutResult


def check_budget(ctx: RunContext) -> None:
    """End the run, or stop its training, when a budget is used up; end a run that waits for a candidate's test
    whose evaluator is gone. The caller commits."""
    reason = ctx.lifecycle.budget_used(ctx.data.env_steps, ctx.clock())
    if reason is not None:
        training_over(ctx, reason)
        return
    final, under_test = ctx.lifecycle.final, ctx.judge.under_test
    if final is None or not ctx.lifecycle.running or ctx.judge.no_threshold:
        return
    if under_test is not None and under_test[2] and not ctx.fleet.alive(under_test[2]):  # its lease expired
        ctx.lifecycle.end("budget_exhausted", f"{final}; the evaluator of the held-out test under way when training "
                                              f"stopped is gone, so the test never reported", ctx.clock())


def training_over(ctx: RunContext, reason: str) -> None:
    """Training is over for `reason` (a budget used up, a dataset's last epoch trained): a run with a solve rule
    ends now, unsolved, unless a candidate's test is under way; a run with no threshold first tests its best
    policy. The caller commits."""
    under_test = ctx.judge.under_test
    if ctx.judge.no_threshold and ctx.judge.request_final():
        ctx.lifecycle.finish(reason, "testing the best policy before the run ends")
    elif not ctx.judge.no_threshold and under_test is not None:
        ctx.lifecycle.finish(reason, f"waiting for the held-out test of policy v{under_test[0]} under way: if the "
                                     f"rule confirms it, the run is solved")
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
    if not ctx.judge.no_threshold:  # the candidate's test under way at the end did not confirm it (else: solved)
        low, high = result.ci95
        bound = "" if result.bound is None else f", re-test lower bound {shown(result.bound)}"
        ctx.end("budget_exhausted", (
            f"{ctx.lifecycle.final}; the held-out test of policy v{result.policy_version} under way when training "
            f"stopped did not confirm it ({shown(result.mean)} ± {shown(result.std)} over {result.episodes} episodes, "
            f"95% CI {shown(low)} .. {shown(high)}{bound})"))
        return
    best = ctx.judge.best
    if best is None or result.policy_version != best.policy_version:
        ctx.judge.request_final()
        return
    low, high = result.ci95
    ctx.end("budget_exhausted", (
        f"{ctx.lifecycle.final}; no threshold: best policy v{result.policy_version} (validation "
        f"{shown(result.validation_mean)}; held-out test {shown(result.mean)} ± {shown(result.std)} over "
        f"{result.episodes} episodes, 95% CI {shown(low)} .. {shown(high)}) kept in best/; {_last(ctx)}"))


def _untested(ctx: RunContext, reason: str) -> str:
    return f"{reason}; no threshold: no policy was validated, so none was tested; {_last(ctx)}"


def _last(ctx: RunContext) -> str:
    latest = ctx.policies.latest
    return "no policy was published" if latest is None else f"last policy v{latest.version} in {latest.path}"
