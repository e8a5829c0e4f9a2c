"""The `rlfleet` console script: a table of commands and their options (typer). Each command's work is in a module
of its own (named in its body), imported only when that command runs, so a service's process loads nothing that
another command needs. User errors end a command with one line per problem and exit 2 (launcher/errors.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from rlfleet.launcher.errors import DEBUG, CliGroup
from rlfleet.shared.envs.seeds import MAX_TEST_COUNTER

app = typer.Typer(cls=CliGroup, add_completion=False, no_args_is_help=True,
                  help="rlfleet: distributed RL training with a coordinator, collectors, a learner and an evaluator.")


def _version(show: bool) -> None:
    if show:
        from rlfleet import __version__

        typer.echo(f"rlfleet {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help="show the traceback of a user error too")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print rlfleet's version and exit")] = False,
) -> None:
    """rlfleet: distributed RL training with a coordinator, collectors, a learner and an evaluator."""
    ctx.meta[DEBUG] = debug


@app.command()
def up(
    config: Annotated[str, typer.Option(help="a run config YAML file, or the name of a packaged config (`rlfleet "
                                             "configs` lists them)")] = "cartpole_dqn",
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
             "instead of starting a new one, a stopped run too; as RLFLEET_RUN does for compose. --set may only "
             "change budget.*: a larger budget lets a run that ran out train on")] = None,
    open_rendezvous: Annotated[bool, typer.Option(
        "--open-rendezvous", help="let a learner group's learner.rendezvous be an address other than loopback: "
                                  "its store is unauthenticated and torch's rendezvous unpickles what it reads, "
                                  "so only on a trusted network")] = False,
) -> None:
    """Run every service of docker-compose.yml as a local process and train until solved or out of budget."""
    from rlfleet.launcher.startup import without_field_docs

    without_field_docs()  # before launcher.up loads the models; the services' environments say so too
    from rlfleet.launcher.configs import config_file
    from rlfleet.launcher.up import UpOptions, launch

    config_path = config_file(config) if resume is None else Path(config)  # a resumed run reads its own
    raise typer.Exit(launch(UpOptions(config=config_path, resume=resume, data_dir=data_dir, port=port,
                                      collectors=collectors, overrides=list(set_ or []),
                                      max_quick_crashes=max_quick_crashes, stable_seconds=stable_seconds,
                                      open_rendezvous=open_rendezvous),
                            seed, deterministic))


@app.command()
def coordinator() -> None:
    """Serve the coordinator (settings from RLFLEET_* variables; see coordinator/settings.py)."""
    from rlfleet.launcher.serve import coordinator as serve

    raise typer.Exit(serve())


@app.command()
def collector() -> None:
    """Run a collector worker until the run ends."""
    from rlfleet.launcher.serve import collector as serve

    raise typer.Exit(serve())


@app.command()
def learner() -> None:
    """Run the learner worker until the run ends."""
    from rlfleet.launcher.serve import learner as serve

    raise typer.Exit(serve())


@app.command()
def evaluator() -> None:
    """Run the evaluator worker until the run ends."""
    from rlfleet.launcher.serve import evaluator as serve

    raise typer.Exit(serve())


@app.command("store-init")
def store_init() -> None:
    """Create the bucket that RLFLEET_STORE_URL names if it is missing, and check the store answers (settings
    as every service reads them: RLFLEET_S3_ENDPOINT_URL, AWS credentials). Nothing to do for the run directory."""
    from rlfleet.launcher.store_init import store_init as init

    raise typer.Exit(init())


@app.command()
def secrets(
    out: Annotated[Path, typer.Option(help="tokens file to create (kept if it exists)")],
    scope_file: Annotated[list[str] | None, typer.Option(
        help="SCOPE=PATH: also write that scope's token alone to PATH (mode 0600, rewritten each time), for a "
             "service that must see no other token; repeatable")] = None,
) -> None:
    """Create the scoped bearer tokens file (mode 0600) unless it already exists; optionally one file per scope."""
    from rlfleet.launcher.secrets_job import write_tokens

    write_tokens(out, scope_file or [])


@app.command()
def health(url: str) -> None:
    """Exit 0 if URL answers 200 within 3 s (the compose healthcheck; needs no curl in the image)."""
    from rlfleet.launcher.health import healthy

    raise typer.Exit(0 if healthy(url) else 1)


@app.command()
def status(
    url: Annotated[str, typer.Option(envvar="RLFLEET_COORDINATOR_URL")] = "http://127.0.0.1:8000",
    tokens_file: Annotated[Path, typer.Option(envvar="RLFLEET_TOKENS_FILE")] = Path("data/tokens.json"),
    as_json: Annotated[bool, typer.Option("--json", help="print the raw status document")] = False,
) -> None:
    """Print the run's status."""
    from rlfleet.launcher.status import show_status

    raise typer.Exit(show_status(url, tokens_file, as_json))


