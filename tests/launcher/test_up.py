"""`rlfleet up` names its run for the coordinator through RLFLEET_RUN: a new one each time, or `--resume`; and runs
the tokens job in its own process."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from urllib.parse import quote

import pytest
from typer.testing import CliRunner

from rlfleet.coordinator.journal.database import Journal
from rlfleet.launcher.cli import app
from rlfleet.launcher.configs import CONFIGS
from rlfleet.launcher.places import InContainers
from rlfleet.launcher.processes import child_environment, import_path
from rlfleet.launcher.services import fleet
from rlfleet.launcher.up import (
    OpenRendezvous,
    ServiceFailed,
    Up,
    UpOptions,
    _interrupt_once,
    _interrupted,
    check_rendezvous,
    learner_threads,
)
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.storage.layout import RunLayout
from rlfleet.shared.tokens import load_tokens_file
from tests.support.network import non_loopback_address
from tests.support.repo import REPO

CONFIG = REPO / "configs/cartpole_dqn.yaml"


def test_a_new_up_names_a_new_run_of_config_and_seed(tmp_path: Path) -> None:
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0, overrides=["seed=3"]))
    assert up.run_name.startswith("cartpole-dqn__s3__")
    coordinator = up.services["coordinator"].env
    assert coordinator["RLFLEET_RUN"] == up.run_name and coordinator["RLFLEET_OVERRIDES"] == "seed=3"


def test_resume_serves_the_named_run(tmp_path: Path) -> None:
    journal = Journal(RunLayout(tmp_path, "mine").journal)
    journal.close()
    up = Up(UpOptions(config=CONFIG, resume="mine", data_dir=tmp_path, port=0))
    assert up.run_name == "mine" and up.services["coordinator"].env["RLFLEET_RUN"] == "mine"


def test_resume_serves_the_run_s_own_config_and_takes_a_larger_budget(tmp_path: Path) -> None:
    """The services read the config the run started with (not --config's default), and budget overrides reach the
    coordinator, which gives an exhausted run the room to train on (tests/coordinator/test_restart.py)."""
    layout = RunLayout(tmp_path, "mine")
    Journal(layout.journal).close()
    layout.config_file.write_text(CONFIG.read_text())
    up = Up(UpOptions(config=Path("cartpole_dqn"), resume="mine", data_dir=tmp_path, port=0,
                      overrides=["budget.max_wall_seconds=900", "budget.max_env_steps=90000"]))
    env = up.services["coordinator"].env
    assert env["RLFLEET_CONFIG"] == str(layout.config_file.resolve())
    assert env["RLFLEET_OVERRIDES"] == "budget.max_wall_seconds=900;budget.max_env_steps=90000"


def test_resume_refuses_overrides_beyond_the_budget_naming_them(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "mine")
    Journal(layout.journal).close()
    layout.config_file.write_text(CONFIG.read_text())
    result = CliRunner().invoke(app, ["up", "--data-dir", str(tmp_path), "--resume", "mine", "--set",
                                      "budget.max_env_steps=90000", "--set", "algo.learning_rate=0.1"])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.replace("│", " ").split())
    assert "--set algo.learning_rate=0.1: run mine resumes with the config it started with" in flat
    assert "only budget.* may change on --resume" in flat


def test_resume_of_an_unknown_run_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["up", "--data-dir", str(tmp_path), "--resume", "nope"])
    assert result.exit_code == 2
    assert "no run 'nope' to resume" in result.output


def test_resume_takes_a_run_directory_too(tmp_path: Path) -> None:
    """`rlfleet up --resume data/runs/<name>`: the run's name and its data directory, whatever --data-dir says."""
    layout = RunLayout(tmp_path / "elsewhere", "mine")
    Journal(layout.journal).close()
    up = Up(UpOptions(config=CONFIG, resume=str(layout.run_dir), data_dir=tmp_path / "default", port=0))
    assert (up.run_name, up.data_dir) == ("mine", (tmp_path / "elsewhere").resolve())


def test_the_tokens_job_runs_in_the_launcher_and_writes_every_file(tmp_path: Path) -> None:
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0))
    up.services = {"secrets": up.services["secrets"]}  # the job alone: nothing else is started
    up.start_all()
    assert up.children == [] and up.completed == {"secrets"}  # no process was started for it
    tokens = load_tokens_file(tmp_path / "tokens.json")
    for scope in ("collector", "learner", "evaluator"):
        assert (tmp_path / "secrets" / scope / "token").read_text().strip() == tokens[scope]
    assert "tokens in" in (up.layout.logs / "secrets.log").read_text()
    up._wait_for("secrets", "service_completed_successfully")  # returns at once: the job is done


