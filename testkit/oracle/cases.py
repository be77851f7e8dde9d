"""Seeded cases for the differential test of toposched's admission predictor against real kubelets.

A case is a machine (NUMA zones, SMT, memory, hugepages, distances), the kubelet's resource
manager settings, and a sequence of pods bound to the node one after another until it fills. Case
``i`` of seed ``s`` depends on nothing else, so any case can be replayed alone. Pure: no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from testkit.realnode.devices import Device, DeviceResource, NodeDevices
from testkit.realnode.settings import KubeletSettings, SettingsError
from testkit.realnode.topology import GIB, MIB, Topology, Zone, format_bytes

Spec = dict[str, Any]
"""A pod's spec as the API takes it (containers, initContainers), without node, image or tolerations."""


@dataclass(frozen=True)
class Case:
    number: int
    seed: int
    topology: Topology
    settings: KubeletSettings
    pods: tuple[Spec, ...]
    kinds: tuple[str, ...] = field(default=())
    """What each pod was drawn as (guaranteed, burstable, sidecar, ...), for the report."""
    devices: NodeDevices = field(default_factory=NodeDevices)
    """What the node's device plugin reports."""

    @property
    def label(self) -> str:
        return f"case {self.number} (seed {self.seed})"

    def describe(self) -> str:
        s = self.settings
        options = ",".join(
            f"{k}={v}" for k, v in sorted({**s.topology_manager_policy_options, **s.cpu_manager_policy_options}.items())
        )
        managers = f"cpu {s.cpu_manager_policy} (reserved {s.reserved_system_cpus}), memory {s.memory_manager_policy}"
        policy = f"{s.topology_manager_policy}/{s.topology_manager_scope}" + (f" [{options}]" if options else "")
        devices = f"; devices {' '.join(self.devices.specs())}" if self.devices.resources else ""
        return f"{self.topology.describe()}; {managers}; {policy}{devices}; pods: {', '.join(self.kinds)}"


def generate(seed: int, count: int, first: int = 0) -> list[Case]:
    return [case(seed, number) for number in range(first, first + count)]


def case(seed: int, number: int) -> Case:
    rng = random.Random(f"toposched-oracle:{seed}:{number}")
    for _ in range(100):  # a few draws the kubelet would refuse are drawn again
        topology = _topology(rng)
        settings = _settings(rng, topology)
        try:
            settings.validate(topology)
        except SettingsError:
            continue
        devices = _devices(rng, topology)
        pods, kinds = _pods(rng, topology, settings, devices)
        return Case(number, seed, topology, settings, tuple(pods), tuple(kinds), devices)
    raise AssertionError(f"no valid case drawn for seed {seed}, case {number}")


# -- machines ----------------------------------------------------------------------------------------


