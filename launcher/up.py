"""`rlfleet up`: start the services of the service table (launcher/services.py) as local processes in dependency
order, watch the run, and exit 0 when it is solved (a run with no threshold: when it trained to its budget and
tested its best policy), 1 when its budget runs out before its threshold was reached or it is stopped, 3 when a
service fails.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from rlfleet.launcher.configs import read_config
from rlfleet.launcher.errors import UserError
from rlfleet.launcher.places import OnThisHost
from rlfleet.launcher.processes import Child, child_environment, import_path, start
from rlfleet.launcher.progress import Progress
from rlfleet.launcher.restarts import CrashRecord, RestartPolicy
from rlfleet.launcher.services import Service, fleet
from rlfleet.learner_worker.threads import available_cores
from rlfleet.shared.config.preflight import preflight
from rlfleet.shared.config.problems import config_problems
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.config.threshold import threshold_note
from rlfleet.shared.storage.layout import RunLayout, new_run_name
from rlfleet.shared.tokens import load_tokens_file

if TYPE_CHECKING:  # the wire models load in watch(), once the services are started (~0.1 s sooner)
    from rlfleet.shared.wire import Status

REPO = Path(__file__).resolve().parent.parent
EXIT_SOLVED, EXIT_UNSOLVED, EXIT_FAILED = 0, 1, 3
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by Ctrl-C
WATCH_SECONDS = 0.5  # how often the launcher supervises its children and redraws progress while the run runs


def learner_threads(collectors: int, ranks: int, policy_lag: int | None = None) -> int:
    """Torch threads for each learner rank `rlfleet up` starts beside `collectors` collectors: the cores this host
    gives it minus one per collector, which keep theirs busy stepping envs, shared by the ranks; at least one
    (oversubscribed threads cost more than they bring: learner_worker/threads.py). Where the run's lag bound
    (`sampling.policy_lag`) is 0 or 1 it takes every core: under force_sync the collectors wait while the learner
    updates (configs/pong_ppo.yaml, 2 cores, 2 collectors, 30,720 env steps: 245 env steps/s at two threads against
    199 at one; idle OpenMP threads sleep, launcher/__init__.py), and under lag 1 they collect one batch ahead and
    then wait for the update too (bench/pixels.py's stack_lag1 arm, the same config: 181 env steps/s at two threads
    against 118 at one)."""
    free = available_cores() if policy_lag in (0, 1) else available_cores() - collectors
    return max(1, free // ranks)


@dataclass
class UpOptions:
    config: Path
    resume: str | None = None  # a run's name: serve that run instead of starting a new one
    data_dir: Path = Path("data")
    port: int = 8000
    collectors: int | None = None
    overrides: list[str] = field(default_factory=list)
    ready_timeout: float = 60.0
    drain_timeout: float = 30.0
    max_quick_crashes: int = 5  # a service crashing this often in a row, each soon after starting, fails the run
    stable_seconds: float = 10.0  # a process up this long has started properly: its next crash starts a new streak
    open_rendezvous: bool = False  # let a learner group's rendezvous listen on an address other than loopback

    @property
    def restart_policy(self) -> RestartPolicy:
        return RestartPolicy(stable_seconds=self.stable_seconds, max_quick_crashes=self.max_quick_crashes)


def resumed_overrides(run: str, overrides: list[str]) -> list[str]:
    """The `--set` overrides a resumed run takes: its budget's alone (more env steps or time for a run that ran
    out, which then trains on: coordinator/state/lifecycle.py). Anything else would change a run under way, so it
    is refused, naming what was given and what to do instead."""
    refused = [item for item in overrides if not item.partition("=")[0].strip().startswith("budget.")]
    if refused:
        raise UserError(f"--set {'; '.join(refused)}: run {run} resumes with the config it started with; only "
                        f"budget.* may change on --resume (say budget.max_env_steps=... or "
                        f"budget.max_wall_seconds=... to give it more); start a new run to change anything else")
    return overrides


class ServiceFailed(RuntimeError):
    pass


class UnknownRun(ValueError):
    """`--resume` names a run that has no journal in the data directory."""


class OpenRendezvous(ValueError):
    """A learner group's rendezvous on an address other than loopback, without `--open-rendezvous`."""


