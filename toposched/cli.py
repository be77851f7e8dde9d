"""The ``toposched`` command.

Each subcommand lives in its component's package and is imported only when it runs, so
``toposched exporter`` never loads Kopf and ``toposched --help`` loads nothing at all.
A subcommand is a module's ``add_arguments(parser)`` and ``run(args) -> int`` (or the functions
its entry names, when one module serves two commands).
"""

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from toposched import __version__
from toposched.kube.credentials import CredentialsError
from toposched.settings import SettingsError


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    module: str
    add_arguments: str = "add_arguments"
    run: str = "run"


COMMANDS: tuple[Command, ...] = (
    Command("operator", "run the operators (AppGroup order, NetworkTopology costs)", "toposched.operators.cli"),
    Command("exporter", "publish this node's NodeResourceTopology (node daemon)", "toposched.exporter.cli"),
    Command("netperf", "measure latency to peer nodes with netperf and record it", "toposched.netperf.cli"),
    Command("order", "print the placement order of an AppGroup manifest", "toposched.operators.appgroup.cli"),
    Command(
        "nrt",
        "print the NodeResourceTopology of a machine, without a cluster",
        "toposched.exporter.cli",
        add_arguments="add_nrt_arguments",
        run="run_nrt",
    ),
    Command("netcost", "print the network costs the operator would compute", "toposched.operators.networktopology.cli"),
    Command("schedhook", "run the scheduler extender for the toposched profile", "toposched.schedhook.cli"),
    Command("explain", "show per node whether, where and why a pod would be placed", "toposched.schedhook.explain"),
    Command("capacity", "count how many more pods of a shape fit, and where", "toposched.schedhook.capacity"),
)


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched",
        description="Topology-aware Kubernetes scheduling: NUMA zones in nodes, network costs between zones.",
    )
    parser.add_argument("--version", action="version", version=f"toposched {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        if command.name == selected:
            module = importlib.import_module(command.module)
            getattr(module, command.add_arguments)(sub)
            sub.set_defaults(run=getattr(module, command.run))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    selected = args_list[0] if args_list and not args_list[0].startswith("-") else None
    parser = build_parser(selected)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args))
    # No usable kubeconfig or service account, or a TOPOSCHED_* variable that cannot be read:
    # one line, not a traceback (argparse says the same of a bad flag, also with exit 2).
    except (CredentialsError, SettingsError) as exc:
        print(f"toposched {args.command}: {exc}", file=sys.stderr)
        return 2
