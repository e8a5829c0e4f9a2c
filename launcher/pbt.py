"""`rlfleet pbt SPEC.yaml`: population-based training (Jaderberg et al., 2017) over real rlfleet runs.

K members, each a `rlfleet up` run with its own data directory, port and seed (launcher/pbt_member.py), train at
once from settings drawn from the spec's space. Each time a member has trained another `interval_env_steps`, it is
ranked against the others by its current score (recent training return, or latest validation); a member in the
bottom quantile exploits one drawn from the top quantile: the source checkpoints now, and the member loads that
checkpoint through the control plane (`POST /v1/run/load-checkpoint`: refused, and counted, if it does not fit),
then explores: each of the source's settings multiplied by 0.8 or 1.2, or drawn afresh from its range, clipped to
the range, and applied through live settings (`PATCH /v1/run/settings`). Everything is recorded in lineage.jsonl
as it happens and plotted to lineage.png (launcher/pbt_lineage.py).

When every member has ended, the population's best is the member with the best validation (its best validated
policy; the latest policy of a member never validated), and it is tested on held-out episodes (the `rlfleet test`
machinery, on the first test block its run did not use): selection on validation, score on the held-out test.
pbt_report.md gives the members, the copies and that test. `--fixed` runs the same members with no exploit or
explore: the baseline PBT is measured against. Killing the driver (SIGTERM, Ctrl-C) stops every member's run
(launcher/pbt_member.py: an orderly stop, then its process group).
"""

from __future__ import annotations

import json
import logging
import random
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from rlfleet.launcher.control import ControlError
from rlfleet.launcher.errors import UserError
from rlfleet.launcher.pbt_lineage import Lineage, plot_lineage
from rlfleet.launcher.pbt_member import Member
from rlfleet.launcher.pbt_spec import Population
from rlfleet.launcher.spec_files import override
from rlfleet.shared.storage.local import atomic_write

log = logging.getLogger("rlfleet.pbt")
POLL_SECONDS = 2.0
CHECKPOINT_WAIT_SECONDS = 60.0
EXIT_OK, EXIT_INTERRUPTED = 0, 130