def _topology(rng: random.Random) -> Topology:
    count = rng.choices(range(1, 9), weights=[2, 6, 4, 4, 1, 1, 1, 2])[0]
    if rng.random() < 0.03:
        count = rng.randint(9, 12)  # more than 8: the Topology Manager runs only with max-allowable-numa-nodes
    threads = rng.choice((1, 1, 2))
    uneven = rng.random() < 0.4
    same_cores = rng.randint(1, 4)
    with_hugepages = rng.random() < 0.3
    zones = []
    for i in range(count):
        cores = rng.randint(0 if i else 1, 4) if uneven else same_cores
        memory = rng.choice((1, 1.5, 2, 3)) * GIB
        if uneven and cores and i and rng.random() < 0.15:
            memory = 0  # a memory-less zone (CPUs only)
        pages_2mi = rng.choice((0, 32, 64)) if with_hugepages and memory else 0
        pages_1gi = 1 if with_hugepages and memory >= 2 * GIB and rng.random() < 0.3 else 0
        zones.append(Zone(cores, int(memory), pages_2mi, pages_1gi))
    if not any(z.memory for z in zones):
        zones[0] = Zone(zones[0].cores, 2 * GIB)
    distances = _distances(rng, count) if count > 2 and rng.random() < 0.6 else None
    if count % 2 == 0 and rng.random() < 0.4:  # two zones per socket (sub-NUMA clustering)
        zones = [replace(z, socket=i // 2) for i, z in enumerate(zones)]
    return Topology(tuple(zones), threads_per_core=threads, distances=distances)


def _distances(rng: random.Random, count: int) -> tuple[tuple[int, ...], ...]:
    """A symmetric SLIT table: 10 on the diagonal, 11-40 elsewhere, often with ties."""
    values = rng.choice(((11, 12, 20, 21, 32), (12, 21), (11, 16, 21, 28, 40)))
    table = [[10] * count for _ in range(count)]
    for i in range(count):
        for j in range(i + 1, count):
            table[i][j] = table[j][i] = rng.choice(values)
    return tuple(tuple(row) for row in table)


# -- devices -----------------------------------------------------------------------------------------

DEVICE_NAMES = ("example.com/deviceA", "example.com/deviceB", "example.com/gpu")


def _devices(rng: random.Random, topology: Topology) -> NodeDevices:
    """On most machines 1-3 device resources: 0-4 devices per zone, some attached to two zones
    (a NIC between sockets), some without topology, some unhealthy; the plugin offers
    GetPreferredAllocation or not."""
    if rng.random() < 0.25:
        return NodeDevices()
    zones = len(topology.zones)
    resources = []
    for name in rng.sample(DEVICE_NAMES, rng.randint(1, 3)):
        numa: list[tuple[int, ...]] = []
        for z in range(zones):
            numa += [(z,)] * rng.choices(range(5), weights=(3, 4, 3, 2, 1))[0]
        if zones > 1 and rng.random() < 0.35:
            for _ in range(rng.randint(1, 2)):
                z = rng.randrange(zones - 1)
                numa.append((z, z + 1))
        if rng.random() < 0.25:
            numa += [()] * rng.randint(1, 2)
        if not numa:
            numa.append((rng.randrange(zones),))
        rng.shuffle(numa)
        devices = tuple(
            Device(f"{name.rsplit('/', 1)[1]}-{i}", n, healthy=rng.random() >= 0.08) for i, n in enumerate(numa)
        )
        resources.append(DeviceResource(name, devices, preferred_allocation=rng.random() < 0.5))
    return NodeDevices(tuple(resources))


# -- kubelets ----------------------------------------------------------------------------------------


def _settings(rng: random.Random, topology: Topology) -> KubeletSettings:
    # Always the static CPU manager: without it the kubelet writes every CPU of its topology into
    # the kubepods cpuset, which the kernel refuses for CPUs this machine does not have; and a
    # Topology Manager policy without the static CPU manager has no CPU hints to align anyway.
    cpu_policy = "static"
    first_zone_cpus = topology.cpus(next(i for i, z in enumerate(topology.zones) if z.cores))
    reserved = [first_zone_cpus[0]]
    if topology.threads_per_core > 1 and rng.random() < 0.5:
        reserved = topology.siblings(first_zone_cpus[0])  # a whole core, as full-pcpus-only users do
    memory_policy = rng.choices(("Static", "None"), weights=(60, 40))[0]
    policy = rng.choices(("none", "best-effort", "restricted", "single-numa-node"), weights=(10, 25, 30, 35))[0]
    options: dict[str, str] = {}
    if len(topology.zones) > 2 and rng.random() < 0.5:
        options["prefer-closest-numa-nodes"] = "true"
    if rng.random() < 0.1:
        options["max-allowable-numa-nodes"] = rng.choice(("8", "16"))
    if len(topology.zones) > 8 and policy != "none":
        options["max-allowable-numa-nodes"] = "16"
    cpu_options = _cpu_options(rng, topology)
    gates: dict[str, bool] = {}
    if policy != "single-numa-node" and rng.random() < 0.25:
        cpu_options["align-by-socket"] = "true"  # alpha; the kubelet refuses it beside single-numa-node
        gates["CPUManagerPolicyAlphaOptions"] = True
    return KubeletSettings(
        feature_gates=gates,
        cpu_manager_policy_options=cpu_options,
        cpu_manager_policy=cpu_policy,
        reserved_system_cpus=",".join(map(str, reserved)),
        memory_manager_policy=memory_policy,
        topology_manager_policy=policy,
        topology_manager_scope=rng.choices(("container", "pod"), weights=(60, 40))[0],
        topology_manager_policy_options=options,
    )


def _cpu_options(rng: random.Random, topology: Topology) -> dict[str, str]:
    """The CPU Manager's options on a share of the cases, in combinations the kubelet accepts:
    full-pcpus-only on half of the SMT machines (where it rejects), the others on a few."""
    options: dict[str, str] = {}
    if topology.threads_per_core > 1 and rng.random() < 0.5:
        options["full-pcpus-only"] = "true"
    if rng.random() < 0.15:
        options["strict-cpu-reservation"] = "true"
    spread = rng.choice((None, None, None, "distribute-cpus-across-numa", "prefer-align-cpus-by-uncorecache"))
    if spread is not None:
        options[spread] = "true"
    if rng.random() < 0.05:
        options["full-pcpus-only"] = "false"  # said, and off
    return options


# -- pods ----------------------------------------------------------------------------------------


def _pods(
    rng: random.Random, topology: Topology, settings: KubeletSettings, devices: NodeDevices
) -> tuple[list[Spec], list[str]]:
    """Enough pods to fill the node: their CPU requests add up to more than it has; on a node
    with devices, half of them ask for some."""
    widest = max(len(topology.cpus(i)) for i in range(len(topology.zones)))
    biggest_memory = max(z.memory - z.hugepages_bytes for z in topology.zones)
    hugepages = {size for z in topology.zones for size, n in (("2Mi", z.hugepages_2mi), ("1Gi", z.hugepages_1gi)) if n}
    kinds = ["guaranteed"] * 6 + ["multi", "fractional", "burstable", "besteffort", "init", "sidecar", "memory"]
    kinds += ["pod-level"]
    if hugepages:
        kinds += ["hugepages"] * 2
    names = devices.names()
    device_kinds = ["device-besteffort", "device-burstable", "device-cpus", "device-cpus", "device-memory"]
    device_kinds += ["device-multi", "device-init", "device-sidecar", "device-pod-level"]
    device_kinds += ["device-two"] * 2 if len(names) > 1 else []
    pods: list[Spec] = []
    drawn: list[str] = []
    asked = 0.0
    while asked <= topology.cpu_count + 2 and len(pods) < 8:
        if names and rng.random() < 0.5:
            kind = rng.choice(device_kinds)
            spec, cpus = _device_pod(rng, kind, widest, names)
        else:
            kind = rng.choice(kinds)
            spec, cpus = _pod(rng, kind, widest, biggest_memory, sorted(hugepages))
        pods.append(spec)
        drawn.append(kind)
        asked += max(cpus, 0.5)
    return pods, drawn


def _with_devices(container: Spec, wanted: dict[str, int]) -> Spec:
    """The container asking ``wanted`` devices too (requests and limits, as extended resources must)."""
    resources = dict(container.get("resources") or {})
    for key in ("requests", "limits"):
        resources[key] = {**(resources.get(key) or {}), **{r: str(n) for r, n in wanted.items()}}
    return {**container, "resources": resources}


def _device_pod(rng: random.Random, kind: str, widest: int, names: list[str]) -> tuple[Spec, float]:
    """A pod asking for devices of ``kind``: alone (BestEffort, Burstable), beside exclusive CPUs,
    beside pinned memory, two device types at once, in several containers, in an init container
    or a sidecar."""
    name = rng.choice(names)
    count = rng.choices((1, 2, 3), weights=(5, 3, 1))[0]
    cpu = rng.randint(1, max(1, widest))
    if kind == "device-besteffort":
        return {"containers": [_with_devices({"name": "app"}, {name: count})]}, 0
    if kind == "device-burstable":
        app = {"name": "app", "resources": {"requests": {"cpu": "100m", "memory": _memory(rng)}}}
        return {"containers": [_with_devices(app, {name: count})]}, 0.1
    if kind == "device-cpus":
        return {"containers": [_with_devices(_guaranteed("app", str(cpu), _memory(rng)), {name: count})]}, cpu
    if kind == "device-memory":
        app = _guaranteed("app", "1", rng.choice(("512Mi", "1Gi", "1536Mi")))
        return {"containers": [_with_devices(app, {name: count})]}, 1
    if kind == "device-two":
        a, b = rng.sample(names, 2)
        app = _with_devices(_guaranteed("app", str(cpu), _memory(rng)), {a: count, b: rng.randint(1, 2)})
        return {"containers": [app]}, cpu
    if kind == "device-multi":
        sizes = [rng.randint(1, max(1, widest // 2)) for _ in range(2)]
        containers = [
            _with_devices(_guaranteed(f"app{i}", str(n), _memory(rng)), {name: 1}) for i, n in enumerate(sizes)
        ]
        return {"containers": containers}, sum(sizes)
    if kind == "device-init":
        init = _with_devices(_guaranteed("init", "1", _memory(rng)), {name: count})
        app = _with_devices(_guaranteed("app", str(cpu), _memory(rng)), {name: rng.randint(1, count)})
        return {"initContainers": [init], "containers": [app]}, cpu
    if kind == "device-pod-level":
        spec, _ = _pod_level(rng, cpu)
        spec["containers"] = [_with_devices(c, {name: count}) for c in spec["containers"]]
        return spec, cpu
    if kind == "device-sidecar":
        sidecar = _with_devices(_guaranteed("sidecar", "1", _memory(rng)), {name: 1}) | {"restartPolicy": "Always"}
        app = _with_devices(_guaranteed("app", str(cpu), _memory(rng)), {name: count})
        return {"initContainers": [sidecar], "containers": [app]}, cpu + 1
    raise ValueError(f"unknown pod kind {kind}")


def _memory(rng: random.Random, heavy: int | None = None) -> str:
    if heavy is not None:
        return format_bytes(heavy + rng.choice((0, 256)) * MIB)
    return rng.choice(("64Mi", "128Mi", "256Mi", "512Mi"))


def _guaranteed(name: str, cpu: str, memory: str, extra: dict[str, str] | None = None) -> Spec:
    values = {"cpu": cpu, "memory": memory, **(extra or {})}
    return {"name": name, "resources": {"requests": dict(values), "limits": dict(values)}}


def _pod_level(rng: random.Random, cpu: int) -> tuple[Spec, float]:
    """A Guaranteed pod by its pod-level resources (integral CPUs), its container with none or
    the same; the CPU and Memory Managers leave it alone."""
    level = _guaranteed("", str(cpu), _memory(rng))["resources"]
    app: Spec = {"name": "app"}
    if rng.random() < 0.5:
        app["resources"] = {key: dict(values) for key, values in level.items()}
    return {"resources": level, "containers": [app]}, cpu


def _pod(rng: random.Random, kind: str, widest: int, biggest_memory: int, hugepages: list[str]) -> tuple[Spec, float]:
    """One pod spec of ``kind`` and the CPUs it asks for."""
    cpu = rng.randint(1, widest + 1)
    if kind == "guaranteed":
        return {"containers": [_guaranteed("app", str(cpu), _memory(rng))]}, cpu
    if kind == "multi":
        sizes = [rng.randint(1, max(1, widest // 2 + 1)) for _ in range(rng.randint(2, 3))]
        containers = [_guaranteed(f"app{i}", str(n), _memory(rng)) for i, n in enumerate(sizes)]
        return {"containers": containers}, sum(sizes)
    if kind == "fractional":
        millis = rng.choice((500, 1500, 2500))
        return {"containers": [_guaranteed("app", f"{millis}m", _memory(rng))]}, millis / 1000
    if kind == "burstable":
        request = rng.choice(("100m", "500m", "1"))
        limits = rng.choice(({"cpu": str(cpu)}, {"cpu": str(cpu), "memory": "512Mi"}, {}))
        resources: Spec = {"requests": {"cpu": request, "memory": _memory(rng)}}
        if limits:
            resources["limits"] = limits
        return {"containers": [{"name": "app", "resources": resources}]}, float(request.rstrip("m")) / (
            1000 if request.endswith("m") else 1
        )
    if kind == "besteffort":
        return {"containers": [{"name": "app"}]}, 0
    if kind == "pod-level":
        return _pod_level(rng, cpu)
    if kind == "init":
        init = rng.randint(1, widest + 1)
        spec = {
            "initContainers": [_guaranteed("init", str(init), _memory(rng))],
            "containers": [_guaranteed("app", str(cpu), _memory(rng))],
        }
        return spec, max(cpu, init)
    if kind == "sidecar":
        side = rng.randint(1, max(1, widest // 2))
        sidecar = _guaranteed("sidecar", str(side), _memory(rng)) | {"restartPolicy": "Always"}
        return {"initContainers": [sidecar], "containers": [_guaranteed("app", str(cpu), _memory(rng))]}, cpu + side
    if kind == "memory":
        heavy = int(biggest_memory * rng.choice((0.6, 1.0, 1.3)))
        return {"containers": [_guaranteed("app", str(rng.randint(1, 2)), _memory(rng, heavy))]}, 1
    if kind == "hugepages":
        size = rng.choice(hugepages)
        amount = "1Gi" if size == "1Gi" else rng.choice(("32Mi", "64Mi", "96Mi"))
        spec = {"containers": [_guaranteed("app", str(rng.randint(1, 2)), _memory(rng), {f"hugepages-{size}": amount})]}
        return spec, 1
    raise ValueError(f"unknown pod kind {kind}")
