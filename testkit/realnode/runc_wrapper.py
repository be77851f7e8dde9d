"""A runc in front of the real runc that moves cpusets onto CPUs and memory nodes that exist.

A real node's kubelet believes in its fake topology (say 8 CPUs on 2 NUMA nodes) and asks for
cpusets such as ``cpus: "5-6", mems: "1"``. On a machine with 2 CPUs and one memory node the
kernel refuses them (``cpuset.cpus: numerical result out of range``) and the container never
starts. Each node's containerd runs this wrapper as its runc (``BinaryName``); it rewrites only
``linux.resources.cpu.cpus``/``mems`` of ``create``/``run`` bundles and of ``update`` resources,
projecting fake id ``i`` onto ``real[i % len(real)]``, and then runs the real runc. What the
kubelet decided (admission, its checkpoints, the PodResources API) is untouched; only the
kernel's view changes.

Nodes on one machine share its network and UTS namespaces, so a host-network container would see
the machine's hostname on every node. A machine of its own would show its own name (kube-scheduler's
Lease identity starts with it), so such a container gets a UTS namespace named after its node.

Stdlib only, no third-party import, loaded with ``python3 -S`` on every runc call (about 15 ms).
It is imported by the small per-node launcher testkit.realnode writes, never by the product.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

# runc's global options that take a value (runc --help, 1.1)
_GLOBAL_WITH_VALUE = {"--root", "--log", "--log-format", "--criu", "--rootless"}


def parse_list(text: str) -> list[int]:
    ids: list[int] = []
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            ids.extend(range(int(low), int(high or low) + 1))
    return sorted(set(ids))


def format_list(ids: Sequence[int]) -> str:
    ordered = sorted(set(ids))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def project(text: str, real: Sequence[int]) -> str:
    """Fake id list -> the real ids it lands on (``real[i % len(real)]``); "" stays ""."""
    if not text.strip():
        return text
    return format_list([real[i % len(real)] for i in parse_list(text)])


def rewrite_cpu(cpu: dict[str, Any], cpus: Sequence[int], mems: Sequence[int]) -> list[str]:
    """Rewrite a LinuxCPU dict in place; return what changed, for the log."""
    changes = []
    for key, real in (("cpus", cpus), ("mems", mems)):
        value = cpu.get(key)
        if isinstance(value, str) and value:
            new = project(value, real)
            if new != value:
                cpu[key] = new
                changes.append(f"{key} {value} -> {new}")
    return changes


def subcommand(args: Sequence[str]) -> tuple[int, str] | None:
    """Index and name of runc's subcommand in ``args`` (after the global options)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _GLOBAL_WITH_VALUE:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return i, arg
    return None


def option_value(args: Sequence[str], names: Sequence[str]) -> tuple[int, str] | None:
    """(index of the value, value) of ``--name value`` / ``--name=value`` / ``-n value``."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return i + 1, args[i + 1]
            if arg.startswith(name + "="):
                return i, arg.split("=", 1)[1]
    return None


def own_hostname(spec: dict[str, Any], hostname: str) -> list[str]:
    """Give a container on the host's UTS namespace (the host network's) one of its own named
    ``hostname``, in place; return what changed, for the log."""
    linux = spec.get("linux")
    if not isinstance(linux, dict):
        return []
    namespaces = linux.setdefault("namespaces", [])
    if any(isinstance(n, dict) and n.get("type") in ("network", "uts") for n in namespaces):
        return []  # a pod network's container: the sandbox's namespaces
    namespaces.append({"type": "uts"})
    spec["hostname"] = hostname
    return [f"hostname {hostname}"]


class Wrapper:
    def __init__(
        self, real_runc: str, cpus: Sequence[int], mems: Sequence[int], log: str | None, hostname: str = ""
    ) -> None:
        self.real_runc = real_runc
        self.cpus = list(cpus)
        self.mems = list(mems)
        self.log_path = log
        self.hostname = hostname

    def log(self, line: str) -> None:
        if self.log_path:
            with open(self.log_path, "a") as out:
                out.write(f"{time.strftime('%H:%M:%S')} {line}\n")

    def rewrite_bundle(self, bundle: str, container: str) -> None:
        path = os.path.join(bundle, "config.json")
        with open(path) as f:
            spec = json.load(f)
        cpu = spec.get("linux", {}).get("resources", {}).get("cpu")
        changes = rewrite_cpu(cpu, self.cpus, self.mems) if isinstance(cpu, dict) else []
        if self.hostname:
            changes += own_hostname(spec, self.hostname)
        if changes:
            tmp = path + ".toposched"
            with open(tmp, "w") as f:
                json.dump(spec, f)
            os.replace(tmp, path)
            self.log(f"create {container}: " + ", ".join(changes))

    def run(self, argv: Sequence[str]) -> int:
        args = list(argv[1:])
        found = subcommand(args)
        if found is not None:
            index, name = found
            rest = args[index + 1 :]
            container = rest[-1] if rest else "?"
            if name in ("create", "run"):
                bundle = option_value(rest, ["--bundle", "-b"])
                self.rewrite_bundle(bundle[1] if bundle else os.getcwd(), container)
            elif name == "update":
                return self.update(args, index, container)
        os.execv(self.real_runc, [self.real_runc, *args])
        return 127  # not reached

    def update(self, args: list[str], index: int, container: str) -> int:
        rest = args[index + 1 :]
        for flag, real in (("--cpuset-cpus", self.cpus), ("--cpuset-mems", self.mems)):
            found = option_value(rest, [flag])
            if found is not None:
                at, value = found
                new = project(value, real)
                rest[at] = new if rest[at] == value else f"{flag}={new}"
                self.log(f"update {container}: {flag} {value} -> {new}")
        stdin: bytes | None = None
        resources = option_value(rest, ["--resources", "-r"])
        if resources is not None:
            at, source = resources
            if source == "-":
                raw = sys.stdin.buffer.read()
            else:
                with open(source, "rb") as f:
                    raw = f.read()
            data = json.loads(raw or b"{}")
            cpu = data.get("cpu") if isinstance(data, dict) else None
            if isinstance(cpu, dict):
                changes = rewrite_cpu(cpu, self.cpus, self.mems)
                if changes:
                    self.log(f"update {container}: " + ", ".join(changes))
            stdin = json.dumps(data).encode()
            # Always hand the (possibly rewritten) resources over stdin.
            rest[at] = "-" if rest[at] == source else "--resources=-"
        command = [self.real_runc, *args[: index + 1], *rest]
        if stdin is None:
            return subprocess.run(command).returncode
        return subprocess.run(command, input=stdin).returncode


def main(
    argv: Sequence[str],
    *,
    real_runc: str,
    cpus: Sequence[int],
    mems: Sequence[int],
    log: str | None,
    hostname: str = "",
) -> int:
    return Wrapper(real_runc, cpus, mems, log, hostname).run(argv)
