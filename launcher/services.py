"""The services of rlfleet, defined once: what docker-compose.yml declares and what `rlfleet up` starts.

Each service has its command, its environment (the values a user may change are `Place.setting`s, with their
defaults), its volumes, what it waits for (`depends_on` with compose's conditions), its healthcheck, its restart
policy and how many replicas it runs. The table is written against a `Place` (launcher/places.py), which names
paths, addresses and settings for containers or for local processes, so the two can never disagree: compose's
file is rendered from `fleet(InContainers())` (launcher/compose_file.py) and `rlfleet up` runs
`fleet(OnThisHost(...))` (launcher/up.py). Fields that only a container engine has a use for (image, build,
ports, profiles, network mode, networks, entrypoint) are ignored by `rlfleet up`, as are services of a profile,
which compose too leaves out unless the profile is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlfleet.launcher.places import CONTAINER_PORT, Place, Volume

IMAGE = "rlfleet:latest"
DATA = Volume("rlfleet-data", "/data", "")
TOKENS = Volume("tokens", "/secrets/all", "")  # beside the run directories: where `rlfleet status` looks
SCOPE_TOKENS = {scope: Volume(f"{scope}-token", f"/secrets/{scope}", f"secrets/{scope}")
                for scope in ("collector", "learner", "evaluator")}
SEAWEEDFS_DATA = Volume("seaweedfs-data", "/data", "seaweedfs")
VOLUMES = (DATA, TOKENS, *SCOPE_TOKENS.values(), SEAWEEDFS_DATA)
# compose's networks: every service is on `default` unless it names others. `learners` holds the learners and the
# coordinator they call, and nothing else: a learner group's rendezvous store, unauthenticated and unpickling what
# it reads, listens on the learner's address there (learner_worker/rendezvous.py), out of the other services' reach.
DEFAULT_NETWORK, LEARNERS = "default", "learners"
NETWORKS = (LEARNERS,)  # declared by the file (compose declares `default` itself)

# compose's depends_on conditions
STARTED, HEALTHY, COMPLETED = "service_started", "service_healthy", "service_completed_successfully"
ON_FAILURE, NEVER = "on-failure", "no"  # restart policies: restarted after a crash, or a one-shot job


@dataclass(frozen=True)
class Mount:
    volume: Volume
    read_only: bool = False


@dataclass(frozen=True)
class Healthcheck:
    test: list[str]  # a command: healthy when it exits 0
    interval: str = "2s"
    timeout: str = "3s"
    retries: int = 30
    start_period: str = "3s"


@dataclass
class Service:
    """One service. Mutable where `rlfleet up` adjusts a run: its replica count (--collectors, the learner
    group's size)."""

    name: str
    command: list[str]
    about: str = ""  # shown above the service in docker-compose.yml
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    depends_on: dict[str, str] = field(default_factory=dict)
    healthcheck: Healthcheck | None = None
    restart: str = ON_FAILURE
    replicas: int = 1
    replicas_setting: str = ""  # the user setting compose reads the replica count from, if any
    image: str = IMAGE
    build_args: dict[str, str] | None = None  # this service builds the image (with these build args)
    ports: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    network_mode: str = ""
    networks: list[str] = field(default_factory=list)  # compose's networks it joins; none named: `default`
    entrypoint: list[str] = field(default_factory=list)

    @property
    def one_shot(self) -> bool:
        """A job that runs once to completion (others wait on it with `service_completed_successfully`)."""
        return self.restart == NEVER


WORKERS_ABOUT = (
    "Workers start beside the coordinator, not after its healthcheck: their imports (torch for the learner) take "
    "longer than its start-up, and until it answers they retry with backoff. They need their token first. "
    "Collectors and the evaluator poll its /readyz before their own imports, leaving the cores to the coordinator "
    "and the learner while those start (launcher/readiness.py).")


def _worker(at: Place, kind: str, about: str = "", replicas: int = 1, replicas_setting: str = "",
            networks: list[str] | None = None) -> Service:
    token = SCOPE_TOKENS[kind]
    env = {"RLFLEET_COORDINATOR_URL": at.coordinator_url, "RLFLEET_DATA_DIR": at.path(DATA),
           "RLFLEET_TOKEN_FILE": at.path(token, "token")}
    if kind == "learner":  # collectors and the evaluator act with one thread (OMP_NUM_THREADS, launcher/__init__.py)
        env["RLFLEET_TORCH_THREADS"] = at.setting(
            "RLFLEET_TORCH_THREADS", "auto", "the learner's torch threads; auto: the cores it may use "
            "(learner_worker/threads.py)")
    return Service(
        name=kind, command=at.rlfleet(kind), about=about, env=env,
        mounts=[Mount(DATA), Mount(token, read_only=True)],
        depends_on={"secrets": COMPLETED, "coordinator": STARTED},
        replicas=replicas, replicas_setting=replicas_setting, networks=networks or [])


def fleet(at: Place) -> list[Service]:
    """Every service, in the order compose users read them."""
    scope_files = [arg for scope, volume in SCOPE_TOKENS.items()
                   for arg in ("--scope-file", f"{scope}={at.path(volume, 'token')}")]
    return [
        Service(
            name="secrets",
            about="Writes every scope's token to the `tokens` volume, which only the coordinator mounts, and each "
                  "worker scope's token alone to a volume of its own: a collector can read the collector token "
                  "and nothing else (the admin token never leaves the coordinator's volume).",
            command=at.rlfleet("secrets", "--out", at.path(TOKENS, "tokens.json"), *scope_files),
            mounts=[Mount(TOKENS), *(Mount(volume) for volume in SCOPE_TOKENS.values())],
            restart=NEVER,
            build_args={"BASE_IMAGE": at.setting("RLFLEET_BASE_IMAGE", "python:3.11-slim",
                                                 "the image that rlfleet's is built on, see docker/base-image.sh")}),
        Service(
            name="coordinator",
            about="Each start resumes the newest run of its config while that run is still running, and starts a "
                  "new one (named <config>__s<seed>__<time>) once it has ended; RLFLEET_RUN=<name> serves exactly "
                  "that run (coordinator/runs.py).",
            command=at.rlfleet("coordinator"),
            env={"RLFLEET_CONFIG": at.setting("RLFLEET_CONFIG", f"{at.repo}/configs/cartpole_dqn.yaml",
                                              "the run config"),
                 "RLFLEET_OVERRIDES": at.setting("RLFLEET_OVERRIDES", "", "config overrides: key=value;key=value"),
                 "RLFLEET_RUN": at.setting("RLFLEET_RUN", "", "a run to serve by name, see above"),
                 "RLFLEET_DATA_DIR": at.path(DATA),
                 "RLFLEET_TOKENS_FILE": at.path(TOKENS, "tokens.json"),
                 "RLFLEET_HOST": at.bind_host,
                 "RLFLEET_PORT": str(at.port),
                 "RLFLEET_DB_SYNCHRONOUS": at.journal_synchronous},
            mounts=[Mount(DATA), Mount(TOKENS, read_only=True)],
            ports=[f"127.0.0.1:{at.setting('RLFLEET_PORT', '8000', 'the coordinator port on the host')}:"
                   f"{CONTAINER_PORT}"],
            depends_on={"secrets": COMPLETED},
            healthcheck=Healthcheck(at.rlfleet("health", f"http://127.0.0.1:{at.port}/readyz")),
            networks=[DEFAULT_NETWORK, LEARNERS]),
        _worker(at, "collector", about=WORKERS_ABOUT, replicas=2),
        _worker(at, "learner", replicas_setting="RLFLEET_LEARNERS", networks=[LEARNERS], about=(
            "One learner per rank of the learner group: set RLFLEET_LEARNERS to the run's learner.replicas, and "
            "learner.rendezvous to the first replica's container name (rlfleet-learner-1:29400 when the project "
            "is named rlfleet: `docker compose -p rlfleet`), which serves the group's c10d rendezvous (README: "
            "Learner groups). Learners are on the `learners` network alone, with the coordinator: the "
            "rendezvous store authenticates no one and unpickles what it reads, so no other service may reach "
            "it.")),
        _worker(at, "evaluator"),
        Service(
            name="seaweedfs",
            about="Profile s3 (`docker-compose --profile s3 up`): an S3-compatible object store (SeaweedFS) for "
                  "payloads, policies, checkpoints and best/ in place of the shared volume, and `store-init`, "
                  "which creates the bucket once. Point the services at it with docker/compose.s3.yml (it sets "
                  "RLFLEET_STORE_URL, RLFLEET_S3_ENDPOINT_URL, credentials):\n"
                  "  docker-compose -f docker-compose.yml -f docker/compose.s3.yml --profile s3 up\n"
                  "SeaweedFS listens on the host's loopback only (host network), reached by services on the host "
                  "network.",
            image=at.setting("RLFLEET_SEAWEEDFS_IMAGE", "chrislusf/seaweedfs:4.48", "the SeaweedFS image"),
            entrypoint=["weed"],
            command=["server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={at.path(SEAWEEDFS_DATA)}", "-s3",
                     "-s3.port=8333", "-master.port=9333", "-volume.port=8080", "-filer.port=8888",
                     "-volume.max=0"],
            mounts=[Mount(SEAWEEDFS_DATA)], profiles=["s3"], network_mode="host"),
        Service(
            name="store-init",
            about="Creates the s3 profile's bucket once (AWS_* default to credentials this SeaweedFS accepts; a "
                  "real store needs its own).",
            command=at.rlfleet("store-init"),
            env={"RLFLEET_STORE_URL": at.setting("RLFLEET_STORE_URL", "s3://rlfleet/fleet", "the s3 profile's store"),
                 "RLFLEET_S3_ENDPOINT_URL": at.setting("RLFLEET_S3_ENDPOINT_URL", "http://127.0.0.1:8333",
                                                       "the s3 profile's endpoint"),
                 "AWS_ACCESS_KEY_ID": at.setting("AWS_ACCESS_KEY_ID", "rlfleet", "the s3 profile's credentials"),
                 "AWS_SECRET_ACCESS_KEY": at.setting("AWS_SECRET_ACCESS_KEY", "rlfleet",
                                                     "the s3 profile's credentials")},
            depends_on={"seaweedfs": STARTED}, profiles=["s3"],
            network_mode="host"),
    ]
