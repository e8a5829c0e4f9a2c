"""Held-out tests of a trained policy after the run (`rlfleet test`): how well it plays episodes it has never
seen, and how sure that number is.

The validation score that picked a run's best policy is biased upward: the best of many noisy evaluations is
more often lucky than best. A test plays fresh greedy episodes from the run's test seed block
(`rlfleet.shared.envs.seeds`: the run seed, mode test, task RETEST_TASK, counter `--seed-counter`), which no training or
validation env of the run ever used: copies of the env start from base + i (env i), gymnasium's own vectorized
implementation where one is registered (CartPole's: evaluator/episodes.py) from one generator seeded base; the
`--video` episode starts from base + num_envs, still inside the block. `env_seeds` in the report is the range
the copies would take.

The 95% confidence interval of the mean is the Student's t interval that the run's own held-out tests use
(shared/stats.py: mean ± t_{0.975, n-1} · s / √n, s the sample standard deviation). "Solved" is the
coordinator's rule too (shared/solve_rule.py): the 95% lower prediction bound of an independent re-test's mean
(of as many episodes) reaches env.solve_threshold (its default resolved as the run resolves it:
shared/config/threshold.py); the report also says whether this test's own mean reaches it, which is what a
re-test of a confirmed solve is measured by (bench/hold_rate.py). A run with no threshold gets no verdict:
`solved` and `reaches_threshold` are null and the report says "no threshold".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rlfleet.evaluator.battles import against
from rlfleet.evaluator.episodes import evaluate
from rlfleet.evaluator.video import Recording, check_video_path, record_episode
from rlfleet.shared.config.battle import BASELINES, is_two_player
from rlfleet.shared.config.envcheck import spaces_of
from rlfleet.shared.config.problems import config_problems
from rlfleet.shared.config.run_config import RunConfig, load_run_config
from rlfleet.shared.config.threshold import resolve_threshold
from rlfleet.shared.envs.seeds import RETEST_TASK, base_seed, decode
from rlfleet.shared.payloads.spaces import Spaces
from rlfleet.shared.policy.actors import Actor, PolicyError, build_actor
from rlfleet.shared.policy.files import MAX_POLICY_BYTES, decode_policy
from rlfleet.shared.policy.manifest import ManifestError
from rlfleet.shared.solve_rule import RULE, RULE_TEXT, judge
from rlfleet.shared.stats import estimate
from rlfleet.shared.storage.factory import StoreTarget, open_store
from rlfleet.shared.storage.layout import BEST_POLICY, RunLayout, policy_path
from rlfleet.shared.storage.local import LocalStore
from rlfleet.shared.storage.protocol import IntegrityError, PayloadStore, StorePathError
from rlfleet.shared.wire import BattleRecord

CI_METHOD = "Student's t: mean ± t(0.975, n-1)·std/√n, std the sample standard deviation (ddof=1)"


class UsageError(ValueError):
    """Input that cannot be tested (a missing file, a policy made for another env, ...), said in one line."""


@dataclass(frozen=True)
class Subject:
    """What a test plays: a policy, and the run config whose env, seed and threshold it is tested against."""

    policy_path: PolicySource
    config_path: Path
    config: RunConfig
    actor: Actor


@dataclass(frozen=True)
class StoredPolicy:
    """A policy in an object store (RLFLEET_STORE_URL): read like a file, named by where it is."""

    store: PayloadStore
    path: str

    def read_bytes(self) -> bytes:
        return self.store.get(self.path, max_bytes=MAX_POLICY_BYTES)

    def __str__(self) -> str:
        return f"{self.store.describe()}/{self.path}"


PolicySource = Path | StoredPolicy


def resolve_inputs(run_dir: Path | None, policy: Path | None, config: Path | None, version: int | None,
                   store: StoreTarget | None = None) -> tuple[PolicySource, Path, Path | None]:
    """(policy, run config, default JSON path): RUN_DIR's best policy (or its store's `version`) and its
    config.yaml, each replaced by --policy / --config when given; without RUN_DIR both are needed. The run's
    policies are read from its stores (`store`: the object store of RLFLEET_STORE_URL, None for RUN_DIR's)."""
    if run_dir is None:
        if policy is None or config is None:
            raise UsageError("give RUN_DIR, or both --policy FILE and --config CONFIG")
        if version is not None:
            raise UsageError("--version picks a policy from RUN_DIR's store: give RUN_DIR too")
        return policy, config, None
    if policy is not None and version is not None:
        raise UsageError("give --policy or --version, not both")
    layout = _layout(run_dir, store)
    if policy is not None:
        return policy, config or layout.config_file, layout.test_json
    if version is not None:
        found = _stored(open_store(layout, "store"), policy_path(version))
        if found is None:
            raise UsageError(f"policy v{version} is not in {open_store(layout, 'store').describe()}: it was never "
                             f"published, or deleted as newer ones came (the coordinator keeps RLFLEET_KEEP_POLICIES)")
    else:
        found = _stored(open_store(layout, "best"), BEST_POLICY)
        if found is None:
            raise UsageError(f"{run_dir} has no best policy yet: the evaluator writes it to "
                             f"{open_store(layout, 'best').describe()} after its first evaluation")
    return found, config or layout.config_file, layout.test_json


def _stored(store: PayloadStore, path: str) -> PolicySource | None:
    """The policy at `path` of `store` (a file path for the local store), None if it is not there."""
    try:
        if store.size(path) is None:
            return None
    except StorePathError as exc:
        raise UsageError(str(exc)) from exc
    return store.resolve(path) if isinstance(store, LocalStore) else StoredPolicy(store, path)


def _layout(run_dir: Path, store: StoreTarget | None) -> RunLayout:
    """A run directory is <data dir>/runs/<name> (shared.storage.layout), wherever the data dir is."""
    run_dir = run_dir.absolute()
    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    layout = RunLayout(run_dir.parent.parent, run_dir.name, store)
    if layout.run_dir != run_dir:
        raise UsageError(f"{run_dir} is not a run directory: runs live in <data dir>/runs/<name>")
    return layout


def load_subject(policy: PolicySource, config: Path) -> Subject:
    """Read the run config and the policy, and check that the policy was made for that config's env."""
    run_config = _load_config(config)
    try:
        manifest, state = decode_policy(policy.read_bytes())
    except FileNotFoundError as exc:
        raise UsageError(f"no policy file {policy}") from exc
    except (OSError, ManifestError, IntegrityError) as exc:
        raise UsageError(f"cannot read policy {policy}: {exc}") from exc
    try:
        spaces = spaces_of(run_config.env)
        run_config = resolve_threshold(run_config)
    except ValueError as exc:
        raise UsageError(f"{config}: {exc}") from exc
    if manifest.spaces != spaces:
        raise UsageError(f"{policy} was made for {_spaces_text(manifest.spaces)}, but the env of {config} "
                         f"({run_config.env.id}) has {_spaces_text(spaces)}")
    try:
        actor = build_actor(manifest, state)
    except PolicyError as exc:
        raise UsageError(f"{policy}: {exc}") from exc
    return Subject(policy, config, run_config, actor)


def _load_config(path: Path) -> RunConfig:
    try:
        return load_run_config(path)
    except FileNotFoundError as exc:
        raise UsageError(f"no run config {path}") from exc
    except ValidationError as exc:
        problems = "; ".join(config_problems(exc, RunConfig))
        raise UsageError(f"invalid run config {path}: {problems}") from exc
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read run config {path}: {' '.join(str(exc).split())}") from exc


def _spaces_text(spaces: Spaces) -> str:
    obs, action = spaces.obs, spaces.action
    acts = action.model_dump(exclude={"kind"})
    return f"{obs.dtype} observations of shape {obs.shape} and {action.kind} actions {acts}"


def held_out_base(subject: Subject, counter: int) -> int:
    """The base seed of this test's block; a run seed or counter outside the seed scheme is a usage error."""
    try:
        return base_seed(subject.config.seed, "test", RETEST_TASK, counter)
    except ValueError as exc:
        raise UsageError(f"no test seed block for run seed {subject.config.seed}: {exc}") from exc


def run_test(subject: Subject, episodes: int, num_envs: int, counter: int, video: Path | None) -> dict[str, Any]:
    """Play the test (and the video's episode), and return the report that is printed and written as JSON."""
    if episodes % num_envs:
        raise UsageError(f"--episodes ({episodes}) must be a multiple of --num-envs ({num_envs}) so every env "
                         f"plays the same number of episodes")
    if video is not None:
        check_video_path(video)
    base = held_out_base(subject, counter)
    returns, lengths = evaluate(subject.actor.greedy, subject.config.env, num_envs, episodes, base,
                                reset=subject.actor.reset)
    subject.actor.reset()  # the video's episode, like every other, begins with a fresh memory
    stats = estimate(returns)
    mode, task, block = decode(subject.config.seed, base)
    threshold = subject.config.env.threshold
    recording = None if video is None else record_episode(subject.actor.greedy, subject.config.env,
                                                          base + num_envs, video)
    battles = [] if not is_two_player(subject.config.env.id) else [  # the same games, one baseline at a time
        against(subject.actor, subject.config.env, opponent, episodes, num_envs, base) for opponent in BASELINES]
    rule = subject.config.evaluation.against  # a battle rule decides "solved" instead of the threshold
    verdict = None if rule else judge(returns, threshold)
    met = {b.opponent: rule[b.opponent].met(b.wins, b.draws, b.games) for b in battles if b.opponent in rule}
    return {
        "policy": str(subject.policy_path), "config": str(subject.config_path), "env": subject.config.env.id,
        "episodes": len(returns), "num_envs": num_envs,
        "mean": stats.mean, "std": stats.std if stats.episodes > 1 else None, "ci95": stats.ci95,
        "ci_method": CI_METHOD, "solve_threshold": threshold,
        "solve_rule": RULE if verdict else "against", "retest_lower_bound": verdict.bound if verdict else None,
        "solved": all(met.values()) if verdict is None else None if threshold is None else verdict.confirmed,
        "reaches_threshold": None if rule or threshold is None else stats.mean >= threshold,
        "rule": {name: {"bar": str(bar), "met": met[name]} for name, bar in rule.items()},
        "seeds": {"run_seed": subject.config.seed, "mode": mode, "task": task, "counter": block, "base": base,
                  "env_seeds": [base, base + num_envs - 1]},
        "returns": returns, "lengths": lengths,
        "video": None if recording is None else _video_entry(recording),
        "battles": [{"opponent": b.opponent, "games": b.games, "wins": b.wins, "draws": b.draws, "losses": b.losses}
                    for b in battles],
    }


def _threshold_rule(report: dict[str, Any]) -> str:
    """Why the threshold rule said yes or no, and where the mean itself stands."""
    threshold, bound = report["solve_threshold"], report["retest_lower_bound"]
    reaches = f"the mean {report['mean']:.2f} {'reaches' if report['reaches_threshold'] else 'is below'} it"
    if bound is None:
        return f"one episode bounds no re-test ({RULE_TEXT}); {reaches}"
    return (f"re-test lower bound {bound:.2f} {'>=' if report['solved'] else '<'} env.solve_threshold {threshold:g} "
            f"({RULE_TEXT}); {reaches}")


def _video_entry(recording: Recording) -> dict[str, Any]:
    return {"path": str(recording.path), "seed": recording.seed, "return": recording.episode_return,
            "length": recording.length, "frames": recording.frames}


def describe(report: dict[str, Any]) -> str:
    """The report for a terminal, one line per question."""
    seeds, ci = report["seeds"], report["ci95"]
    spread = "one episode: no spread" if ci is None else (
        f"std {report['std']:.2f}, 95% CI [{ci[0]:.2f}, {ci[1]:.2f}] (Student's t, {report['episodes'] - 1} df)")
    rule = report.get("rule") or {}
    if rule:
        solved = f"{'yes' if report['solved'] else 'no'}: " + ", ".join(
            f"vs {name} {r['bar']}: {'met' if r['met'] else 'not met'}" for name, r in rule.items())
    elif report["solved"] is None:
        solved = "no threshold (env.solve_threshold is null): a score, no verdict"
    else:
        solved = f"{'yes' if report['solved'] else 'no'}: {_threshold_rule(report)}"
    lines = [
        f"policy   {report['policy']}",
        f"env      {report['env']}: {report['episodes']} greedy episodes on {report['num_envs']} envs",
        f"seeds    {seeds['env_seeds'][0]}..{seeds['env_seeds'][1]}: run seed {seeds['run_seed']}, {seeds['mode']} "
        f"block of task {seeds['task']}, counter {seeds['counter']}",
        f"return   mean {report['mean']:.2f}, {spread}",
        f"solved   {solved}",
    ]
    lines += [f"battle   {BattleRecord.model_validate({k: b[k] for k in ('opponent', 'wins', 'draws', 'losses')})}"
              for b in report["battles"]]
    if report["video"] is not None:
        v = report["video"]
        lines.append(f"video    {v['path']}: one more episode from seed {v['seed']}, return {v['return']:.2f} in "
                     f"{v['length']} steps, {v['frames']} frames")
    return "\n".join(lines)