@app.command()
def test(
    run_dir: Annotated[Path | None, typer.Argument(help="a run directory, data/runs/<name>")] = None,
    policy: Annotated[Path | None, typer.Option(help="a policy file to test instead of RUN_DIR's best")] = None,
    config: Annotated[str | None, typer.Option(help="run config to test with instead of RUN_DIR/config.yaml (a file, "
                                                    "or a shipped config's name)")] = None,
    version: Annotated[int | None, typer.Option(
        min=1, help="test policies/v<N>.safetensors of the run's store (RUN_DIR/store or RLFLEET_STORE_URL) "
             "instead of the best policy")] = None,
    episodes: Annotated[int, typer.Option(min=1, max=100_000, help="greedy episodes to play")] = 100,
    num_envs: Annotated[int, typer.Option(min=1, max=256, help="envs to split them over (evenly)")] = 10,
    seed_counter: Annotated[int, typer.Option(
        min=0, max=MAX_TEST_COUNTER,
        help="which test block of the run's seeds: 0 first, 1 for a second test, ...")] = 0,
    video: Annotated[Path | None, typer.Option(help="also record one more greedy episode to this .mp4 or .gif")] = None,
    json_path: Annotated[Path | None, typer.Option(
        "--json", help="where to write the result [RUN_DIR/test.json; none without RUN_DIR]")] = None,
) -> None:
    """Play a held-out test of a trained policy on seeds no training or validation env used; print the mean
    return with its 95% Student's t interval and whether it is solved by the run's rule (the 95% lower bound of
    an independent re-test's mean reaches env.solve_threshold) and its mean reaches it ("no threshold" for a run
    without one; see evaluator/testing.py).
    Exits 0 whatever the score, 2 with one line on stderr for input that cannot be tested."""
    from rlfleet.launcher.configs import config_file
    from rlfleet.launcher.held_out import held_out_test

    config_path = None if config is None else config_file(config)
    raise typer.Exit(held_out_test(run_dir, policy, config_path, version, episodes, num_envs, seed_counter, video,
                                   json_path))


@app.command()
def record(
    run_dir: Annotated[Path | None, typer.Argument(help="a finished run's directory, data/runs/<name>: its best "
                                                          "policy and config")] = None,
    name: Annotated[str, typer.Option(help="the dataset's name (algo.dataset of the run that trains on it)")] = "",
    policy: Annotated[Path | None, typer.Option(help="a policy file to play instead of RUN_DIR's best")] = None,
    config: Annotated[str | None, typer.Option(help="run config whose env to play in instead of "
                                                    "RUN_DIR/config.yaml (a file, or a shipped config's name)")] = None,
    episodes: Annotated[int, typer.Option(min=2, max=100_000, help="episodes to record")] = 20,
    valid_fraction: Annotated[float, typer.Option(help="share of the episodes kept for the valid split")] = 0.2,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seeds the envs, the split and any sampling")] = 0,
    stochastic: Annotated[bool, typer.Option(help="sample actions from the policy instead of its greedy "
                                                  "choice")] = False,
    data_dir: Annotated[Path, typer.Option(help="the data directory whose dataset store (datasets/) keeps it")] = Path(
        "data"),
    format_: Annotated[Literal["rlfleet", "minari"], typer.Option(
        "--format", help="rlfleet: the data directory's dataset store; minari: a Minari dataset of id NAME "
                         "(namespace/name-v0) in MINARI_DATASETS_PATH (the minari extra), no split")] = "rlfleet",
) -> None:
    """Play a trained policy for EPISODES episodes and store them as a named dataset of chunks with train and
    valid splits (see launcher/record.py); a run with `algo.dataset: NAME` (behavioural cloning) trains on it.
    With --format minari, write them as a Minari dataset instead. Exits 2 with one line on stderr for input that
    cannot be recorded."""
    from rlfleet.launcher.configs import config_file
    from rlfleet.launcher.record import Recording, record_command

    raise typer.Exit(record_command(run_dir, policy, None if config is None else config_file(config),
                                    Recording(name, episodes, valid_fraction, seed, stochastic), data_dir, format_))


dataset_app = typer.Typer(no_args_is_help=True, help=(
    "Move datasets between rlfleet's dataset store and Minari's (the minari extra): import and export."))
app.add_typer(dataset_app, name="dataset")


