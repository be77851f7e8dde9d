"""``python -m testkit.deviceplugin --config devices.json --socket-dir DIR``: serve a node's devices
to its kubelet until SIGTERM; SIGHUP re-reads the devices. One line per call on stdout."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from testkit.deviceplugin.plugin import Plugin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.deviceplugin", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="devices.json (generation and NodeDevices)")
    parser.add_argument("--socket-dir", type=Path, required=True, help="the kubelet's device-plugins directory")
    args = parser.parse_args(argv)
    if not args.config.is_file():
        parser.error(f"no devices file {args.config}")
    asyncio.run(Plugin(args.config, args.socket_dir).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
