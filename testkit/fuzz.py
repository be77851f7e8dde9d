"""Bounded random mutation of real inputs for the offline commands, and a runner that counts what
must never happen: tracebacks, hangs, and errors that are not one clear ``toposched CMD:`` line.

Each case starts from real examples (the repo's manifests, sysfs trees modelled on real machines,
a kubelet configuration), applies one to three mutations -- a value swapped for garbage, a key
dropped, a list turned into a scalar, the YAML text cut or spliced, a sysfs file turned into a
directory, a FIFO, binary data or a huge file -- and runs the command in process. A case is a
function of (command, seed, index) alone, so any finding can be replayed.

``python -m testkit.fuzz`` (``hack/fuzz.sh``) runs a long campaign on every core, each case under a
timeout, with a watchdog that kills a worker stuck beyond it; the tests run a few hundred cases.
"""

import argparse
import contextlib
import copy
import io
import multiprocessing
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testkit import sysfs
from testkit.builders import node_body
from testkit.nrt import nrt as random_nrt
from testkit.paths import EXAMPLES, UPSTREAM_FIXTURES

COMMANDS = ("explain", "netcost", "nrt", "order")
MEMORY_LIMIT = 3 * 2**30
"""Address space of a campaign worker: a case that reads /dev/zero to the end meets MemoryError."""

# Values the mutators put where a real one was: the findings and their relatives.
GARBAGE: tuple[object, ...] = (
    "abc", "", " ", "²", "--5", "-5", "-1", "0", "1e999999", "1e999999999", "1e99999999999", "-1e999999",
    "9Pi", "5Pi", "1e-999999999", ".5", "1.", "0x10", "1_000", "\u0661\u0662", "10%", "nan", ".nan", "inf", "NaN",
    "0-99999999", "99999999-0", "0-3,,5", "hugepages-0kB", "node-²", "a" * 300, "x" * 70_000, "\x00",
    "é", "null", "true", "[]", "{}", "-", "*", "10000", "8193", "255", "256", "11", "10",
    0, 1, -1, -5, 10, 255, 256, 8193, 2**63, -(2**63), 2**200, 1.5, -0.5, float("nan"), float("inf"), 1e308,
    True, False, None, [], {}, [1, 2], ["a", {"b": None}], {"a": 1}, {"name": 5}, 5,
)  # fmt: skip
YAML_SPLICES = (
    ":", "- ", "[", "]", "{", "}", "&a ", "*a", "!!binary ", "!!python/object:os.system ", "\t", "'", '"',
    "? ", "%YAML 1.1\n", "---\n", "...\n", "\\", "#", "|", ">", "\x00", "\x85", "é", "2024-02-30",
    "[" * 200, "- " * 200, "a: &a [*a]\n", "0" * 5000,
)  # fmt: skip
SYSFS_CONTENTS: tuple[str | bytes, ...] = (
    "²", "--5", "-1", "-2", "0", "abc", "", "\n", "0-99999999", "0-8191", "0-8192", "99999999999999999999",
    "1,,2", "3-1", "Node 0 MemTotal: lots kB", "Node 0 MemTotal: 99999999999999999 kB", "MemTotal: 5 MB",
    "MemTotal: -5 kB", "10 -21", "10 21 31", "0 0", "255 10", "10 300", "10 10", "\u0661", "4294967296",
    "400000", "10000001", b"\xff\xfe\x00\x01", b"\x00\x00", "x" * 70_000,
)  # fmt: skip


@dataclass
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    error: str | None = None
    """``Type at file:line`` of an exception that escaped the command (``detail`` has its message)."""
    detail: str = ""
    hang: bool = False
    seconds: float = 0.0


@dataclass
class Case:
    command: str
    argv: list[str]
    note: str
    """What was mutated, for a person replaying the case."""


class _Timeout(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in the command swallows it."""


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


def run(argv: Sequence[str], timeout: float = 10.0) -> Outcome:
    """``toposched ARGV`` in this process, its output captured, under an alarm of ``timeout`` seconds."""
    from toposched.cli import main

    out, err = io.StringIO(), io.StringIO()
    outcome = Outcome(code=None, stdout="", stderr="")
    previous = signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                outcome.code = main(list(argv))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except _Timeout:
        outcome.hang = True
    except SystemExit as exc:  # argparse: a usage error is exit 2 with its own message
        outcome.code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "toposched" in f.filename] or [
            traceback.extract_tb(exc.__traceback__)[-1]
        ]
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}"
        outcome.error = f"{type(exc).__name__} at {where}"
        outcome.detail = " ".join(str(exc).split())[:200]
    finally:
        signal.signal(signal.SIGALRM, previous)
    outcome.seconds = time.perf_counter() - started
    outcome.stdout, outcome.stderr = out.getvalue(), err.getvalue()
    return outcome


def problems(command: str, outcome: Outcome) -> list[str]:
    """What is wrong with an outcome: every bad input must end in a clear line and a non-zero exit.

    Each problem is said the same way whenever it recurs (the line or message is in ``evidence``),
    so that a campaign counts distinct problems."""
    found = []
    if outcome.hang:
        found.append("hang")
    if outcome.error is not None:
        found.append(f"traceback: {outcome.error}")
    if "Traceback (most recent call last)" in outcome.stderr:
        found.append("traceback printed")
    if "errors.pydantic.dev" in outcome.stderr:
        found.append("a link in an error message")
    if outcome.code not in (0, 1, 2, None):
        found.append(f"exit status {outcome.code}")
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    if outcome.code not in (0, None) and not lines:
        found.append(f"exit {outcome.code} without a message")
    unclear = [line for line in lines if not line.startswith(("toposched ", "usage: toposched"))]
    if unclear and outcome.code != 2:  # argparse's usage text spans lines of its own
        found.append("unclear error line")
    return found


def evidence(outcome: Outcome) -> str:
    """What a person replaying a case looks at first: the exception's message, or stderr."""
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    return outcome.detail or " | ".join(lines[:3])[:300]


# --- mutation of parsed documents and of their text -----------------------------------------


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def mutate_tree(doc: Any, rng: random.Random) -> tuple[Any, str]:
    """One structural mutation of a JSON-like document (a copy): what changed, said briefly."""
    doc = copy.deepcopy(doc)
    paths = list(_paths(doc))
    path = rng.choice(paths[1:] or paths)
    garbage = copy.deepcopy(rng.choice(GARBAGE))
    if not path:
        return garbage, f"document -> {garbage!r:.40}"
    parent, key = _get(doc, path[:-1]), path[-1]
    op = rng.randrange(6)
    if op == 0 and isinstance(parent, dict):
        del parent[key]
        return doc, f"{path} deleted"
    if op == 1 and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
        return doc, f"{path} duplicated"
    if op == 2:
        parent[key] = [parent[key]] if rng.random() < 0.5 else {"x": parent[key]}
        return doc, f"{path} wrapped"
    if op == 3 and isinstance(parent[key], dict):
        parent[key][rng.choice(["data", "items", "spec", "zones", "containers", "resources", "name"])] = garbage
        return doc, f"{path} key added: {garbage!r:.40}"
    parent[key] = garbage
    return doc, f"{path} -> {garbage!r:.40}"


def mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    """One textual mutation: a cut, a splice of YAML syntax, a line dropped or repeated."""
    if not text:
        return rng.choice(YAML_SPLICES), "empty text spliced"
    at = rng.randrange(len(text))
    op = rng.randrange(4)
    if op == 0:
        return text[:at], f"cut at {at}"
    if op == 1:
        splice = rng.choice(YAML_SPLICES)
        return text[:at] + splice + text[at:], f"{splice!r:.20} spliced at {at}"
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    if op == 2:
        return "".join(lines[:i] + lines[i + 1 :]), f"line {i + 1} dropped"
    return "".join(lines[: i + 1] + lines[i:]), f"line {i + 1} repeated"


_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(docs: list[Any]) -> str:
    return str(yaml.dump_all(docs, Dumper=_DUMPER, allow_unicode=True, sort_keys=False))


def mutated_file(path: Path, docs: list[Any], rng: random.Random) -> str:
    """Write ``docs`` to ``path`` after 1-3 mutations (tree, text or bytes); what changed."""
    notes = []
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(docs))
        docs[i], note = mutate_tree(docs[i], rng)
        notes.append(note)
    try:
        text = _dump(docs)
    except yaml.YAMLError:
        text = repr(docs)
    roll = rng.random()
    if roll < 0.3:
        text, note = mutate_text(text, rng)
        notes.append(note)
    if roll > 0.97:
        path.write_bytes(text.encode()[: rng.randrange(1, 64)] + bytes([rng.randrange(256)]) * 3)
        notes.append("raw bytes")
    else:
        path.write_text(text)
    return f"{path.name}: {'; '.join(notes)}"