class Stopped(Exception):
    """SIGTERM or SIGINT: stop every member and end."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


class Driver:
    def __init__(self, population: Population, fixed: bool) -> None:
        self.pop, self.spec, self.fixed = population, population.spec, fixed
        self.out = population.output_dir
        self.lineage = Lineage(self.out / "lineage.jsonl")
        self.rng = random.Random(self.spec.seed + 1)  # the exploit and explore draws (the initial settings: seed)
        self.members = [Member(i, self.out / "members" / f"member-{i}", self.spec.seed + i, settings)
                        for i, settings in enumerate(population.initial_settings())]

    def run(self) -> int:
        previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.start()
            self.train()
        except Stopped as exc:
            typer.echo(f"rlfleet pbt: {exc}: stopping the population's runs", err=True)
            return EXIT_INTERRUPTED
        finally:
            for sig in previous:  # a second signal must not cut the stops short
                signal.signal(sig, signal.SIG_IGN)
            for member in self.members:  # an interrupted population leaves no run behind
                member.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.finish()
        return EXIT_OK

    def start(self) -> None:
        for member in self.members:
            run = member.start(self.pop.base_path, [*self.pop.fixed(), *self.overrides(member.settings)],
                               self.spec.collectors, self.out / "members")
            member.ready_at = self.spec.interval_env_steps
            self.lineage.write("start", member.name, 0, settings=member.settings, seed=member.seed, port=run.port)
            typer.echo(f"{member.name}: seed {member.seed}, {self.describe(member.settings)} (log {run.log_path})")

    def overrides(self, settings: dict[str, float]) -> list[str]:
        return [override(key, self.value(key, value)) for key, value in settings.items()]

    def value(self, key: str, value: float) -> float | int:
        return int(value) if self.spec.space[key].integer else value

    def describe(self, settings: dict[str, float]) -> str:
        return ", ".join(f"{key}={value:.4g}" for key, value in settings.items())

    def train(self) -> None:
        while not all(member.exited for member in self.members):
            for member in self.members:
                member.read_status()
            for member in self.members:
                steps = int(member.status.get("env_steps", 0))
                if member.running and steps >= member.ready_at:
                    member.ready_at = steps + self.spec.interval_env_steps
                    score = member.score(self.spec.score)
                    self.lineage.write("score", member.name, steps, score=score, settings=member.settings)
                    if not self.fixed and score is not None:
                        self.exploit_and_explore(member, steps, score)
            time.sleep(POLL_SECONDS)

    def exploit_and_explore(self, member: Member, steps: int, score: float) -> None:
        """If `member` ranks in the bottom quantile, it copies a top-quantile member and perturbs its settings."""
        scored = sorted((m for m in self.members if m.score(self.spec.score) is not None and m.run_dir is not None),
                        key=lambda m: m.score(self.spec.score) or 0.0)
        count = max(1, int(len(self.members) * self.spec.quantile))
        if len(scored) < 2 or member not in scored[:count]:
            return
        top = [m for m in scored[-count:] if m is not member]
        if not top:
            return
        source = self.rng.choice(top)
        checkpoint = source.fresh_checkpoint(CHECKPOINT_WAIT_SECONDS)
        if checkpoint is None:
            return
        if member.latest_checkpoint() < 0:  # the coordinator compares the source with the member's own checkpoint
            member.fresh_checkpoint(CHECKPOINT_WAIT_SECONDS)
        settings = self.explore(source.settings)
        try:
            member.load_checkpoint(source, checkpoint)
            member.control("PATCH", "settings", {"settings": {k: self.value(k, v) for k, v in settings.items()}})
        except ControlError as exc:
            self.lineage.write("refused", member.name, steps, source=source.name, checkpoint=checkpoint,
                               reason=str(exc))
            typer.echo(f"{member.name}: copying {source.name} refused: {exc}", err=True)
            return
        source_score = source.score(self.spec.score)
        self.lineage.write("exploit", member.name, steps, score=score, source=source.name,
                           source_env_steps=int(source.status.get("env_steps", 0)), source_score=source_score,
                           checkpoint=checkpoint, old_settings=member.settings, new_settings=settings)
        typer.echo(f"{member.name} at {steps} env steps (score {score:.1f}) copies {source.name} "
                   f"(score {source_score:.1f}, {checkpoint}): {self.describe(settings)}")
        member.settings = settings

    def explore(self, settings: dict[str, float]) -> dict[str, float]:
        explore = self.spec.explore
        out = {}
        for key, value in settings.items():
            bounds = self.spec.space[key]
            if self.rng.random() < explore.resample_probability:
                out[key] = bounds.draw(self.rng)
            else:
                out[key] = bounds.fit(value * self.rng.choice(explore.factors))
        return out

    def finish(self) -> None:
        """The lineage plot, the held-out test of the population's best, and the report."""
        rows = self.lineage.rows()
        plot = plot_lineage(rows, list(self.spec.space), self.out / "lineage.png")
        best = self.best()
        test = self.held_out_test(best) if best is not None else None
        if test is not None:
            atomic_write(self.out / "best_test.json", json.dumps(test, indent=2).encode())
        report = self.out / "pbt_report.md"
        atomic_write(report, self.report(rows, best, test).encode())
        typer.echo(f"lineage  {self.lineage.path}\nplot     {plot}\nreport   {report}")
        if test is not None and best is not None:
            typer.echo(f"best     {best.name}: held-out test {test['mean']:.2f} over {test['episodes']} episodes")

    def best(self) -> Member | None:
        """The member with the best validation; without any validation, the best final score."""
        def validation(m: Member) -> float | None:
            best = m.status.get("best_evaluation")
            return None if best is None else float(best["mean"])

        validated = [m for m in self.members if validation(m) is not None and m.run_dir is not None]
        if validated:
            return max(validated, key=lambda m: validation(m) or 0.0)
        scored = [m for m in self.members if m.score(self.spec.score) is not None and m.run_dir is not None]
        return max(scored, key=lambda m: m.score(self.spec.score) or 0.0) if scored else None

    def held_out_test(self, member: Member) -> dict[str, Any] | None:
        from rlfleet.evaluator.testing import UsageError, load_subject, resolve_inputs, run_test

        assert member.run_dir is not None
        seeds = member.status.get("seeds") or {}
        counter = len(seeds.get("test", []))  # the first test block the run did not use
        try:
            policy, config, _ = resolve_inputs(member.run_dir, None, None, None)
        except UsageError:  # never validated: no best policy; its latest version
            version = int(member.status.get("policy_version", 0))
            if version < 1:
                return None
            policy, config, _ = resolve_inputs(member.run_dir, None, None, version)
        report = run_test(load_subject(policy, config), self.spec.test.episodes, self.spec.test.num_envs, counter,
                          None)
        report["member"] = member.name
        return report

    def report(self, rows: list[dict[str, Any]], best: Member | None, test: dict[str, Any] | None) -> str:
        spec = self.spec
        copies = [r for r in rows if r["event"] == "exploit"]
        refused = [r for r in rows if r["event"] == "refused"]
        lines = [f"# Population-based training: {spec.name}", "",
                 f"- mode: {'fixed settings (no exploit/explore)' if self.fixed else 'PBT'}",
                 f"- base config: `{self.pop.base_path}`; overrides: {', '.join(self.pop.fixed()) or 'none'}",
                 f"- members: {spec.population}, ranked every {spec.interval_env_steps} env steps by {spec.score}; "
                 f"bottom {spec.quantile:.0%} copies top {spec.quantile:.0%}",
                 f"- copies: {len(copies)}; refused: {len(refused)}",
                 f"- total env steps: {sum(int(m.status.get('env_steps', 0)) for m in self.members)}",
                 "", "## Members", "",
                 "| member | seed | state | env steps | final score | best validation | copied | settings now |",
                 "|---|---|---|---|---|---|---|---|"]
        for m in self.members:
            best_eval = m.status.get("best_evaluation")
            validated = "-" if best_eval is None else f"{best_eval['mean']:.2f}"
            score = m.score(spec.score)
            lines.append(f"| {m.name} | {m.seed} | {m.status.get('run_state', 'never started')} | "
                         f"{m.status.get('env_steps', 0)} | {'-' if score is None else f'{score:.2f}'} | "
                         f"{validated} | "
                         f"{sum(r['member'] == m.name for r in copies)} | {self.describe(m.settings)} |")
        lines += ["", "## Copies", ""]
        lines += [f"- {r['member']} at {r['env_steps']} env steps (score {r['score']:.2f}) copied {r['source']} "
                  f"({r['checkpoint']}, score {r['source_score']:.2f}): {self.describe(r['new_settings'])}"
                  for r in copies] or ["none"]
        lines += ["", "## Held-out test of the population's best", ""]
        if best is None or test is None:
            lines.append("No member published a policy: nothing to test.")
        else:
            ci = test["ci95"]
            lines += [f"- member: {best.name} (best validation), policy `{test['policy']}`",
                      f"- mean return {test['mean']:.2f} over {test['episodes']} episodes"
                      + ("" if ci is None else f", 95% CI [{ci[0]:.2f}, {ci[1]:.2f}]"),
                      f"- seeds: test block {test['seeds']['counter']} (base {test['seeds']['base']}), unused by "
                      "the run", f"- solved by the run's rule: {test['solved']}"]
        lines += ["", "![lineage](lineage.png)", ""]
        return "\n".join(lines)


def run_pbt(spec_path: Path, output_dir: Path | None, fixed: bool) -> int:
    """`rlfleet pbt`: validate the spec, then run the population to its end."""
    from rlfleet.launcher.pbt_spec import load_population
    from rlfleet.shared.extras import MissingExtra, require

    population = load_population(spec_path, output_dir)
    try:  # the plot is drawn at the end: a missing library must not wait until hours of training are done
        require("matplotlib", "plot", "rlfleet pbt's lineage plot")
    except MissingExtra as exc:
        raise UserError(str(exc)) from exc
    population.output_dir.mkdir(parents=True, exist_ok=True)
    typer.echo(f"population {population.spec.name}: {population.spec.population} members of "
               f"{population.base_path}, output in {population.output_dir}")
    return Driver(population, fixed).run()
