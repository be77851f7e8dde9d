"""``python -m testkit.dra --config dra.json --kubelet-dir DIR --kubeconfig FILE``: serve a node's
DRA drivers to its kubelet and publish their ResourceSlices until SIGTERM; SIGHUP re-reads the
configuration. One line per call on stdout."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from testkit.dra.driver import DriverProcess


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.dra", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="dra.json (generation, node and NodeDRA)")
    parser.add_argument("--kubelet-dir", type=Path, required=True, help="the kubelet's root dir, as this host sees it")
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where the slices are published")
    args = parser.parse_args(argv)
    if not args.config.is_file():
        parser.error(f"no configuration {args.config}")
    asyncio.run(DriverProcess(args.config, args.kubelet_dir, args.kubeconfig).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
