"""Starting a learner group: `rlfleet learner` with `learner.replicas` > 1 runs torchrun's elastic agent.

One `rlfleet learner` process runs per rank (one compose service or Kubernetes pod each). It reads the run's config
from the coordinator and, for a group, becomes a torch.distributed elastic agent (torch.distributed.run, the
torchrun that ships with torch): nnodes = replicas agents meet at the c10d rendezvous `learner.rendezvous`, whose
host serves its store (bound to that address alone: learner_worker/rendezvous.py), each starts one worker,
`rlfleet learner` again, now a rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set
(learner_worker/distributed.py joins them). When any rank fails, every agent
restarts its worker in a new rendezvous round, up to `learner.group_restarts` times: the group re-forms and all
ranks resume from the newest checkpoint, which rank 0 alone writes.

The coordinator only publishes the rendezvous and shows the ranks; torchrun owns them. Each rank registers with a
fixed request id (its run and rank), so a restarted rank gets back the worker and the learner task it held.
"""

from __future__ import annotations

import logging
import os
import socket
import time

from rlfleet.learner_worker import rendezvous
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.wire import RunResponse
from rlfleet.shared.worker.client import CoordinatorClient
from rlfleet.shared.worker.settings import WorkerSettings

log = logging.getLogger("rlfleet.learner")
RANK_ENV = "TORCHELASTIC_RUN_ID"  # set by torchrun's agent in every worker it starts


def is_rank() -> bool:
    """Whether this process is a learner group's rank that torchrun started (not the agent)."""
    return RANK_ENV in os.environ


def rank_registration() -> str | None:
    """A rank's fixed registration request id (see the module doc); None outside a group."""
    if not is_rank():
        return None
    return f"{os.environ[RANK_ENV]}.rank-{os.environ['RANK']}"[:128]


def run_config(settings: WorkerSettings) -> RunConfig:
    """The run's resolved config, as the coordinator holds it (a learner token may read it)."""
    client = CoordinatorClient(settings.coordinator_url, settings.resolve_token("learner"),
                               timeout=settings.http_timeout_seconds,
                               max_unavailable_seconds=settings.max_unavailable_seconds)
    try:
        return client.call("GET", "/v1/run", RunResponse).config
    finally:
        client.close()


def agent_args(config: RunConfig, local_address: str) -> list[str]:
    """torchrun's arguments for this run's learner group: its worker is `rlfleet learner` again, as a rank. The
    rendezvous is torch's c10d one over a store bound to one address (learner_worker/rendezvous.py), and
    `local_address` (this learner's `group_address`) becomes MASTER_ADDR when this learner is a round's rank 0."""
    learner = config.learner
    timeout = round(learner.rendezvous_timeout_seconds)
    return [f"--nnodes={learner.replicas}", "--nproc-per-node=1", f"--rdzv-backend={rendezvous.BACKEND}",
            f"--rdzv-endpoint={learner.rendezvous}", f"--rdzv-id={config.name}",
            f"--rdzv-conf=join_timeout={timeout}", f"--local-addr={local_address}",
            f"--max-restarts={learner.group_restarts}", "--module", "rlfleet.launcher", "learner"]


class RendezvousUnreachable(RuntimeError):
    pass


def wait_for_rendezvous(endpoint: str, timeout: float, poll: float = 1.0) -> None:
    """Return once this learner can take part in the rendezvous at `endpoint` (host:port): at once when this
    machine is its host (torchrun then serves the store here), else when the host resolves and accepts a TCP
    connection. Ranks may start in any order, so a name that does not resolve yet (a compose service or
    Kubernetes pod still starting) or a refused connection is retried until `timeout`; then RendezvousUnreachable
    says which, instead of torchrun's C++ trace after its own timeouts."""
    from torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname  # torch's own "am I host"

    host, _, port = endpoint.rpartition(":")
    deadline = time.monotonic() + timeout
    while True:
        try:
            if _matches_machine_hostname(host):
                return
            with socket.create_connection((host, int(port)), timeout=min(poll, 5.0)):
                return
        except OSError as exc:  # socket.gaierror (no such name yet) included
            problem = (f"{host} does not resolve ({exc.strerror or exc})" if isinstance(exc, socket.gaierror)
                       else f"nothing accepts connections at {endpoint} ({exc.strerror or exc})")
        if time.monotonic() >= deadline:
            raise RendezvousUnreachable(
                f"learner.rendezvous={endpoint} unreachable after {timeout:.0f} s: {problem}. Start the learner on "
                f"the host it names (it serves the rendezvous), or set learner.rendezvous to that learner's "
                f"host:port (learner.rendezvous_timeout_seconds bounds this wait)")
        time.sleep(poll)


def run_agent(config: RunConfig) -> int:
    """Run torchrun's elastic agent until the group's workers end; their exit status, or 1."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError
    from torch.distributed.run import parse_args, run

    learner = config.learner
    log.info("starting a learner group rank: %d ranks meet at %s (torchrun, c10d rendezvous %r)",
             learner.replicas, learner.rendezvous, config.name)
    # Each round's rank 0 serves the group's store on a fresh port, instead of every round sharing the rendezvous
    # store: there a rank restarted after a failure and one restarted for the membership change (torch counts
    # these differently) met the previous round's keys and waited for peers that were gone (measured, torch 2.13).
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    try:
        wait_for_rendezvous(learner.rendezvous, learner.rendezvous_timeout_seconds)
        rendezvous.register()
        run(parse_args(agent_args(config, rendezvous.group_address(learner.rendezvous))))
    except RendezvousUnreachable as exc:
        log.error("%s", exc)
        return 1
    except ChildFailedError as exc:
        log.error("the learner group failed after %d re-forms: %s", learner.group_restarts, exc.format_msg())
        return 1
    except RendezvousError as exc:
        log.error("learner group rendezvous at learner.rendezvous=%s failed (unreachable, or fewer than %d "
                  "learners started): %s", learner.rendezvous, learner.replicas, exc)
        return 1
    return 0
