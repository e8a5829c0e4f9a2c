#!/usr/bin/env bash
# rlfleet in real containers, end to end, the way a user runs it: build the image, `docker-compose up`, train the
# default run (DQN on CartPole-v1) to solved, and along the way
#   - scale to 3 collectors mid-run and show, in /v1/status, the third registered with chunks acknowledged;
#   - SIGKILL the learner's process (Docker counts that as a crash, unlike `docker kill`) and show
#     `restart: on-failure` bringing it back, resuming from its checkpoint;
#   (the evaluator joins only after these checks, so that the run cannot be solved before them)
#   - after the solve, a second `docker-compose up` starts a new run (coordinator/runs.py), trained to solved;
#   - a third run trains with a learner group of 2 (RLFLEET_LEARNERS=2, learner.replicas=2): both ranks join
#     the c10d rendezvous, and the group trains and publishes (README: Learner groups);
# then tear everything down. Prints the build times and the time to solve in containers next to `rlfleet up`'s.
#
#   sudo bash docker/e2e.sh                    (tests/docker/test_e2e.py runs it in CI)
#   sudo bash docker/e2e.sh --build-only       only the tools, the base image, the wheelhouse and the image: what
#                                              a fresh machine spends most of its time on, mostly apt, downloads
#                                              and disk, so scripts/test.sh runs it beside the fast tests; the
#                                              full run after them then finds all of it cached
#
# Needs root on Debian: installs docker.io, docker-compose and debootstrap if missing, and when no Docker engine
# answers it starts its own dockerd (own data root in the cache, own exec root, socket and pidfile, no bridge, no
# iptables) and stops exactly that daemon at the end. No image registry is needed: the base image comes from
# debootstrap (docker/base-image.sh), Python packages from a wheelhouse built here (docker/wheels/). Every
# service runs on the host's network (docker/compose.hostnet.yml): all traffic stays on 127.0.0.1.
#
# Environment: RLFLEET_DOCKER_CACHE (base image tarball and the daemon's data root; default
# /var/cache/rlfleet-docker), PYTHON (a Python 3.11 with pip, default python3; `rlfleet up` is timed with it when
# it can import rlfleet), RLFLEET_E2E_TIMEOUT (seconds for each wait, default 240), RLFLEET_E2E_COMPARE (0: skip
# the `rlfleet up` run timed for comparison, as CI does, where other tests share the cores and the figure means
# nothing).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE="${RLFLEET_DOCKER_CACHE:-/var/cache/rlfleet-docker}"
PY="${PYTHON:-python3}"
TIMEOUT="${RLFLEET_E2E_TIMEOUT:-240}"
COMPARE="${RLFLEET_E2E_COMPARE:-1}"
BASE_IMAGE=rlfleet-base:bookworm
PROJECT=rlfleet-e2e
WORK="$(mktemp -d /tmp/rlfleet-e2e.XXXXXX)"
DOCKERD_PID=""
COMPOSE_FILE="$WORK/compose.yml"  # the rendered compose file in use (render_compose writes it)
group_s=""
COMPOSE_UP=""

say() { printf '== %s\n' "$*"; }
fail() { printf 'e2e FAILED: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ----- tools and engine -------------------------------------------------------------------------------------
install_tools() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v docker-compose >/dev/null || missing+=(docker-compose)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || fail "needs root to install ${missing[*]} (apt-get)"
  say "installing ${missing[*]}"
  apt-get update -qq -o DPkg::Lock::Timeout=300
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null
}

