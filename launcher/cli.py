"""The `rlfleet` console script (typer)."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from launcher.readiness import await_coordinator
from shared.envs.seeds import MAX_COUNTER

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="rlfleet: distributed RL training with a coordinator, collectors, a learner and an evaluator.")


def _without_field_docs() -> None:
    """For commands that never render a schema, before they import the models: their attribute docstrings are
    not read (shared/__init__.py), nor in the processes they start, unless those set their own environment."""
    import shared

    shared.FIELD_DOCS = False
    os.environ["RLFLEET_FIELD_DOCS"] = "0"


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns the useful ones


@app.command()
def up(
    config: Annotated[Path, typer.Option(help="run config YAML")] = Path("configs/cartpole_dqn.yaml"),
    collectors: Annotated[int | None, typer.Option(help="collector processes (like --scale collector=N)")] = None,
    seed: Annotated[int | None, typer.Option(help="override the config's seed")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="config override key=value (repeatable)")] = None,
    data_dir: Annotated[Path, typer.Option(help="where runs/<name>/ and tokens.json are kept")] = Path("data"),
    port: Annotated[int, typer.Option(help="coordinator port on 127.0.0.1 (0 = any free port)")] = 8000,
    max_quick_crashes: Annotated[int, typer.Option(
        min=1, help="fail the run when a service crashes this many times in a row, each within --stable-seconds "
                    "of starting; crashed services are restarted otherwise, however often")] = 5,
    stable_seconds: Annotated[float, typer.Option(
        min=0, help="a service up this long has started properly: its next crash begins a new streak")] = 10.0,
    deterministic: Annotated[bool, typer.Option(
        "--deterministic", help="reproducible run: one collector in lockstep with the learner; the same seed "
                                "publishes byte-identical policy files")] = False,
    resume: Annotated[str | None, typer.Option(
        help="continue the run of this name or directory (data/runs/<name>/, with the config it started with) "
             "instead of starting a new one, a stopped run too; as RLFLEET_RUN does for compose")] = None,
) -> None:
    """Run every service of docker-compose.yml as a local process and train until solved or out of budget."""
    _without_field_docs()  # the services' environments come from compose, without it
    from launcher.up import UnknownRun, Up, UpOptions

    overrides = list(set_ or []) + ([f"seed={seed}"] if seed is not None else [])
    if deterministic:
        if collectors not in (None, 1):
            raise typer.BadParameter(f"a deterministic run has exactly one collector, not {collectors}",
                                     param_hint="--collectors")
        collectors, overrides = 1, [*overrides, "deterministic=true"]
    try:
        runner = Up(UpOptions(config=config, resume=resume, data_dir=data_dir, port=port, collectors=collectors,
                              overrides=overrides, max_quick_crashes=max_quick_crashes,
                              stable_seconds=stable_seconds))
    except UnknownRun as exc:
        raise typer.BadParameter(str(exc), param_hint="--resume") from exc
    raise typer.Exit(runner.run())


@app.command()
def coordinator() -> None:
    """Serve the coordinator (settings from RLFLEET_* variables; see coordinator/settings.py)."""
    import uvicorn

    from coordinator.main import serve_app
    from coordinator.settings import CoordinatorSettings
    from shared.storage.factory import StoreConfigError

    _logging()
    settings = CoordinatorSettings()
    try:
        app_ = serve_app(settings)
    except StoreConfigError as exc:
        typer.echo(f"rlfleet coordinator: {exc}", err=True)
        raise typer.Exit(2) from exc
    # uvloop + httptools (uvicorn's "auto" picks them), no access log and no proxy-headers layer (nothing reads
    # the client's address): per-request CPU is what limits a fleet of a thousand collectors on one core; the
    # backlog takes a whole fleet reconnecting at once.
    uvicorn.run(app_, host=settings.host, port=settings.port, log_level="warning",
                access_log=False, proxy_headers=False, backlog=4096, timeout_graceful_shutdown=10)


@app.command()
def collector() -> None:
    """Run a collector worker until the run ends."""
    await_coordinator()  # before the imports below (launcher/readiness.py)
    _without_field_docs()
    from collector_worker.main import run_collector
    from shared.worker.settings import WorkerSettings

    _logging()
    raise typer.Exit(run_collector(WorkerSettings()))


@app.command()
def learner() -> None:
    """Run the learner worker until the run ends."""
    _without_field_docs()
    from learner_worker.main import run_learner
    from shared.worker.settings import WorkerSettings

    _logging()
    raise typer.Exit(run_learner(WorkerSettings()))


@app.command()
def evaluator() -> None:
    """Run the evaluator worker until the run ends."""
    await_coordinator()  # before the imports below (launcher/readiness.py)
    _without_field_docs()
    from evaluator.main import run_evaluator
    from shared.worker.settings import WorkerSettings

    _logging()
    raise typer.Exit(run_evaluator(WorkerSettings()))


@app.command("store-init")
def store_init() -> None:
    """Create the bucket that RLFLEET_STORE_URL names if it is missing, and check the store answers (settings
    as every service reads them: RLFLEET_S3_ENDPOINT_URL, AWS credentials). Nothing to do for the run directory."""
    from shared.storage.factory import StoreConfigError, StoreSettings, object_store
    from shared.storage.protocol import StoreUnavailable

    _logging()
    try:
        target = StoreSettings().store_target()
        if target is None:
            typer.echo("RLFLEET_STORE_URL is empty: payloads go to the run directory, nothing to create")
            return
        store = object_store(target, target.prefix)
        created = store.create_bucket()
        store.check()
    except (StoreConfigError, StoreUnavailable) as exc:
        typer.echo(f"rlfleet store-init: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"bucket {target.bucket} {'created' if created else 'already there'}: store reachable")


@app.command()
def secrets(
    out: Annotated[Path, typer.Option(help="tokens file to create (kept if it exists)")],
    scope_file: Annotated[list[str] | None, typer.Option(
        help="SCOPE=PATH: also write that scope's token alone to PATH (mode 0600, rewritten each time), for a "
             "service that must see no other token; repeatable")] = None,
) -> None:
    """Create the scoped bearer tokens file (mode 0600) unless it already exists; optionally one file per scope."""
    from shared.tokens import SCOPES, generate_tokens_file, write_token_file

    targets: list[tuple[str, Path]] = []
    for item in scope_file or []:
        scope, sep, where = item.partition("=")
        if not sep or scope not in SCOPES or not where:
            raise typer.BadParameter(f"{item!r} must look like SCOPE=PATH with SCOPE one of {', '.join(SCOPES)}",
                                     param_hint="--scope-file")
        targets.append((scope, Path(where)))
    tokens = generate_tokens_file(out)
    for scope, path in targets:
        write_token_file(path, tokens[scope])
    typer.echo(f"tokens in {out}" + "".join(f"; {scope} token in {path}" for scope, path in targets))


@app.command()
def health(url: str) -> None:
    """Exit 0 if URL answers 200 within 3 s (the compose healthcheck; needs no curl in the image)."""
    import httpx

    try:
        ok = httpx.get(url, timeout=3).status_code == 200
    except httpx.HTTPError:
        ok = False
    raise typer.Exit(0 if ok else 1)


@app.command()
def status(
    url: Annotated[str, typer.Option(envvar="RLFLEET_COORDINATOR_URL")] = "http://127.0.0.1:8000",
    tokens_file: Annotated[Path, typer.Option(envvar="RLFLEET_TOKENS_FILE")] = Path("data/tokens.json"),
    as_json: Annotated[bool, typer.Option("--json", help="print the raw status document")] = False,
) -> None:
    """Print the run's status."""
    import httpx

    from launcher.progress import describe
    from shared.tokens import load_tokens_file
    from shared.wire import Status

    token = load_tokens_file(tokens_file)["read"] if tokens_file.exists() else ""
    try:
        resp = httpx.get(f"{url.rstrip('/')}/v1/status", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    except httpx.HTTPError as exc:
        typer.echo(f"cannot reach the coordinator at {url}: {exc}", err=True)
        raise typer.Exit(2) from exc
    if resp.status_code != 200:
        typer.echo(f"HTTP {resp.status_code}: {resp.text}", err=True)
        raise typer.Exit(2)
    st = Status.model_validate_json(resp.content)
    if as_json:
        typer.echo(st.model_dump_json(indent=2))
        return
    typer.echo(f"run {st.run_name}: {st.run_state} ({st.run_message})")
    typer.echo(describe(st))
    for w in st.workers:
        typer.echo(f"  {w.kind:9} {w.worker_id:24} task {w.task_id or '-':12} seen {w.last_seen_seconds_ago:.1f}s ago")


@app.command()
def test(
    run_dir: Annotated[Path | None, typer.Argument(help="a run directory, data/runs/<name>")] = None,
    policy: Annotated[Path | None, typer.Option(help="a policy file to test instead of RUN_DIR's best")] = None,
    config: Annotated[Path | None, typer.Option(help="run config to test with instead of RUN_DIR/config.yaml")] = None,
    version: Annotated[int | None, typer.Option(
        min=1, help="test policies/v<N>.safetensors of the run's store (RUN_DIR/store or RLFLEET_STORE_URL) "
             "instead of the best policy")] = None,
    episodes: Annotated[int, typer.Option(min=1, max=100_000, help="greedy episodes to play")] = 100,
    num_envs: Annotated[int, typer.Option(min=1, max=256, help="envs to split them over (evenly)")] = 10,
    seed_counter: Annotated[int, typer.Option(
        min=0, max=MAX_COUNTER - 1, help="which test block of the run's seeds: 0 first, 1 for a second test, ...")] = 0,
    video: Annotated[Path | None, typer.Option(help="also record one more greedy episode to this .mp4 or .gif")] = None,
    json_path: Annotated[Path | None, typer.Option(
        "--json", help="where to write the result [RUN_DIR/test.json; none without RUN_DIR]")] = None,
) -> None:
    """Play a held-out test of a trained policy on seeds no training or validation env used; print the mean
    return with its 95% confidence interval and whether it reaches env.solve_threshold (see evaluator/testing.py).
    Exits 0 whatever the score, 2 with one line on stderr for input that cannot be tested."""
    from evaluator.testing import UsageError, describe, load_subject, resolve_inputs, run_test
    from evaluator.video import VideoError
    from shared.storage.factory import StoreConfigError, StoreSettings
    from shared.storage.local import atomic_write
    from shared.storage.protocol import StoreUnavailable

    try:
        store = StoreSettings().store_target()  # the run's policies: its directory, or RLFLEET_STORE_URL's store
        policy_file, config_file, default_json = resolve_inputs(run_dir, policy, config, version, store)
        report = run_test(load_subject(policy_file, config_file), episodes, num_envs, seed_counter, video)
        out = json_path or default_json
        if out is not None:
            atomic_write(out, json.dumps(report, indent=2).encode())
    except (UsageError, VideoError, OSError, StoreConfigError, StoreUnavailable) as exc:
        typer.echo(f"rlfleet test: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(describe(report))
    if out is not None:
        typer.echo(f"json     {out}")


@app.command()
def record(
    run_dir: Annotated[Path | None, typer.Argument(help="a finished run's directory, data/runs/<name>: its best "
                                                          "policy and config")] = None,
    name: Annotated[str, typer.Option(help="the dataset's name (algo.dataset of the run that trains on it)")] = "",
    policy: Annotated[Path | None, typer.Option(help="a policy file to play instead of RUN_DIR's best")] = None,
    config: Annotated[Path | None, typer.Option(help="run config whose env to play in instead of "
                                                     "RUN_DIR/config.yaml")] = None,
    episodes: Annotated[int, typer.Option(min=2, max=100_000, help="episodes to record")] = 20,
    valid_fraction: Annotated[float, typer.Option(help="share of the episodes kept for the valid split")] = 0.2,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seeds the envs, the split and any sampling")] = 0,
    stochastic: Annotated[bool, typer.Option(help="sample actions from the policy instead of its greedy "
                                                  "choice")] = False,
    data_dir: Annotated[Path, typer.Option(help="the data directory whose dataset store (datasets/) keeps it")] = Path(
        "data"),
) -> None:
    """Play a trained policy for EPISODES episodes and store them as a named dataset of chunks with train and
    valid splits (see launcher/record.py); a run with `algo.dataset: NAME` (behavioural cloning) trains on it.
    Exits 2 with one line on stderr for input that cannot be recorded."""
    from evaluator.testing import UsageError, load_subject, resolve_inputs
    from launcher.record import Recording, returns_text
    from launcher.record import record as record_dataset
    from shared.payloads.recordings import DatasetError
    from shared.storage.factory import StoreConfigError, StoreSettings, open_datasets
    from shared.storage.protocol import StoreUnavailable

    try:
        if not name:
            raise UsageError("--name is required: the dataset's name, as a run's algo.dataset will give it")
        target = StoreSettings().store_target()
        policy_file, config_file, _ = resolve_inputs(run_dir, policy, config, None, target)
        subject = load_subject(policy_file, config_file)
        store = open_datasets(data_dir.resolve(), target)
        typer.echo(f"recording {episodes} {'sampled' if stochastic else 'greedy'} episodes of {policy_file} in "
                   f"{subject.config.env.id} as dataset {name!r}")
        manifest = record_dataset(subject, Recording(name, episodes, valid_fraction, seed, stochastic), store,
                                  lambda i, ret, length: typer.echo(f"  episode {i}/{episodes}: return {ret:.1f}, "
                                                                    f"{length} steps"))
    except (UsageError, DatasetError, ValueError, OSError, StoreConfigError, StoreUnavailable) as exc:
        typer.echo(f"rlfleet record: {' '.join(str(exc).split())}", err=True)
        raise typer.Exit(2) from exc
    train, valid = manifest.splits["train"], manifest.splits["valid"]
    typer.echo(f"dataset {name!r} in {store.describe()}: {train.episodes} train episodes ({train.transitions} "
               f"transitions), {valid.episodes} valid ({valid.transitions}); {returns_text(manifest)}")


ctl = typer.Typer(no_args_is_help=True, help=(
    "Steer a running run (admin token): pause/resume collection, checkpoint, evaluate, set live settings, stop."))
app.add_typer(ctl, name="ctl")
Url = Annotated[str, typer.Option(envvar="RLFLEET_COORDINATOR_URL", help="the coordinator")]
TokensFile = Annotated[Path, typer.Option(envvar="RLFLEET_TOKENS_FILE", help="tokens file holding the admin token")]


def _ctl(url: str, tokens_file: Path, method: str, path: str, body: dict | None = None) -> None:
    from launcher.control import ControlError, admin_token, command, describe

    try:
        reply = command(url, admin_token(tokens_file), method, path, body)
    except ControlError as exc:
        typer.echo(f"rlfleet ctl {path}: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(describe(reply) if "paused" in reply else f"run {reply['run_name']}: {reply['run_state']}")


@ctl.command("pause")
def ctl_pause(url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json")) -> None:
    """Pause collection: collectors idle (the learner drains what is buffered) until `resume`."""
    _ctl(url, tokens_file, "POST", "pause")


@ctl.command("resume")
def ctl_resume(url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json")) -> None:
    """Resume collection after a pause."""
    _ctl(url, tokens_file, "POST", "resume")


@ctl.command("checkpoint")
def ctl_checkpoint(url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json")) -> None:
    """Ask the learner to checkpoint after its next update."""
    _ctl(url, tokens_file, "POST", "checkpoint")


@ctl.command("evaluate")
def ctl_evaluate(
    test: Annotated[bool, typer.Option("--test", help="also run the held-out test, whatever the validation")] = False,
    url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json"),
) -> None:
    """Ask the evaluator to validate the latest policy now, on fresh validation seeds."""
    _ctl(url, tokens_file, "POST", "evaluate", {"test": test})


@ctl.command("set")
def ctl_set(
    settings: Annotated[list[str], typer.Argument(help="KEY=VALUE, e.g. replay.samples_per_insert=16")],
    url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json"),
) -> None:
    """Change live settings (those the run's algorithm declares live); journalled and shown in status."""
    from coordinator.overrides import parse_overrides

    try:
        values = parse_overrides(";".join(settings))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="SETTINGS") from exc
    _ctl(url, tokens_file, "PATCH", "settings", {"settings": values})


@ctl.command("stop")
def ctl_stop(
    reason: Annotated[str, typer.Option(help="recorded as the run's end message")] = "stopped by an operator",
    url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json"),
) -> None:
    """End the run: every worker is told to exit."""
    _ctl(url, tokens_file, "POST", "stop", {"reason": reason})


@app.command()
def runs(data_dir: Annotated[Path, typer.Argument(help="where runs/<name>/ are kept")] = Path("data")) -> None:
    """List the runs of a data directory: state, env steps and the best held-out test of each (from their
    journals, read-only: live runs too). Continue a stopped one with `rlfleet up --resume <name>`."""
    from launcher.runs import format_runs, list_runs

    typer.echo(format_runs(list_runs(data_dir)))


@app.command()
def plot(run_dir: Path) -> None:
    """(Re)draw RUN_DIR/learning_curve.png from its metrics."""
    from coordinator.curves import plot_learning_curve
    from shared.storage.layout import RunLayout

    layout = RunLayout(run_dir.parent.parent, run_dir.name)
    plot_learning_curve(layout)
    typer.echo(str(layout.curve_png))