def garbled(doc: Any, seed: int, rounds: int = 2) -> Any:
    """``doc`` after ``rounds`` mutations chosen by ``seed`` (for property tests of the parsers)."""
    rng = random.Random(seed)
    for _ in range(rounds):
        doc, _ = mutate_tree(doc, rng)
    return doc


def one_line(message: str) -> bool:
    """What every parse error must be: one line, something said, no link to a library's pages."""
    return bool(message.strip()) and "\n" not in message and "http" not in message


def parse_error(parse: Callable[[], object]) -> str | None:
    """None when ``parse`` succeeds, else its ValueError's message, as a person would read it; any
    other exception propagates (and fails the test that called this)."""
    from toposched.apis.errors import describe

    try:
        parse()
    except ValueError as exc:  # pydantic's ValidationError is one: one line per problem, joined
        return describe(exc)
    return None


# --- the commands' inputs --------------------------------------------------------------------


def _load(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@dataclass
class Seeds:
    """Real inputs every case starts from."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    nrts: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    appgroups: list[dict[str, Any]] = field(default_factory=list)
    networktopologies: list[dict[str, Any]] = field(default_factory=list)
    configmap: dict[str, Any] = field(default_factory=dict)
    kubelet: dict[str, Any] = field(default_factory=dict)


def seeds() -> Seeds:
    rng = random.Random(7)
    nrts = [
        *_load(EXAMPLES / "noderesourcetopology-worker-1.yaml"),
        *_load(UPSTREAM_FIXTURES / "noderesourcetopology.yaml"),
    ]
    nrts += [random_nrt(f"worker-{i + 2}", rng) for i in range(3)]
    zones = {"worker-1": ("us-west-1", "z1"), "worker-2": ("us-west-1", "z2"), "worker-3": ("us-east-1", "z3")}
    zones["worker-4"] = ("us-east-1", "z4")
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "250"}
    capacity = {"cpu": "64", "memory": "256Gi", "network.aware.com/bandwidth": "25G"}
    nodes = [
        node_body(name, region=region, zone=zone, allocatable=allocatable, capacity=capacity)
        for name, (region, zone) in zones.items()
    ]
    member: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "frontend-0",
            "namespace": "default",
            "labels": {"appgroup.diktyo.x-k8s.io": "online-boutique", "appgroup.diktyo.x-k8s.io.workload": "frontend"},
            "annotations": {"scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy": "SingleNUMANode"}'},
        },
        "spec": {
            "containers": [
                {"name": "app", "resources": {"limits": {"cpu": "4", "memory": "8Gi", "example.com/vf": "1"}}},
            ],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "500m"}}}],
        },
    }
    bound = copy.deepcopy(member)
    bound["metadata"].update(name="cartservice-0", annotations={"toposched.io/numa-zones": '["node-1"]'})
    bound["metadata"]["labels"]["appgroup.diktyo.x-k8s.io.workload"] = "cartservice"
    bound["spec"]["nodeName"] = "worker-2"
    latency = {}
    names = list(zones)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            latency[f"netperf.p90.latency.milliseconds.origin.{a}.destination.{b}"] = str(rng.randint(1, 60))
    latency["netperf.timestamp.origin.worker-1.destination.worker-2"] = "2024-05-01T10:00:00Z"
    return Seeds(
        pods=[member, bound],
        nrts=nrts,
        nodes=nodes,
        appgroups=[
            *_load(EXAMPLES / "appgroup-online-boutique.yaml"),
            *_load(UPSTREAM_FIXTURES / "appgroup-online-boutique.yaml"),
        ],
        networktopologies=[
            *_load(EXAMPLES / "networktopology.yaml"),
            *_load(UPSTREAM_FIXTURES / "networktopology.yaml"),
        ],
        configmap={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "netperf-metrics"}, "data": latency},
        kubelet={
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "cpuManagerPolicy": "static",
            "memoryManagerPolicy": "Static",
            "topologyManagerPolicy": "single-numa-node",
            "topologyManagerScope": "pod",
            "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
            "reservedSystemCPUs": "0-1",
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi", "hugepages-2Mi": "64Mi"}}],
            "systemReserved": {"memory": "512Mi"},
            "kubeReserved": {"cpu": "500m"},
            "evictionHard": {"memory.available": "100Mi"},
        },
    )


class Builder:
    """Writes one case's input files into a work directory and returns the command line."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.seeds = seeds()
        self._trees: dict[str, Path] = {}
        self._texts: dict[int, str] = {}

    def case(self, command: str, seed: int, index: int) -> Case:
        rng = random.Random(f"{command}/{seed}/{index}")
        case_dir = self.work / "case"
        shutil.rmtree(case_dir, ignore_errors=True)
        case_dir.mkdir(parents=True)
        build: Callable[[random.Random, Path], Case] = getattr(self, f"_{command}")
        return build(rng, case_dir)

    def _files(self, rng: random.Random, case_dir: Path, inputs: dict[str, list[Any]]) -> tuple[dict[str, Path], str]:
        """Each input written to its file; one or two of them mutated (all of them stay readable otherwise)."""
        paths, notes = {}, []
        mutated = set(rng.sample(sorted(inputs), k=min(len(inputs), rng.randint(1, 2))))
        for name, docs in inputs.items():
            path = case_dir / f"{name}.yaml"
            if name in mutated:
                notes.append(mutated_file(path, copy.deepcopy(docs), rng))
            else:
                path.write_text(self._text(docs))
            paths[name] = path
        return paths, "; ".join(notes)

    def _text(self, docs: list[Any]) -> str:
        """The documents as YAML; a seed's text is written once. Only a seed's: a list made for one
        case dies with it, and a later list could take its id (the case would then read another's text)."""
        if not any(docs is seed for seed in vars(self.seeds).values()):
            return _dump(docs)
        key = id(docs)  # the seeds live as long as the builder
        if key not in self._texts:
            self._texts[key] = _dump(docs)
        return self._texts[key]

    def _explain(self, rng: random.Random, case_dir: Path) -> Case:
        s = self.seeds
        inputs: dict[str, list[Any]] = {"pod": [rng.choice(s.pods)], "nrt": s.nrts}
        for name, docs in (
            ("nodes", s.nodes),
            ("pods", s.pods),
            ("appgroup", s.appgroups[:1]),
            ("nt", s.networktopologies[:1]),
        ):
            if rng.random() < 0.6:
                inputs[name] = docs
        if rng.random() < 0.2:  # a List, as kubectl get -o yaml prints
            inputs["nrt"] = [{"apiVersion": "v1", "kind": "List", "items": s.nrts}]
        paths, note = self._files(rng, case_dir, inputs)
        argv = ["explain", "--pod", str(paths["pod"]), "--nrt", str(paths["nrt"])]
        flags = {"nodes": "--nodes", "pods": "--pods", "appgroup": "--appgroup", "nt": "--networktopology"}
        for name, flag in flags.items():
            if name in paths:
                argv += [flag, str(paths[name])]
        argv += rng.choice([[], ["-o", "json"], ["--strategy", "MostAllocated"], ["--strategy", "LeastNUMANodes"]])
        return Case("explain", argv, note)

    def _netcost(self, rng: random.Random, case_dir: Path) -> Case:
        s = self.seeds
        inputs = {"nt": [rng.choice(s.networktopologies)], "cm": [s.configmap], "nodes": s.nodes}
        if rng.random() < 0.3:
            inputs["nodes"] = [{"apiVersion": "v1", "kind": "NodeList", "items": s.nodes}]
        paths, note = self._files(rng, case_dir, inputs)
        argv = ["netcost", "--networktopology", str(paths["nt"]), "--configmap", str(paths["cm"])]
        argv += ["--nodes", str(paths["nodes"]), *rng.choice([[], ["-o", "json"], ["--percentile", "p50"]])]
        return Case("netcost", argv, note)

    def _order(self, rng: random.Random, case_dir: Path) -> Case:
        paths, note = self._files(rng, case_dir, {"appgroup": [rng.choice(self.seeds.appgroups)]})
        argv = ["order", str(paths["appgroup"]), *rng.choice([[], ["-o", "json"], ["--algorithm", "TarjanSort"]])]
        return Case("order", argv, note)

    def _nrt(self, rng: random.Random, case_dir: Path) -> Case:
        kind = rng.choice(["two_socket", "eight_node", "no_numa"])
        template = self._tree(kind)
        shutil.copytree(template, case_dir / "machine", symlinks=True)
        root = case_dir / "machine" / "sys"
        notes = [kind] + [mutate_sysfs(root, rng) for _ in range(rng.randint(1, 3))]
        argv = ["nrt", "--sysfs", str(root), "--node", "fuzz"]
        if rng.random() < 0.5:
            path = case_dir / "kubelet.yaml"
            if rng.random() < 0.5:
                notes.append(mutated_file(path, [copy.deepcopy(self.seeds.kubelet)], rng))
            else:
                path.write_text(_dump([self.seeds.kubelet]))
            argv += ["--kubelet-config", str(path)]
        argv += rng.choice([[], ["-o", "json"]])
        return Case("nrt", argv, "; ".join(notes))

    def _tree(self, kind: str) -> Path:
        """A pristine machine, built once per builder and copied for each case."""
        if kind not in self._trees:
            root = self.work / "templates" / kind
            if kind == "no_numa":
                sysfs.write(root / "sys/devices/system/cpu/online", "0-7\n")
                sysfs.write(root / "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "16\n")
                sysfs.write(root / "sys/class/net/eth0/speed", "10000\n")
                sysfs.write(root / "sys/class/net/eth0/device/numa_node", "-1\n")
                sysfs.write(root / "proc/meminfo", "MemTotal:       16384000 kB\nMemFree:  1 kB\n")
            else:
                getattr(sysfs, kind)(root)
            self._trees[kind] = root
        return self._trees[kind]


def mutate_sysfs(root: Path, rng: random.Random) -> str:
    """One mutation of a sysfs tree: a file's content, its kind (directory, FIFO, loop), or an entry added."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    op = rng.randrange(10)
    if op == 0:  # an entry the kernel could have, with a name no kernel writes
        node = rng.choice(sorted((root / "devices/system/node").glob("node*")) or [root])
        size = rng.choice(["0", "3", "99999999999999", "²", "2048", "64"])
        extra = node / "hugepages" / f"hugepages-{size}kB" / "nr_hugepages"
        try:
            if extra.exists() and not extra.is_file():  # an earlier mutation made it a directory or FIFO
                raise IsADirectoryError(extra)
            sysfs.write(extra, rng.choice(["1", "-1", "99999999999", "x"]))
        except OSError:  # the path is not writable as a file any more: keep the tree as it is
            return f"{extra.relative_to(root)} kept"
        return f"{extra.relative_to(root)} added"
    if not files:
        return "nothing to mutate"
    target = rng.choice(files)
    where = str(target.relative_to(root))
    if op == 1:
        target.unlink()
        target.mkdir()
        return f"{where} -> directory"
    if op == 2:
        target.unlink()
        os.mkfifo(target)
        return f"{where} -> FIFO"
    if op == 3:
        target.unlink()
        target.symlink_to(target.name)
        return f"{where} -> symlink loop"
    if op == 4:
        target.unlink()
        return f"{where} deleted"
    if op == 5:
        target.unlink()
        target.symlink_to("/dev/zero")
        return f"{where} -> /dev/zero"
    content = rng.choice(SYSFS_CONTENTS)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content + rng.choice(["", "\n"]))
    return f"{where} -> {content!r:.30}"


# --- campaigns ---------------------------------------------------------------------------------


@dataclass
class Report:
    command: str
    cases: int = 0
    exits: Counter[int] = field(default_factory=Counter)
    hangs: int = 0
    tracebacks: int = 0
    unclear: int = 0
    findings: dict[str, str] = field(default_factory=dict)
    """Distinct problem -> a case that shows it (the note and the command line)."""
    slowest: float = 0.0

    def add(self, case: Case, outcome: Outcome) -> None:
        self.cases += 1
        self.slowest = max(self.slowest, outcome.seconds)
        if outcome.code is not None:
            self.exits[outcome.code] += 1
        found = problems(case.command, outcome)
        self.hangs += outcome.hang
        self.tracebacks += any(p.startswith("traceback") for p in found)
        self.unclear += any(p.startswith(("unclear", "exit ", "a link")) for p in found)
        for problem in found:
            self.findings.setdefault(problem, f"{evidence(outcome)} <- {case.note} :: {' '.join(case.argv)}")

    def merge(self, other: "Report") -> None:
        self.cases += other.cases
        self.exits.update(other.exits)
        self.hangs += other.hangs
        self.tracebacks += other.tracebacks
        self.unclear += other.unclear
        self.slowest = max(self.slowest, other.slowest)
        for problem, example in other.findings.items():
            self.findings.setdefault(problem, example)

    def summary(self) -> str:
        exits = ", ".join(f"{code}: {n}" for code, n in sorted(self.exits.items()))
        return (
            f"{self.command}: {self.cases} cases, exits {{{exits}}}, {self.tracebacks} tracebacks "
            f"({sum(p.startswith('traceback') for p in self.findings)} distinct), {self.hangs} hangs, "
            f"{self.unclear} unclear messages, slowest case {self.slowest:.2f} s"
        )


def campaign(command: str, cases: int, seed: int = 0, timeout: float = 10.0, start: int = 0, step: int = 1) -> Report:
    """Cases ``start, start + step, ...`` below ``cases`` of ``command``, in this process."""
    report = Report(command)
    with tempfile.TemporaryDirectory(prefix="toposched-fuzz-") as work:
        builder = Builder(Path(work))
        for index in range(start, cases, step):
            case = builder.case(command, seed, index)
            report.add(case, run(case.argv, timeout))
    return report


def _worker(
    command: str, cases: int, seed: int, timeout: float, start: int, step: int, progress: Any, out: Any
) -> None:
    """One process's share of a campaign; ``progress`` holds the case it is on (for the watchdog).
    Its memory is capped, so that a case reading without bound fails there, not the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    report = Report(command)
    with tempfile.TemporaryDirectory(prefix="toposched-fuzz-") as work:
        builder = Builder(Path(work))
        for index in range(start, cases, step):
            progress.value = index
            case = builder.case(command, seed, index)
            report.add(case, run(case.argv, timeout))
    progress.value = cases
    out.put(report)


def parallel(command: str, cases: int, seed: int, timeout: float, workers: int) -> Report:
    """A campaign over ``workers`` processes. A worker silent for longer than ``timeout`` + 30 s is
    stuck where the alarm cannot reach (inside C code): it is killed, its case counted as a hang,
    and a new worker goes on from the next case."""
    context = multiprocessing.get_context("fork")
    results: Any = context.Queue()
    total = Report(command)
    running: dict[int, tuple[Any, Any, float, int]] = {}

    def spawn(slot: int, start: int) -> None:
        progress = context.Value("q", start)
        proc = context.Process(target=_worker, args=(command, cases, seed, timeout, start, workers, progress, results))
        proc.start()
        running[slot] = (proc, progress, time.monotonic(), start)

    for slot in range(workers):
        spawn(slot, slot)
    finished = 0
    while finished < workers:
        time.sleep(1)
        while not results.empty():
            total.merge(results.get())
            finished += 1
        for slot, (proc, progress, since, seen) in list(running.items()):
            current = progress.value
            if current != seen:
                running[slot] = (proc, progress, time.monotonic(), current)
            elif current < cases and time.monotonic() - since > timeout + 30:
                proc.kill()
                proc.join()
                total.cases += 1
                total.hangs += 1
                total.findings.setdefault("hang (worker killed)", f"{command} case {current} (seed {seed})")
                spawn(slot, current + workers)  # reports in its place (an empty report if nothing is left)
            if not proc.is_alive() and current >= cases:
                running.pop(slot)
    while not results.empty():
        total.merge(results.get())
    return total


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testkit.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--command", choices=[*COMMANDS, "all"], default="all")
    parser.add_argument("--cases", type=int, default=100_000, help="cases per command")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds one case may take")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    status = 0
    for command in COMMANDS if args.command == "all" else (args.command,):
        started = time.monotonic()
        report = parallel(command, args.cases, args.seed, args.timeout, args.workers)
        print(f"{report.summary()}; {time.monotonic() - started:.0f} s", flush=True)
        for problem, example in sorted(report.findings.items()):
            print(f"  {problem}\n    e.g. {example}", flush=True)
        status |= bool(report.findings)
    return status


if __name__ == "__main__":
    sys.exit(main())