@dataset_app.command("import")
def dataset_import(
    source: Annotated[str, typer.Argument(metavar="MINARI_DATASET", help="a local Minari dataset: its directory, "
                                                                         "or its id in MINARI_DATASETS_PATH")],
    name: Annotated[str, typer.Option(help="the rlfleet dataset's name (algo.dataset of the run that trains on it)")],
    config: Annotated[str, typer.Option(help="the run config whose env the dataset must fit (a file, or a shipped "
                                             "config's name)")],
    valid_fraction: Annotated[float, typer.Option(help="share of the episodes kept for the valid split")] = 0.2,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="seeds the split")] = 0,
    data_dir: Annotated[Path, typer.Option(help="the data directory whose dataset store (datasets/) keeps it")] = Path(
        "data"),
) -> None:
    """Read a local Minari dataset into the dataset store, whole episodes split into train and valid; refused
    when its observation or action space differs from the config's env (both are named). Downloads nothing."""
    from rlfleet.launcher.configs import config_file
    from rlfleet.launcher.minari_datasets import import_command

    typer.echo(import_command(source, config_file(config), name, valid_fraction, seed, data_dir))


@dataset_app.command("export")
def dataset_export(
    name: Annotated[str, typer.Argument(help="the rlfleet dataset to export")],
    dataset_id: Annotated[str, typer.Argument(metavar="MINARI_ID", help="the Minari dataset id to write "
                                                                         "(namespace/name-v0)")],
    config: Annotated[str, typer.Option(help="the run config of the env the dataset was recorded in (a file, or a "
                                             "shipped config's name)")],
    data_dir: Annotated[Path, typer.Option(help="the data directory whose dataset store (datasets/) keeps it")] = Path(
        "data"),
) -> None:
    """Write every episode of a dataset (both splits, in recording order) as a Minari dataset in
    MINARI_DATASETS_PATH, through Minari's own writer."""
    from rlfleet.launcher.configs import config_file
    from rlfleet.launcher.minari_datasets import export_command

    typer.echo(export_command(name, dataset_id, config_file(config), data_dir))


@app.command()
def export(
    source: Annotated[Path, typer.Argument(
        metavar="RUN_OR_POLICY", help="a run directory (data/runs/<name>: its best policy) or a policy file")],
    out: Annotated[Path, typer.Argument(help="the file to write (.onnx, or .pt for TorchScript)")],
    format_: Annotated[Literal["onnx", "torchscript"], typer.Option(
        "--format", help="onnx (onnxruntime; needs the onnx extra) or torchscript (libtorch)")] = "onnx",
) -> None:
    """Write a trained policy as a model that takes raw observations (a batch, [N, *shape]) and returns the
    env's actions: normalisation, image scaling, action masks and the greedy choice are inside it."""
    from rlfleet.launcher.export import export_command

    export_command(source, out, format_)


ctl = typer.Typer(no_args_is_help=True, help=(
    "Steer a running run (admin token): pause/resume collection, checkpoint, evaluate, set live settings, load "
    "another run's checkpoint, stop."))
app.add_typer(ctl, name="ctl")
Url = Annotated[str, typer.Option(envvar="RLFLEET_COORDINATOR_URL", help="the coordinator")]
TokensFile = Annotated[Path, typer.Option(envvar="RLFLEET_TOKENS_FILE", help="tokens file holding the admin token")]


def _ctl(url: str, tokens_file: Path, method: str, path: str, body: dict | None = None) -> None:
    from rlfleet.launcher.control import run_command

    raise typer.Exit(run_command(url, tokens_file, method, path, body))


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
    from rlfleet.launcher.control import set_settings

    raise typer.Exit(set_settings(url, tokens_file, settings))


@ctl.command("load-checkpoint")
def ctl_load_checkpoint(
    source: Annotated[Path, typer.Argument(help="the source run's directory (<data dir>/runs/<run>)")],
    checkpoint: Annotated[str | None, typer.Option(help="one of its checkpoints, e.g. learner-0000000500.pt; "
                                                        "default its latest")] = None,
    url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json"),
) -> None:
    """Make the learner continue from another run's checkpoint (weights, optimizer state); refused if it does not
    fit this run."""
    from rlfleet.launcher.control import load_checkpoint

    raise typer.Exit(load_checkpoint(url, tokens_file, source, checkpoint))


@ctl.command("stop")
def ctl_stop(
    reason: Annotated[str, typer.Option(help="recorded as the run's end message")] = "stopped by an operator",
    url: Url = "http://127.0.0.1:8000", tokens_file: TokensFile = Path("data/tokens.json"),
) -> None:
    """End the run: every worker is told to exit."""
    _ctl(url, tokens_file, "POST", "stop", {"reason": reason})


