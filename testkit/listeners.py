"""The TCP ports a process listens on, and on which address, from /proc (no ss or lsof needed)."""

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"


def _address(hex_address: str) -> str:
    """/proc/net/tcp{,6}'s address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    address = ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)  # an IPv4 address on a dual-stack socket


def listeners(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket ``pid`` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and inode in inodes:
                address, port = local.rsplit(":", 1)
                found.add((_address(address), int(port, 16)))
    return found


def loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback
