"""The learner group's stores listen on the one address the group reaches them by: a loopback rendezvous is not
reachable on this machine's other addresses, as torch's own TCPStore server (every interface) would be."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous import RendezvousParameters

from rlfleet.launcher.up import free_port
from rlfleet.learner_worker import rendezvous
from tests.support.network import non_loopback_address, reachable

TIMEOUT = timedelta(seconds=10)


def params(port: int) -> RendezvousParameters:
    return RendezvousParameters(rendezvous.BACKEND, f"127.0.0.1:{port}", "run", 2, 2)


def test_a_store_bound_to_loopback_is_not_reachable_on_another_address_of_this_machine() -> None:
    other = non_loopback_address()
    port = free_port()
    server = rendezvous.bound_store("127.0.0.1", port, TIMEOUT)
    client = TCPStore("127.0.0.1", port, is_master=False, timeout=TIMEOUT)
    client.set("key", "value")
    assert server.get("key") == b"value"
    assert reachable("127.0.0.1", port) and not reachable(other, port)


def test_torch_s_own_store_server_listens_on_every_interface() -> None:
    """Why the module exists: the same host argument to torch's TCPStore alone leaves the port open elsewhere
    (if torch ever binds to its host argument, this test says so and the module can go)."""
    other = non_loopback_address()
    port = free_port()
    _server = TCPStore("127.0.0.1", port, is_master=True, timeout=TIMEOUT)
    assert reachable(other, port)


def test_the_rendezvous_is_served_by_the_first_learner_here_and_joined_by_the_others() -> None:
    """`rlfleet up` runs every rank on 127.0.0.1: each one's endpoint names this machine, one serves the store
    (bound to loopback) and the others find the port taken there and join it as clients."""
    other = non_loopback_address()
    port = free_port()
    first = rendezvous.rendezvous_store(params(port))
    second = rendezvous.rendezvous_store(params(port))
    second.set("joined", "yes")
    assert first.get("joined") == b"yes"
    assert not reachable(other, port)


def test_rank_0_serves_the_process_group_store_on_master_addr_alone() -> None:
    other = non_loopback_address()
    port = free_port()
    with ThreadPoolExecutor(2) as pool:  # rank 0's server waits for every rank to connect, as in a group
        serving = pool.submit(rendezvous.process_group_store, "127.0.0.1", port, 0, 2, TIMEOUT)
        joining = pool.submit(rendezvous.process_group_store, "127.0.0.1", port, 1, 2, TIMEOUT)
        server, peer = serving.result(), joining.result()
    peer.set("rank1", "here")
    assert server.get("rank1") == b"here"
    assert not reachable(other, port)


def test_the_group_address_is_where_this_machine_reaches_the_rendezvous_from() -> None:
    assert rendezvous.group_address("127.0.0.1:29400") == "127.0.0.1"
    assert rendezvous.group_address("localhost:29400") == "127.0.0.1"
    other = non_loopback_address()
    assert rendezvous.group_address(f"{other}:29400") == other  # this machine's own address: itself


def test_gloo_is_pinned_to_the_interface_of_the_group_address(monkeypatch: pytest.MonkeyPatch) -> None:
    assert rendezvous.interface_of("127.0.0.1") == "lo"
    other = non_loopback_address()
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    (holder,) = [line.split()[1] for line in out.splitlines() if line.split()[3].split("/")[0] == other]
    assert rendezvous.interface_of(other) == holder
    assert rendezvous.interface_of("192.0.2.254") is None or other == "192.0.2.254"  # TEST-NET-1: nobody's
    for variable in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "mine")  # the user's choice stands
    rendezvous.pin_transport("127.0.0.1")
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo" and os.environ["NCCL_SOCKET_IFNAME"] == "mine"