def test_the_dashboard_link_carries_the_read_token_in_its_fragment(tmp_path: Path) -> None:
    """The fragment never reaches a server (nor its logs); the page takes the token from it (dashboard.js)."""
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0))
    services, up.services = up.services, {"secrets": up.services["secrets"]}
    up.start_all()  # the tokens job alone
    up.services = services
    read = load_tokens_file(tmp_path / "tokens.json")["read"]
    assert up.dashboard_url() == f"http://127.0.0.1:{up.port}/#token={quote(read, safe='')}"
    assert "takeTokenFromFragment" in (REPO / "coordinator/webui/dashboard.js").read_text()


@pytest.mark.timeout(30)  # without the flag the watch would poll the absent coordinator for ever
def test_an_interrupt_whose_exception_a_finalizer_dropped_still_ends_the_watch(tmp_path: Path) -> None:
    """Python drops an exception raised while a finalizer runs, and the first signal ignores the later ones: the
    flag it set still makes the watch stop the run (seen in CI: three SIGTERMs, and the run trained on)."""
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0))
    services, up.services = up.services, {"secrets": up.services["secrets"]}
    up.start_all()  # the tokens job alone: no coordinator listens
    up.services = services
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with contextlib.suppress(KeyboardInterrupt):  # as a finalizer would drop it
            _interrupt_once(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        with pytest.raises(KeyboardInterrupt):  # no status ever came: run() stops the services and exits 130
            up.watch()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _interrupted.clear()


def test_a_failing_inline_tokens_job_fails_the_start_naming_it(tmp_path: Path) -> None:
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0))
    up.services = {"secrets": up.services["secrets"]}
    up.services["secrets"].command = [*up.services["secrets"].command, "--scope-file", "nobody=/x"]
    with pytest.raises(ServiceFailed, match=r"secrets failed \(exit 2\): rlfleet secrets: .*nobody"):
        up.start_all()


def test_a_learner_group_rendezvous_beyond_loopback_is_refused_unless_opened() -> None:
    """Its store authenticates no one and torch's rendezvous unpickles what it reads: `rlfleet up`, whose ranks all
    run here, keeps it on loopback unless told `--open-rendezvous` (exit 2 naming the setting and the flag)."""
    other = non_loopback_address()
    result = CliRunner().invoke(app, ["up", "--config", str(CONFIG), "--set", "learner.replicas=2",
                                      "--set", f"learner.rendezvous={other}:29400"])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.replace("│", " ").split())  # the error box of typer's rich output
    assert f"learner.rendezvous={other}:29400 is not a loopback address" in flat and "--open-rendezvous" in flat


def test_loopback_rendezvous_names_and_addresses_pass_and_others_need_the_flag(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "localhost", "127.0.0.2"):
        check_rendezvous(group(f"{host}:29400"), open_rendezvous=False)
    for host in (non_loopback_address(), "0.0.0.0", "no-such-host.invalid"):
        with pytest.raises(OpenRendezvous, match="is not a loopback address"):
            check_rendezvous(group(f"{host}:29400"), open_rendezvous=False)
        check_rendezvous(group(f"{host}:29400"), open_rendezvous=True)
    check_rendezvous(RunConfig.model_validate({"learner": {"rendezvous": "0.0.0.0:29400"}}), False)  # no group


