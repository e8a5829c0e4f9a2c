"""coordinator.operations.publishing (with evaluations): the book keeps the newest policy files, and the best
validated version's file outlives it until a better validation replaces it."""

from __future__ import annotations

from collections.abc import Callable

from rlfleet.coordinator.run import Run
from rlfleet.shared.storage.local import LocalStore
from tests.support.run import evaluate, learner, publish, register, settle_files


def test_the_best_validated_versions_file_outlives_the_book_until_a_better_one_replaces_it(
        make_run: Callable[..., Run], store: LocalStore) -> None:
    run = make_run(keep_policies=3)
    lrn, ev = learner(run), register(run, "evaluator")
    refs = [publish(run, store, lrn, 1)]
    evaluate(run, ev, 1, [50.0] * 4)  # the best so far
    refs += [publish(run, store, lrn, v) for v in range(2, 7)]
    evaluate(run, ev, 6, [10.0] * 4)  # worse: v1 stays the best
    settle_files(run)
    assert [p.version for p in run.ctx.policies.versions] == [4, 5, 6]
    assert store.get(refs[0].path, sha256=refs[0].sha256)  # the best, though the book dropped it
    assert [store.size(r.path) for r in refs[1:3]] == [None, None]  # v2, v3: dropped and deleted
    evaluate(run, ev, 5, [60.0] * 4)  # a better one: v1's file goes
    settle_files(run)
    assert store.size(refs[0].path) is None and store.get(refs[4].path, sha256=refs[4].sha256)
    refs += [publish(run, store, lrn, v) for v in range(7, 10)]  # v5, the best, leaves the book
    settle_files(run)
    assert store.get(refs[4].path, sha256=refs[4].sha256) and store.size(refs[5].path) is None