def is_loopback(host: str) -> bool:
    """Whether every address `host` resolves to is a loopback address (False when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def check_rendezvous(config: RunConfig, open_rendezvous: bool) -> None:
    """`rlfleet up` runs every rank on this host, so a learner group needs no rendezvous beyond loopback; one
    elsewhere is refused unless asked for: its store authenticates no one and torch's rendezvous unpickles
    what it reads there, so whoever reaches the port runs code in every learner (learner_worker/rendezvous.py)."""
    host = config.learner.rendezvous.rpartition(":")[0]
    if config.learner.replicas > 1 and not open_rendezvous and not is_loopback(host):
        raise OpenRendezvous(
            f"learner.rendezvous={config.learner.rendezvous} is not a loopback address: the learner group's store "
            f"would listen there, unauthenticated, and torch's rendezvous unpickles what it reads (code execution "
            f"for whoever reaches the port). Use 127.0.0.1:<port> (every rank of `rlfleet up` runs on this host), "
            f"or pass --open-rendezvous if that network is trusted")


_interrupted = threading.Event()  # set by the first SIGTERM or SIGINT; `watch` checks it every turn


def _interrupt_once(signum: int, frame: object) -> None:
    """The first SIGTERM or SIGINT stops the run in order; later ones are ignored. A second one used to cut the
    shutdown short and leave the coordinator running without its parent (seen with `timeout`, which passes its
    own SIGTERM on to a process that may already have had one). The flag outlives the exception: Python drops
    an exception raised while a finalizer runs ("Exception ignored in ..."), and with later signals ignored a
    dropped one stopped nothing (seen in CI: three SIGTERMs right after start, and the run trained on to a
    solve and exited 0)."""
    _interrupted.set()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(service: Service) -> bool:
    if service.healthcheck is None:
        return True
    done = subprocess.run(service.healthcheck.test, env=child_environment(service), capture_output=True, timeout=10)
    return done.returncode == 0


class Up:
    def __init__(self, opts: UpOptions) -> None:
        self.opts = opts
        self.data_dir = opts.data_dir.resolve()
        # Services run where the user runs `rlfleet up`, importing from there and from beside their config.
        self.workdir = Path.cwd()
        self.python_path = import_path(self.workdir, opts.config)
        resume = opts.resume
        if resume is not None and Path(resume).parent.name == "runs" and Path(resume).is_dir():
            self.data_dir, resume = Path(resume).resolve().parent.parent, Path(resume).name  # a run directory
        if resume is None:
            config_path = opts.config
            config = read_config(config_path, opts.overrides)
            self.run_name = new_run_name(config)
        elif RunLayout(self.data_dir, resume).journal.exists():
            self.run_name = resume
            started = RunLayout(self.data_dir, resume).config_file  # the config the run started with
            config_path = started if started.exists() else opts.config
            config = read_config(config_path, resumed_overrides(resume, opts.overrides))
        else:
            raise UnknownRun(f"no run {resume!r} to resume in {self.data_dir / 'runs'}")
        check_rendezvous(config, opts.open_rendezvous)
        # the env builds and the hooks load, before any service starts; which threshold applies is said at once
        try:
            planned = preflight(config).config
        except ValidationError as exc:
            raise UserError(*(f"{config_path}: {line}" for line in config_problems(exc, RunConfig))) from exc
        except ValueError as exc:
            raise UserError(f"{config_path}: {exc}") from exc
        self.threshold_note = threshold_note(config, planned)
        self.port = opts.port or free_port()
        self.layout = RunLayout(self.data_dir, self.run_name)
        # The coordinator is told the run by name, the one mechanism compose users have too (RLFLEET_RUN).
        # The user's RLFLEET_* settings in this shell are the table's settings (RLFLEET_TORCH_THREADS, say), as they
        # are compose's; what `rlfleet up` was given on its command line wins over them.
        self.place = OnThisHost(self.data_dir, REPO, self.port, {
            **{k: v for k, v in os.environ.items() if k.startswith("RLFLEET_")},
            "RLFLEET_CONFIG": str(config_path.resolve()), "RLFLEET_OVERRIDES": ";".join(opts.overrides),
            "RLFLEET_RUN": self.run_name})
        # services of a profile (the s3 profile's object store) are left out, as compose leaves them out unless asked
        self.services = {s.name: s for s in fleet(self.place) if not s.profiles}
        if opts.collectors is not None:
            self.services["collector"].replicas = opts.collectors
        self.services["learner"].replicas = config.learner.replicas  # one learner process per rank of the group
        if not os.environ.get("RLFLEET_TORCH_THREADS"):  # the user's value is the table's setting already
            learner = self.services["learner"]
            learner.env["RLFLEET_TORCH_THREADS"] = str(learner_threads(
                self.services["collector"].replicas, learner.replicas, config.sampling.policy_lag))
        self.launched = time.monotonic()
        self.children: list[Child] = []
        self.completed: set[str] = set()  # one-shot jobs run in this process (_run_inline)
        self.policy = opts.restart_policy
        self.clock = time.monotonic  # of restart decisions; children's `started` come from the same clock
        self.crashes: dict[str, CrashRecord] = {}
        self._restart_due: dict[str, float] = {}
        self.progress = Progress()

    # ----- starting ---------------------------------------------------------------------------------------
    def _wait_for(self, dep: str, condition: str) -> None:
        deadline = time.monotonic() + self.opts.ready_timeout
        while time.monotonic() < deadline:
            self._supervise()
            kids = [c for c in self.children if c.service == dep]
            if condition == "service_completed_successfully":
                if dep in self.completed or (kids and all(c.exit_code == 0 for c in kids)):
                    return
                running = [c for c in kids if c.exit_code is None]
                if running:  # back as soon as the job exits, not at the next tick: everything else waits for it
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        running[0].proc.wait(timeout=0.1)
                    continue
            elif condition == "service_healthy":
                if _healthy(self.services[dep]):
                    return
            else:
                return
            time.sleep(0.1)
        raise ServiceFailed(f"{dep} did not become {condition.removeprefix('service_')} within "
                            f"{self.opts.ready_timeout:.0f}s; see {self.layout.logs}/{dep}.log")

    def start_all(self) -> None:
        started: set[str] = set()
        while len(started) < len(self.services):
            ready = [s for s in self.services.values() if s.name not in started
                     and all(d in started for d in s.depends_on)]
            if not ready:
                raise ServiceFailed(f"dependency cycle among {sorted(set(self.services) - started)}")
            for service in ready:
                for dep, condition in service.depends_on.items():
                    self._wait_for(dep, condition)
                if service.one_shot and service.command[:len(self.place.rlfleet())] == self.place.rlfleet():
                    self._run_inline(service)
                    started.add(service.name)
                    continue
                for replica in range(service.replicas):
                    self.children.append(start(service, replica, self.layout.logs, self.workdir,
                                               python_path=self.python_path))
                started.add(service.name)

    def _run_inline(self, service: Service) -> None:
        """rlfleet's own tokens job runs in this process: the same command (its output in the service's log),
        without the ~0.2 s of a Python start-up that every other service would wait for."""
        from typer.main import get_command

        from rlfleet.launcher.cli import app

        self.layout.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.layout.logs / f"{service.name}.log"
        with open(log_path, "a") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                code = get_command(app).main(service.command[len(self.place.rlfleet()):], prog_name="rlfleet",
                                             standalone_mode=False)
            except Exception as exc:  # an unwritable tokens file, ...
                raise ServiceFailed(f"{service.name} failed: {type(exc).__name__}: {exc}") from exc
        if code:  # a bad argument in the service table: the command said why in its log, in one line
            lines = log_path.read_text().strip().splitlines() or [""]
            raise ServiceFailed(f"{service.name} failed (exit {code}): {lines[-1]}")
        self.completed.add(service.name)

    def dashboard_url(self) -> str:
        """The dashboard with the run's read token in the URL fragment, which browsers never send to a server: the
        page takes it once, keeps it for the tab and drops it from the address bar (coordinator/webui/dashboard.js).
        The token is printed because `rlfleet up` binds the coordinator to loopback only (launcher/places.py
        OnThisHost): the link opens nothing for anyone off this host. Compose, which publishes the port, prints
        no such link."""
        read = load_tokens_file(Path(self.services["coordinator"].env["RLFLEET_TOKENS_FILE"]))["read"]
        return f"http://127.0.0.1:{self.port}/#token={quote(read, safe='')}"

    # ----- watching ---------------------------------------------------------------------------------------
    def _supervise(self) -> None:
        """Restart children that crashed (non-zero exit or killed) like compose's `restart: on-failure`, as
        often as it takes, with the backoff of launcher/restarts.py; only a crash loop fails the run."""
        now = self.clock()
        for i, child in enumerate(self.children):
            code = child.exit_code
            if code in (None, 0):
                continue
            if self.services[child.service].one_shot:  # the tokens job: nothing later would work without them
                raise ServiceFailed(f"{child.name} exited with code {code}; last lines of {child.log_path}:\n"
                                    f"{child.log_tail()}")
            record = self.crashes.setdefault(child.name, CrashRecord(self.policy))
            if child.name not in self._restart_due:
                delay = record.crashed(now - child.started)
                if delay is None:
                    raise ServiceFailed(
                        f"{child.name} exited with code {code}, crash {record.streak} in a row within "
                        f"{self.policy.stable_seconds:g}s of starting ({record.restarts} restarts in all); "
                        f"last lines of {child.log_path}:\n{child.log_tail()}")
                self._restart_due[child.name] = now + delay
                self.progress.note(f"{child.name} exited with code {code}; restarting in {delay:g}s "
                                   f"(crash {record.streak} in a row, {self.policy.max_quick_crashes} fail the run)")
            if now < self._restart_due[child.name]:
                continue
            del self._restart_due[child.name]
            reason = f"exit {code}: {child.log_tail(1).strip()}"  # a worker's last log line says why it ended
            self.children[i] = start(self.services[child.service], child.replica, self.layout.logs, self.workdir,
                                     record.restarted(), reason, self.python_path)

    def _status(self, http: httpx.Client, wait: float = 0.0) -> Status | None:
        from rlfleet.shared.wire import Status

        try:
            resp = http.get("/v1/status", params={"wait": wait} if wait else None)
            return Status.model_validate_json(resp.content) if resp.status_code == 200 else None
        except (httpx.TransportError, ValueError):
            return None

    def watch(self) -> Status:
        token = load_tokens_file(Path(self.services["coordinator"].env["RLFLEET_TOKENS_FILE"]))["admin"]
        with httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=5,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            last: Status | None = None
            try:
                while True:
                    if _interrupted.is_set():  # a signal whose KeyboardInterrupt a finalizer swallowed
                        raise KeyboardInterrupt
                    self._supervise()
                    asked = time.monotonic()
                    st = self._status(http, wait=WATCH_SECONDS)  # answered at once when the run ends
                    if st is not None:
                        last = st
                        self.progress.show(st)
                        if st.run_state != "running":
                            return st
                    # a coordinator that was unreachable, or caps the wait (RLFLEET_STATUS_WAIT_SECONDS), answers
                    # early: the loop still turns once per WATCH_SECONDS
                    time.sleep(max(0.0, asked + WATCH_SECONDS - time.monotonic()))
            except KeyboardInterrupt:
                with contextlib.suppress(httpx.TransportError):  # a coordinator not yet listening: stopped below
                    http.post("/v1/run/stop", json={"reason": "interrupted by the user (Ctrl-C)"})
                st = self._status(http)
                if st is None and last is None:
                    raise
                return st or last  # type: ignore[return-value]

    # ----- stopping ---------------------------------------------------------------------------------------
    def shutdown(self, drain: bool = True) -> None:
        """Workers exit by themselves once the run ends; give them time (unless the run never got to say it
        ended: `drain=False`), then stop them, and the coordinator last."""
        workers = [c for c in self.children if c.service != "coordinator" and not self.services[c.service].one_shot]
        deadline = time.monotonic() + (self.opts.drain_timeout if drain else 0.0)
        while time.monotonic() < deadline and any(c.exit_code is None for c in workers):
            time.sleep(0.2)
        for child in workers:
            child.terminate()
        for child in reversed(self.children):
            child.terminate()
            try:
                child.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.proc.wait()

    def run(self) -> int:
        # SIGTERM (e.g. from `timeout` or a CI runner) gets the same orderly stop as Ctrl-C, once.
        _interrupted.clear()
        signal.signal(signal.SIGTERM, _interrupt_once)
        signal.signal(signal.SIGINT, _interrupt_once)
        print(f"rlfleet run {self.run_name}: {self.layout.run_dir}", flush=True)
        print(self.threshold_note, flush=True)
        try:
            self.start_all()
            print(f"coordinator on http://127.0.0.1:{self.port} (docs at /docs); "
                  f"{self.services['collector'].replicas} collectors", flush=True)
            print(f"dashboard: {self.dashboard_url()}", flush=True)
            status = self.watch()
            self.progress.note(f"run {status.run_state} {time.monotonic() - self.launched:.1f}s after launch; "
                               "stopping services")
        except ServiceFailed as exc:
            self.progress.done(f"FAILED: {exc}")
            self.shutdown()
            return EXIT_FAILED
        except KeyboardInterrupt:  # before the run said anything: its services are stopped all the same
            self.progress.done("interrupted before the run reported its state; stopping services")
            self.shutdown(drain=False)
            return EXIT_INTERRUPTED
        self.shutdown()
        counts = {name: record.restarts for name, record in self.crashes.items() if record.restarts}
        restarts = f"; restarts: {counts}" if counts else ""
        self.progress.done(f"run {status.run_state}: {status.run_message} after {status.env_steps:,} env steps "
                           f"in {status.wall_seconds:.1f}s{restarts}; curves in {self.layout.run_dir}")
        return EXIT_SOLVED if succeeded(status) else EXIT_UNSOLVED


def succeeded(status: Status) -> bool:
    """Solved; or, with no threshold, trained to its budget (its end-of-budget test reported, whatever its
    score)."""
    return status.run_state == "solved" or (status.run_state == "budget_exhausted" and status.no_threshold)


def launch(opts: UpOptions, seed: int | None, deterministic: bool) -> int:
    """`rlfleet up`: --seed and --deterministic become config overrides (a deterministic run has one collector in
    lockstep), a --resume of an unknown run is refused as a bad parameter; the exit code of the run."""
    overrides = list(opts.overrides) + ([f"seed={seed}"] if seed is not None else [])
    collectors = opts.collectors
    if deterministic:
        if collectors not in (None, 1):
            raise UserError(f"--collectors {collectors}: a deterministic run has exactly one collector; leave "
                            f"--collectors out or give 1")
        collectors, overrides = 1, [*overrides, "deterministic=true"]
    try:
        runner = Up(replace(opts, collectors=collectors, overrides=overrides))
    except UnknownRun as exc:
        raise UserError(f"--resume: {exc}; `rlfleet runs {opts.data_dir}` lists the runs there") from exc
    except OpenRendezvous as exc:
        raise UserError(f"learner.rendezvous: {exc}") from exc
    return runner.run()