def group(rendezvous: str) -> RunConfig:
    return RunConfig.model_validate({"learner": {"replicas": 2, "rendezvous": rendezvous},
                                     "algo": {"name": "dqn", "batch_size": 64}})


def test_the_user_s_settings_reach_the_services_and_win_over_the_launcher_s_defaults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RLFLEET_TORCH_THREADS in the shell was dropped (the table hard-coded 1); now every setting of the user's
    passes, the table's settings take the user's value, and what `rlfleet up` decides itself (paths, addresses,
    credentials, worker names) is not overridden by a value left in the shell."""
    monkeypatch.setenv("RLFLEET_TORCH_THREADS", "3")
    monkeypatch.setenv("RLFLEET_HTTP_TIMEOUT_SECONDS", "30")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("MKL_NUM_THREADS", "2")
    monkeypatch.setenv("RLFLEET_DATA_DIR", "/somewhere/else")
    monkeypatch.setenv("RLFLEET_TOKEN", "a token for another coordinator")
    monkeypatch.setenv("RLFLEET_WORKER_NAME", "one name for all")
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0))
    learner = child_environment(up.services["learner"])
    assert learner["RLFLEET_TORCH_THREADS"] == "3"
    for name in ("learner", "collector", "evaluator", "coordinator"):
        env = child_environment(up.services[name])
        assert (env["RLFLEET_HTTP_TIMEOUT_SECONDS"], env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"]) == ("30", "2", "2")
        assert env["RLFLEET_DATA_DIR"] == str(tmp_path)
        assert "RLFLEET_TOKEN" not in env and "RLFLEET_WORKER_NAME" not in env
    assert "RLFLEET_TORCH_THREADS" not in up.services["collector"].env  # collectors act with one thread


def test_the_learner_takes_the_cores_the_collectors_leave_unless_the_user_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLFLEET_TORCH_THREADS", raising=False)
    monkeypatch.setattr("rlfleet.launcher.up.available_cores", lambda: 16)
    up = Up(UpOptions(config=CONFIG, data_dir=tmp_path, port=0, collectors=4))
    assert child_environment(up.services["learner"])["RLFLEET_TORCH_THREADS"] == "12"
    assert learner_threads(collectors=4, ranks=2) == 6  # the ranks of a group share them
    assert learner_threads(collectors=20, ranks=1) == 1
    assert learner_threads(collectors=4, ranks=2, policy_lag=0) == 8  # force_sync: collectors wait while it trains
    assert learner_threads(collectors=4, ranks=2, policy_lag=1) == 8  # one batch ahead, then they wait too
    assert learner_threads(collectors=4, ranks=2, policy_lag=2) == 6
    containers = {s.name: s for s in fleet(InContainers())}
    assert containers["learner"].env["RLFLEET_TORCH_THREADS"] == "${RLFLEET_TORCH_THREADS:-auto}"  # its quota


def test_services_run_where_up_runs_and_import_from_there_and_beside_the_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's env module in their directory passed the config check and then failed in every service (started
    in the checkout, importing from there) until the run exited 3; now the services share the user's directory."""
    work, elsewhere = tmp_path / "work", tmp_path / "configs"
    work.mkdir(), elsewhere.mkdir()
    config = elsewhere / "mine.yaml"
    config.write_text(CONFIG.read_text())
    monkeypatch.chdir(work)
    monkeypatch.setenv("PYTHONPATH", "/from/the/shell")
    up = Up(UpOptions(config=config, data_dir=tmp_path / "data", port=0))
    assert up.workdir == work
    assert up.python_path.split(os.pathsep) == [str(work), str(elsewhere), "/from/the/shell"]
    assert import_path(work, CONFIGS / "cartpole_dqn.yaml").split(os.pathsep) == [str(work), "/from/the/shell"]
