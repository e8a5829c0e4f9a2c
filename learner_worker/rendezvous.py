"""Where a learner group's TCP stores listen: on the one address the group reaches them by, not on every interface.

A learner group has two c10d TCPStores: the rendezvous store torchrun's agents meet at (`learner.rendezvous`), and
each round's process-group store, which rank 0 serves at MASTER_ADDR:MASTER_PORT for gloo/NCCL to connect the
ranks. torch's TCPStore server listens on every interface whatever host it is given, and torch's dynamic
rendezvous unpickles the state it keeps in its store: whoever reaches that port runs code in every learner
agent, which holds the learner token and the store's credentials. So rlfleet creates both stores itself, each on
a socket it bound to one address and handed to TCPStore (`master_listen_fd`):

* the rendezvous store is bound to the address `learner.rendezvous`'s host resolves to: 127.0.0.1 under
  `rlfleet up` (which refuses any other unless told `--open-rendezvous`), the learner's address on compose's
  `learners` network, the pod's IP in Kubernetes, where the shipped NetworkPolicy admits learner pods only;
* the process-group store is bound to MASTER_ADDR, which torchrun's agents take from `--local-addr`: each
  learner's `group_address`, the local address it reaches the rendezvous host from (the same network).

gloo's connections between the ranks (NCCL's bootstrap) carry tensors, not pickles, but they too listen on the
group's interface (`pin_transport`) rather than on the address the host name resolves to.

Neither store authenticates its peers: a learner group belongs on a trusted network only
(docs/deployment/learner-groups.md, "Network").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
from datetime import timedelta

from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous import RendezvousHandler, RendezvousParameters
from torch.distributed.elastic.rendezvous import rendezvous_handler_registry as registry
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler
from torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname, parse_rendezvous_endpoint

BACKEND = "rlfleet-c10d"  # torchrun's --rdzv-backend: torch's c10d rendezvous over a store bound to one address
STORE_READ_TIMEOUT = timedelta(seconds=60)  # torch's c10d default for a rendezvous store operation
SIOCGIFADDR = 0x8915  # Linux ioctl: an interface's IPv4 address


def resolve(host: str) -> str:
    """The IPv4 address `host` resolves to (the first, as a connecting peer would take it)."""
    return str(socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0])


def group_address(endpoint: str) -> str:
    """This learner's address on the group's network: the local address it reaches the rendezvous host
    (`host:port`) from, which the kernel's routes choose (connecting a UDP socket sends nothing). It is the
    rendezvous host's own address on the host itself, 127.0.0.1 for a loopback rendezvous."""
    host, port = parse_rendezvous_endpoint(endpoint, default_port=29400)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((resolve(host), port))
        return str(probe.getsockname()[0])


def interface_of(address: str) -> str | None:
    """The name of the network interface that holds the IPv4 `address` (Linux: SIOCGIFADDR per interface), or
    None when none does."""
    wanted = socket.inet_aton(address)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
            except OSError:  # no IPv4 address on this interface
                continue
            if reply[20:24] == wanted:
                return name
    return None


def pin_transport(address: str) -> None:
    """Make gloo (and NCCL's bootstrap) listen on the interface of `address`, this rank's group address, instead
    of the one the host name resolves to, unless the user named one (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME)."""
    interface = interface_of(address)
    if interface is not None:
        for variable in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
            os.environ.setdefault(variable, interface)


def bound_store(address: str, port: int, timeout: timedelta, world_size: int | None = None) -> TCPStore:
    """A TCPStore server listening on `address`:`port` alone. Raises OSError when the port is taken there."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restarted round rebinds at once
        listener.bind((address, port))
        listener.listen(socket.SOMAXCONN)
    except BaseException:
        listener.close()
        raise
    fd = listener.detach()  # the store's server owns the descriptor from here
    try:
        return TCPStore(address, port, world_size, is_master=True, timeout=timeout, master_listen_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            socket.close(fd)
        raise


class BoundC10dBackend(C10dRendezvousBackend):
    """torch's c10d rendezvous backend over a store this module created; only the name differs, which torch's
    handler registry checks against `--rdzv-backend`."""

    @property
    def name(self) -> str:
        return BACKEND


def rendezvous_store(params: RendezvousParameters) -> TCPStore:
    """The rendezvous store: served here, bound to the endpoint's address, when the endpoint names this machine
    and no other learner here serves it yet (`rlfleet up` runs every rank on 127.0.0.1, the first one to bind
    serves); a client of the one serving it otherwise."""
    host, port = parse_rendezvous_endpoint(params.endpoint, default_port=29400)
    timeout = timedelta(seconds=params.get_as_int("read_timeout", int(STORE_READ_TIMEOUT.total_seconds())) or 60)
    if _matches_machine_hostname(host):
        with contextlib.suppress(OSError):
            return bound_store(resolve(host), port, timeout)
    return TCPStore(host, port, is_master=False, timeout=timeout)


def _create_handler(params: RendezvousParameters) -> RendezvousHandler:
    store = rendezvous_store(params)
    return create_handler(store, BoundC10dBackend(store, params.run_id), params)


def register() -> None:
    """Make `--rdzv-backend=rlfleet-c10d` known to torchrun in this process (again: a no-op)."""
    registry.register(BACKEND, _create_handler)


def process_group_store(address: str, port: int, rank: int, world_size: int, timeout: timedelta) -> TCPStore:
    """The store of one round's process group at MASTER_ADDR:MASTER_PORT: rank 0 serves it, bound to that
    address; the other ranks connect to it."""
    if rank == 0:
        return bound_store(address, port, timeout, world_size)
    return TCPStore(address, port, world_size, is_master=False, timeout=timeout)