start_engine() {
  if docker info >/dev/null 2>&1; then
    say "using the running Docker engine (${DOCKER_HOST:-default socket})"
    return
  fi
  mkdir -p "$CACHE/docker"
  local run="$WORK/dockerd"
  mkdir -p "$run"
  say "starting dockerd: data root $CACHE/docker, socket $run/docker.sock, no bridge, no iptables"
  dockerd --data-root "$CACHE/docker" --exec-root "$run/exec" -H "unix://$run/docker.sock" \
    --pidfile "$run/docker.pid" --bridge=none --iptables=false --ip-masq=false >"$WORK/dockerd.log" 2>&1 8>&- &
  DOCKERD_PID=$!
  export DOCKER_HOST="unix://$run/docker.sock"
  local i
  for i in $(seq 1 120); do
    docker info >/dev/null 2>&1 && return
    kill -0 "$DOCKERD_PID" 2>/dev/null || { tail -n 30 "$WORK/dockerd.log" >&2; DOCKERD_PID=""; \
      fail "dockerd exited while starting (log above)"; }
    sleep 0.5
  done
  tail -n 30 "$WORK/dockerd.log" >&2
  fail "dockerd did not answer on $DOCKER_HOST within 60s (log above)"
}

cleanup() {
  local code=$?
  if [ -n "$COMPOSE_UP" ]; then
    [ "$code" = 0 ] || { say "logs"; compose logs --no-color --tail=40 >&2 || true; }
    compose down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  if [ -n "$DOCKERD_PID" ]; then  # only the daemon this script started, by its pid
    kill "$DOCKERD_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 60); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$DOCKERD_PID" 2>/dev/null || true
    # What the daemon left mounted under its own exec root (its network namespace), so the directory can go.
    awk -v root="$WORK/dockerd/" 'index($2, root) == 1 { print $2 }' /proc/mounts | xargs -r umount -l
  fi
  rm -rf "$WORK"
  exit "$code"
}

# ----- compose and the coordinator's status ------------------------------------------------------------------
# docker-compose.yml with docker/compose.hostnet.yml, less the coordinator's published port and the services'
# networks: under host networking compose v1 refuses a published port, and `networks` beside `network_mode`, and
# an override file can add keys but never drop them. The base file without them is written beside the original
# (relative paths in it resolve from there). `docker-compose config` substitutes the environment
# (RLFLEET_LEARNERS, RLFLEET_OVERRIDES) when it renders.
render_compose() {
  local base="$ROOT/.e2e-compose-base.yml"
  /usr/bin/python3 - docker-compose.yml "$base" <<'EOF'
import sys, yaml  # PyYAML: docker-compose v1's own dependency, in the interpreter it runs on
with open(sys.argv[1]) as fh:
    doc = yaml.safe_load(fh)
for spec in doc["services"].values():
    spec.pop("ports", None)
    spec.pop("networks", None)
doc.pop("networks", None)
with open(sys.argv[2], "w") as fh:
    yaml.safe_dump(doc, fh, sort_keys=False)
EOF
  docker-compose -f "$base" -f docker/compose.hostnet.yml config >"$COMPOSE_FILE"
  rm -f "$base"
}

compose() { docker-compose -p "$PROJECT" -f "$COMPOSE_FILE" "$@"; }

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# One Python expression over the status document `s` (GET /v1/status with the read token), printed; exit 1
# when the coordinator does not answer. Never through a proxy: the coordinator is on 127.0.0.1.
status() {
  E2E_EXPR="$1" "$PY" - <<'EOF'
import json, os, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
req = urllib.request.Request(os.environ["E2E_URL"] + "/v1/status",
                             headers={"Authorization": "Bearer " + os.environ["E2E_READ_TOKEN"]})
try:
    s = json.load(opener.open(req, timeout=5))
except Exception:
    sys.exit(1)
print(eval(os.environ["E2E_EXPR"], {"s": s}))
EOF
}

# Wait until the status expression is True; the run ending otherwise (not solved) is a failure.
wait_for() {
  local what="$1" expr="$2" deadline=$((SECONDS + TIMEOUT))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(status "$expr" 2>/dev/null)" = True ] && return
    if [ "$(status 's["run_state"] not in ("running", "solved")' 2>/dev/null)" = True ]; then
      fail "the run ended before $what: $(status 's["run_state"] + ": " + s["run_message"]')"
    fi
    sleep 0.5
  done
  fail "timed out after ${TIMEOUT}s waiting for $what; status: $(status 's' 2>&1 | head -c 2000)"
}

