"""The learner group's launch: torchrun's arguments from the run config, and each rank's fixed registration."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from rlfleet.launcher.up import free_port
from rlfleet.learner_worker.elastic import RendezvousUnreachable, agent_args, rank_registration, wait_for_rendezvous
from rlfleet.shared.config.run_config import RunConfig
from rlfleet.shared.ids import ID_PATTERN


def test_the_agent_runs_one_rank_per_node_at_the_configured_rendezvous() -> None:
    config = RunConfig.model_validate({"name": "cartpole-dqn__s0", "learner": {
        "replicas": 3, "rendezvous": "rlfleet-learner-0.rlfleet-learner:29500", "group_restarts": 4},
        "algo": {"name": "dqn", "batch_size": 96}})
    assert agent_args(config, "10.1.2.3") == [
        "--nnodes=3", "--nproc-per-node=1", "--rdzv-backend=rlfleet-c10d",
        "--rdzv-endpoint=rlfleet-learner-0.rlfleet-learner:29500", "--rdzv-id=cartpole-dqn__s0",
        "--rdzv-conf=join_timeout=120", "--local-addr=10.1.2.3", "--max-restarts=4",
        "--module", "rlfleet.launcher", "learner"]


def test_a_rank_registers_under_its_run_and_rank_and_a_single_learner_afresh(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert rank_registration() is None
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "cartpole-dqn__s0__20261124-164704")
    monkeypatch.setenv("RANK", "1")
    registration = rank_registration()
    assert registration == "cartpole-dqn__s0__20261124-164704.rank-1"
    assert re.fullmatch(ID_PATTERN.strip("^$"), registration)  # a valid request id on the wire


def test_a_rendezvous_hosted_here_needs_no_wait() -> None:
    wait_for_rendezvous("127.0.0.1:9", timeout=5)  # nothing listens: as a remote host it would raise


def test_a_rendezvous_name_that_never_resolves_is_named_after_the_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(RendezvousUnreachable, match=r"learner.rendezvous=no-such-host.invalid:29400 unreachable "
                                                    r"after 2 s: no-such-host.invalid does not resolve"):
        wait_for_rendezvous("no-such-host.invalid:29400", timeout=2, poll=0.2)
    assert time.monotonic() - started < 10  # not torchrun's own minutes


@pytest.fixture
def remote_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """127.0.0.1 as if it were another machine, so the connect path runs on loopback."""
    from torch.distributed.elastic.rendezvous import utils

    monkeypatch.setattr(utils, "_matches_machine_hostname", lambda host: False)


@pytest.mark.usefixtures("remote_loopback")
def test_a_remote_rendezvous_that_starts_listening_later_is_waited_for() -> None:
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def listen_later() -> None:
        time.sleep(1.0)  # the host's learner starts after this one
        server.bind(("127.0.0.1", port))
        server.listen()

    thread = threading.Thread(target=listen_later)
    thread.start()
    try:
        started = time.monotonic()
        wait_for_rendezvous(f"127.0.0.1:{port}", timeout=10, poll=0.2)
        assert 0.9 < time.monotonic() - started < 5
    finally:
        thread.join()
        server.close()


@pytest.mark.usefixtures("remote_loopback")
def test_a_remote_rendezvous_nobody_listens_on_is_refused_with_its_address() -> None:
    port = free_port()
    with pytest.raises(RendezvousUnreachable, match=f"nothing accepts connections at 127.0.0.1:{port}"):
        wait_for_rendezvous(f"127.0.0.1:{port}", timeout=1, poll=0.2)