@app.command()
def pbt(
    spec: Annotated[Path, typer.Argument(help="a PBT spec YAML (configs/pbt/ has examples)")],
    output_dir: Annotated[Path | None, typer.Option(help="where members, lineage and report go [the spec's "
                                                         "output_dir, or pbt/<name>]")] = None,
    fixed: Annotated[bool, typer.Option("--fixed", help="run the same members with their initial settings and no "
                                                         "exploit/explore: the baseline PBT is compared with")] = False,
) -> None:
    """Population-based training: K runs at once; every interval the bottom quantile loads a top member's checkpoint
    and perturbs its live settings. Writes lineage.jsonl, lineage.png and pbt_report.md with the held-out test of
    the population's best. Ctrl-C stops every member's run."""
    from rlfleet.launcher.pbt import run_pbt

    raise typer.Exit(run_pbt(spec, output_dir, fixed))


@app.command()
def runs(data_dir: Annotated[Path, typer.Argument(help="where runs/<name>/ are kept")] = Path("data")) -> None:
    """List the runs of a data directory: state, env steps and the best held-out test of each (from their
    journals, read-only: live runs too). Continue a stopped one with `rlfleet up --resume <name>`."""
    from rlfleet.launcher.runs import format_runs, list_runs

    typer.echo(format_runs(list_runs(data_dir)))


@app.command()
def configs() -> None:
    """List the configs that ship with rlfleet: `rlfleet up --config NAME` runs one."""
    from rlfleet.launcher.configs import shipped_configs

    for name, path in shipped_configs().items():
        typer.echo(f"{name:28} {path}")


config_app = typer.Typer(no_args_is_help=True, help=(
    "Inspect run configs: the resolved config with every default, and the JSON Schema editors check them with."))
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(
    config: Annotated[str, typer.Option(help="a run config YAML file, or the name of a packaged config (`rlfleet "
                                             "configs` lists them)")] = "cartpole_dqn",
    set_: Annotated[list[str] | None, typer.Option("--set", help="config override key=value (repeatable)")] = None,
) -> None:
    """Print the run config that `rlfleet up` with the same --config and --set would start: every field with its
    default, env.solve_threshold resolved from the env's registration (YAML, loadable as a config).
    Exits 2 with one line per problem for a config that does not load."""
    from rlfleet.launcher.config_command import resolved_config
    from rlfleet.launcher.configs import config_file

    typer.echo(resolved_config(config_file(config), list(set_ or [])), nl=False)


@config_app.command("schema")
def config_schema(
    out: Annotated[Path | None, typer.Argument(help="the .json file to write [stdout]")] = None,
) -> None:
    """Write the JSON Schema of a run config, for editors: a YAML file whose first line is
    `# yaml-language-server: $schema=PATH` is completed and checked against it (the shipped configs name
    docs/reference/run-config.schema.json)."""
    from rlfleet.launcher.startup import with_field_docs

    with_field_docs()  # the schema's descriptions are the models' field docs
    from rlfleet.launcher.config_command import write_schema

    typer.echo(write_schema(out))


@app.command()
def sweep(
    spec: Annotated[Path, typer.Argument(help="a sweep spec YAML file (configs/sweeps/ has examples)")],
) -> None:
    """Tune a run config with an Optuna study (TPE, a median pruner fed by validation curves) whose trials are
    `rlfleet up` runs, scored by their held-out tests or time to a confirmed solve; writes trials.md, trials.csv,
    best_config.yaml and sweep.png to the spec's output directory. Started again, it continues the study.
    Exits 2 with one line per problem, before any trial starts, for a spec that does not fit its config."""
    from rlfleet.launcher.sweep import sweep_command

    raise typer.Exit(sweep_command(spec))


@app.command()
def plot(run_dir: Path) -> None:
    """(Re)draw RUN_DIR/learning_curve.png from its metrics."""
    from rlfleet.launcher.plot import plot as draw

    typer.echo(str(draw(run_dir)))


@app.command()
def report(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN...", help="run directories (data/runs/<name>) of one "
                                                                     "config over seeds")],
    out: Annotated[Path, typer.Option(help="the folder to write report.md and report.png into")] = Path("report"),
    target: Annotated[float | None, typer.Option(
        help="the return that normalises to 1 [the runs' env.solve_threshold]; needed for runs without one")] = None,
    random_episodes: Annotated[int, typer.Option(
        min=1, max=10_000, help="episodes of a uniformly random policy whose mean return normalises to 0")] = 100,
    reps: Annotated[int, typer.Option(min=1_000, max=1_000_000, help="bootstrap replications")] = 50_000,
) -> None:
    """Aggregate one config's runs over seeds, scored by their held-out tests: IQM, mean, median and optimality
    gap of normalised scores with 95% stratified bootstrap intervals (rliable; the `report` extra) and a
    sample-efficiency curve; prints the table, writes OUT/report.md and OUT/report.png (the `plot` extra).
    Exits 2 naming the problem for runs of different configs or a run with no held-out test."""
    from rlfleet.launcher.report import report_command

    report_command(runs, out, target, random_episodes, reps)