read_token() {
  local deadline=$((SECONDS + TIMEOUT))
  while [ $SECONDS -lt $deadline ]; do
    E2E_READ_TOKEN="$(compose exec -T coordinator python -c \
      'import json; print(json.load(open("/secrets/all/tokens.json"))["read"])' 2>/dev/null)" && return
    sleep 0.5
  done
  fail "no read token from the coordinator's container within ${TIMEOUT}s"
}

container_of() { compose ps -q "$1" | head -n1; }

# ----- the run -----------------------------------------------------------------------------------------------
# A learner group of 2 in containers: the c10d rendezvous on the host network's loopback (each rank's agent finds
# that it is the host; the first binds the port on 127.0.0.1 and the other joins it: learner_worker/rendezvous.py),
# both ranks training one policy.
learner_group() {
  say "a learner group of 2: RLFLEET_LEARNERS=2, learner.replicas=2"
  local t rdzv
  rdzv="$(free_port)"
  COMPOSE_FILE="$WORK/compose-group.yml"
  # A version is written only once env steps were acknowledged since the last (learner_worker/trainer.py), and at
  # the default 32 samples per inserted transition the rate limiter lets collectors in only every ~2,000 updates:
  # the group needed 150 s here to reach v3. At 8 samples per transition and a 1,024-transition band, 800 updates
  # (17 s through `rlfleet up`). The group's mechanics are the same.
  local overrides="learner.replicas=2;learner.rendezvous=127.0.0.1:$rdzv"
  overrides+=";replay.samples_per_insert=8;replay.tolerance_transitions=1024"
  RLFLEET_LEARNERS=2 RLFLEET_OVERRIDES="$overrides" render_compose
  t="$(now)"
  compose up -d --scale evaluator=0 2>>"$WORK/compose.log" \
    || { cat "$WORK/compose.log" >&2; fail "docker-compose up of the learner group failed"; }
  read_token  # `down -v` removed the tokens volume: this up made new tokens
  [ "$(compose ps -q learner | wc -l)" = 2 ] || fail "compose did not start 2 learner containers"
  wait_for "both ranks holding their tasks" \
    's["learner"]["world_size"] == 2 and all(r["worker_id"] for r in s["learner"]["ranks"])'
  say "group formed ($(since "$t")s after up): $(status '", ".join(r["task_id"] + " held by " + r["worker_id"] for r in s["learner"]["ranks"])')"
  wait_for "the group to train and publish" 's["learner"]["iteration"] >= 300 and s["policy_version"] >= 3'
  local c joined=0
  for c in $(compose ps -q learner); do
    docker logs "$c" >"$WORK/group-learner.log" 2>&1  # a file: `| grep -q` would SIGPIPE docker under pipefail
    grep -q "joined the learner group as rank [01] of 2" "$WORK/group-learner.log" && joined=$((joined + 1))
  done
  [ "$joined" = 2 ] || fail "$joined of 2 learner containers joined the group (docker logs)"
  say "learner group trained: $(status '"{} updates, policy v{}, {:,} transitions trained, {:.1f}s of run time".format(s["learner"]["iteration"], s["policy_version"], s["learner"]["transitions_trained"], s["wall_seconds"])')"
  group_s="$(since "$t")"
  compose down -v --remove-orphans >/dev/null 2>&1
}

# docker build of docker/Dockerfile, offline, with the given options (the target and tag).
build_image() {
  docker build --network none -f docker/Dockerfile --build-arg BASE_IMAGE="$BASE_IMAGE" "$@" . \
    >>"$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log" >&2; fail "docker build failed"; }
}

