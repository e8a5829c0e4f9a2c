"""This machine's addresses, for tests that a port listens on loopback only."""

from __future__ import annotations

import socket
import subprocess

import pytest


def non_loopback_address() -> str:
    """An IPv4 address of this machine other than loopback (`ip -4 addr`); skips the test when it has none."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        address = line.split()[3].split("/")[0]
        if not address.startswith("127."):
            return address
    pytest.skip("this machine has no non-loopback IPv4 address to try the port on (`ip -4 addr`)")


def reachable(address: str, port: int) -> bool:
    """Whether something accepts a TCP connection at `address`:`port`."""
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False
