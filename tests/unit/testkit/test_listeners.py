"""Reading a process's listening sockets from /proc."""

import os
import socket

import pytest

from testkit.listeners import _address, listeners


@pytest.mark.parametrize(
    ("hex_address", "address"),
    [
        pytest.param("0100007F", "127.0.0.1", id="ipv4-loopback"),
        pytest.param("00000000", "0.0.0.0", id="ipv4-any"),
        pytest.param("0A01A8C0", "192.168.1.10", id="ipv4"),
        pytest.param("00000000000000000000000001000000", "::1", id="ipv6-loopback"),
        pytest.param("00000000000000000000000000000000", "::", id="ipv6-any"),
        pytest.param("0000000000000000FFFF00000100007F", "127.0.0.1", id="ipv4-mapped"),
    ],
)
def test_proc_net_tcp_addresses(hex_address: str, address: str) -> None:
    assert _address(hex_address) == address


def test_listeners_of_this_process() -> None:
    with socket.socket() as listening, socket.socket() as bound_only:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        bound_only.bind(("127.0.0.1", 0))
        found = listeners(os.getpid())
        assert ("127.0.0.1", listening.getsockname()[1]) in found
        assert ("127.0.0.1", bound_only.getsockname()[1]) not in found