main() {
  local build_only=0
  case "${1:-}" in
    "") ;;
    --build-only) build_only=1 ;;
    *) fail "unknown argument $1 (the only one is --build-only)" ;;
  esac
  mkdir -p "$CACHE"
  exec 8>"$CACHE/e2e.lock"
  flock 8  # one e2e at a time per cache: the daemon's data root is shared between runs
  trap cleanup EXIT
  trap "exit 130" INT
  trap "exit 143" TERM
  install_tools
  start_engine

  local t base_s build_s base_how
  t="$(now)"
  base_how="$(bash docker/base-image.sh "$BASE_IMAGE" | tail -n1)"
  base_s="$(since "$t")"
  echo "$base_how"
  PYTHON="$PY" bash docker/wheelhouse.sh
  say "building rlfleet:latest from docker/Dockerfile (base $BASE_IMAGE, offline: --network none)"
  t="$(now)"
  # The build stage is tagged too: the legacy builder's layer cache is its images, and an untagged build stage is
  # dangling, so the prune below deleted it and every later build ran the stage's pip install again (186 s here,
  # though nothing had changed). The second build finds every step of the first in that cache.
  build_image --target build -t rlfleet-build:latest
  build_image -t rlfleet:latest
  build_s="$(since "$t")"
  # The images this build replaced are left untagged in the cached data root: without this, every run on one
  # machine kept its ~1 GB of layers (44 GB here after a few dozen runs, until the disk filled).
  docker image prune --force >/dev/null
  if [ "$build_only" = 1 ]; then
    echo "base image: ${base_s}s ($base_how)"
    echo "project image: ${build_s}s (docker build from the wheelhouse)"
    echo "e2e build done"
    return
  fi

  export RLFLEET_PORT E2E_URL E2E_READ_TOKEN
  RLFLEET_PORT="$(free_port)"
  E2E_URL="http://127.0.0.1:$RLFLEET_PORT"
  # The first run also feeds both experiment trackers (the image's wandb and mlflow extras): W&B offline and MLflow's
  # SQLite store, inside the coordinator's container.
  RLFLEET_OVERRIDES="tracking.wandb.project=e2e;tracking.mlflow.experiment=e2e" render_compose
  COMPOSE_UP=1
  compose down -v --remove-orphans >/dev/null 2>&1 || true  # leftovers of an interrupted earlier run
  # The evaluator is held back until the checks below have passed: a run can be solved within 8 chunks (seen
  # in CI), before a third collector finishes its first 2,048-step chunk or the killed learner is back, and
  # without an evaluator nothing can end the run. The second run, undisturbed, gives the time to solve.
  say "docker-compose up without the evaluator: coordinator on $E2E_URL, every service on the host network"
  t="$(now)"
  compose up -d --scale evaluator=0 2>"$WORK/compose.log" \
    || { cat "$WORK/compose.log" >&2; fail "docker-compose up failed"; }
  if [ -n "$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")" ]; then
    fail "compose created a Docker network; every service must be on the host network"
  fi
  read_token
  wait_for "the first chunk acknowledged" 's["run_state"] == "running" and s["env_steps"] > 0'
  local run1
  run1="$(status 's["run_name"]')"
  say "run $run1 is collecting ($(since "$t")s after up)"

  say "scaling to 3 collectors mid-run"
  compose up -d --no-recreate --scale collector=3 --scale evaluator=0 2>>"$WORK/compose.log"

  local checkpoint_every learner pid iteration old_id
  checkpoint_every="$(awk '$1 == "checkpoint_every:" { print $2 }' configs/cartpole_dqn.yaml)"
  wait_for "the learner's first checkpoint" "s['learner']['iteration'] >= $checkpoint_every"
  learner="$(container_of learner)"
  pid="$(docker inspect -f '{{.State.Pid}}' "$learner")"
  old_id="$(status '[w["worker_id"] for w in s["workers"] if w["kind"] == "learner"][0]')"
  iteration="$(status 's["learner"]["iteration"]')"
  say "SIGKILL to the learner's process (host pid $pid) at iteration $iteration"
  kill -9 "$pid"

  wait_for "a new learner registration" \
    "any(w['kind'] == 'learner' and w['worker_id'] != '$old_id' for w in s['workers'])"
  local restarts
  restarts="$(docker inspect -f '{{.RestartCount}}' "$learner")"
  [ "$restarts" -ge 1 ] || fail "Docker did not restart the learner (RestartCount $restarts)"
  local deadline=$((SECONDS + TIMEOUT))
  until docker logs "$learner" >"$WORK/learner.log" 2>&1 && grep -q "resumed from iteration" "$WORK/learner.log"; do
    [ $SECONDS -lt $deadline ] || fail "the restarted learner did not resume from a checkpoint"
    sleep 0.5
  done
  say "learner restarted by its policy (RestartCount $restarts): $(grep -o 'resumed from iteration.*' \
    "$WORK/learner.log" | tail -n1)"

  wait_for "a third collector with chunks acknowledged" \
    'len([w for w in s["workers"] if w["kind"] == "collector" and w["buffered_chunks"] > 0]) >= 3'
  say "status: $(status '", ".join(w["worker_id"] + " " + str(w["buffered_chunks"]) + " chunks" for w in s["workers"] if w["kind"] == "collector")')"

  say "the evaluator joins"
  compose up -d --no-recreate --scale collector=3 2>>"$WORK/compose.log"
  wait_for "the run to be solved" 's["run_state"] == "solved"'
  local solve_s
  solve_s="$(since "$t")"
  say "run $run1 solved: $(status '"{} after {:,} env steps, {:.1f}s of run time".format(s["run_message"],
    s["env_steps"], s["wall_seconds"])')"
  [ "$(status 'sorted(t["name"] for t in s["trackers"] if t["state"] != "failed" and t["written"] > 0)')" \
    = "['mlflow', 'wandb']" ] || fail "the trackers did not both write: $(status 's["trackers"]')"
  say "trackers: $(status '", ".join("{} {} scalars".format(t["name"], t["written"]) for t in s["trackers"])')"

  # The second run is also the undisturbed figure to compare with `rlfleet up`: same config, same seed.
  say "second docker-compose up after the solve: a new run"
  compose stop >/dev/null 2>&1
  render_compose  # without the trackers: the same run as `rlfleet up`'s below
  t="$(now)"
  compose up -d 2>>"$WORK/compose.log"
  wait_for "a new run that trains" "s['run_name'] != '$run1' and s['run_state'] == 'running' and s['env_steps'] > 0"
  local run2 clean_s
  run2="$(status 's["run_name"]')"
  say "new run $run2 is training"
  wait_for "the new run to be solved" 's["run_state"] == "solved"'
  clean_s="$(since "$t")"
  say "run $run2 solved: $(status '"{:,} env steps, {:.1f}s of run time".format(s["env_steps"], s["wall_seconds"])')"
  compose down -v --remove-orphans >/dev/null 2>&1

  learner_group
  COMPOSE_UP=""

  local up_s="not measured ($PY cannot import rlfleet)"
  if [ "$COMPARE" = 0 ]; then
    up_s="not measured (RLFLEET_E2E_COMPARE=0)"
  elif "$PY" -c 'import rlfleet.launcher' 2>/dev/null; then
    say "the same default run with rlfleet up (local processes), for comparison"
    t="$(now)"
    "$PY" -m rlfleet.launcher up --data-dir "$WORK/up-data" --port 0 >"$WORK/up.log" 2>&1 \
      || { tail -n 20 "$WORK/up.log" >&2; fail "rlfleet up did not solve"; }
    up_s="$(since "$t")s"
  fi
  say "figures"
  echo "base image: ${base_s}s ($base_how)"
  echo "project image: ${build_s}s (docker build from the wheelhouse)"
  echo "solve in containers: ${clean_s}s from docker-compose up to solved (the second run)"
  echo "solve in containers, first run: ${solve_s}s (learner SIGKILLed, a third collector, evaluator held back)"
  echo "solve with rlfleet up: $up_s from launch to solved"
  echo "learner group of 2 in containers: ${group_s}s from docker-compose up to 300 updates and policy v3"
  echo "e2e passed"
}

main "$@"
