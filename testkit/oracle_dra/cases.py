"""Seeded cases for the DRA oracle: devices published on a few nodes, claims the real
kube-scheduler allocates first, and a pod whose claims toposched predicts. Pure: no I/O.

Case ``i`` of seed ``s`` depends on nothing else, so any case replays alone. Names are the
case's own at rendering (``objects``): device classes and pools carry the case's token, so the
cases of a run never share a device, whichever node they run on.

What is drawn:

- **devices**: on 1-3 nodes, 1-2 drivers (a GPU driver, a NIC driver) with 1-2 pools each, a
  pool in 1-3 slices (``resourceSliceCount`` right, some slices empty), 0-4 devices a slice; the
  NUMA node as the standard int attribute, -1, missing, or a vendor name (``dra.net/numaNode``,
  ``gpu.nvidia.com/numa``); ``pcieRoot``, a model, an index and a memory capacity, some GPUs
  shared (``allowMultipleAllocations``, their memory consumed by claims) and some devices tainted;
- **device classes**: by driver, by driver and memory, every device (no selector), and one
  pinning a NUMA node with a guarded selector;
- **claims**: ``ExactCount`` (1-3) and ``All``, capacity requests, taint tolerations,
  ``firstAvailable`` subrequests, ``matchAttribute`` constraints, request selectors toposched
  follows and some that fail at run time (an attribute read without a guard on a device lacking
  it) or match nothing, from ResourceClaims and ResourceClaimTemplates;
- **pods**: 0-3 earlier pods, allocated by the scheduler first (devices in use), then the case
  pod with 1-3 claims, one of them now and then an earlier pod's claim, allocated already; on
  some cases the last earlier pod races the case pod (not waited for).

Not drawn: a NUMA node as a list (``ints``), which the 1.36 apiserver refuses without the alpha
DRAListTypeAttributes gate, and admin access, which needs a namespace labelled for it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

DOMAIN = "dra-oracle.example"
GPU = f"gpu.{DOMAIN}"
NIC = f"nic.{DOMAIN}"
STANDARD = "resource.kubernetes.io"

Spec = dict[str, Any]
"""A ResourceClaim's ``spec``, its device classes named by their short names (``gpu``...)."""

TAINT = f"{DOMAIN}/unhealthy"

CLASSES: dict[str, tuple[str, ...]] = {
    "gpu": (f'device.driver == "{GPU}"',),
    "gpu-big": (f'device.driver == "{GPU}"', f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0'),
    "nic": (f'device.driver == "{NIC}"',),
    "any": (),
    "numa0": (f'"numaNode" in device.attributes["{STANDARD}"] && device.attributes["{STANDARD}"].numaNode == 0',),
}
"""The device classes of every case, by short name: their CEL selectors (none: every device)."""


@dataclass(frozen=True)
class Device:
    name: str
    attributes: dict[str, dict[str, Any]]
    """As the API takes them: name -> {"int": 0} | {"string": ...} | {"bool": ...}."""
    capacity: dict[str, dict[str, Any]] = field(default_factory=dict)
    """As the API takes it: name -> {"value": ..., "requestPolicy": ...}."""
    shared: bool = False
    """``allowMultipleAllocations``: claims consume its capacity (DRAConsumableCapacity)."""
    tainted: bool = False
    """Carries the ``NoSchedule`` taint ``TAINT``: only requests tolerating it get it (DRADeviceTaints)."""


@dataclass(frozen=True)
class Slice:
    node: int
    """Which of the case's nodes publishes it."""
    driver: str
    pool: str
    """The pool's short name; its order among the node's pools is the name's."""
    name: str
    """The slice's short name; its order in the pool is the name's."""
    count: int
    """The pool's resourceSliceCount."""
    devices: tuple[Device, ...]


@dataclass(frozen=True)
class Claim:
    name: str
    template: bool
    """Made from a ResourceClaimTemplate by the resourceclaim controller, else created first."""
    spec: Spec


@dataclass(frozen=True)
class Pod:
    name: str
    claims: tuple[Claim, ...]
    shared: tuple[str, ...] = ()
    """Earlier pods' ResourceClaims it uses too (allocated already)."""


@dataclass(frozen=True)
class Case:
    number: int
    seed: int
    nodes: int
    slices: tuple[Slice, ...]
    earlier: tuple[Pod, ...]
    pod: Pod
    kinds: tuple[str, ...] = ()
    """What the case pod's claims were drawn as, for the report."""
    racing: bool = False
    """The last earlier pod is not waited for: the scheduler may still hold its allocation in
    flight (or not have written it yet) when toposched predicts."""

    @property
    def label(self) -> str:
        return f"case {self.number} (seed {self.seed})"

    def describe(self) -> str:
        devices = sum(len(s.devices) for s in self.slices)
        pools = len({(s.node, s.driver, s.pool) for s in self.slices})
        claims = ", ".join(self.kinds)
        return (
            f"{self.nodes} nodes, {pools} pools in {len(self.slices)} slices, {devices} devices; "
            f"{len(self.earlier)} earlier pods{' (the last racing)' if self.racing else ''}; claims: {claims}"
        )

    def to_dict(self) -> dict[str, Any]:
        def pod(p: Pod) -> dict[str, Any]:
            return {"name": p.name, "shared": list(p.shared), "claims": [c.__dict__ for c in p.claims]}

        return {
            "nodes": self.nodes,
            "slices": [json.loads(json.dumps(s, default=lambda o: o.__dict__)) for s in self.slices],
            "earlier": [pod(p) for p in self.earlier],
            "racing": self.racing,
            "pod": pod(self.pod),
        }


def generate(seed: int, count: int, first: int = 0) -> list[Case]:
    return [case(seed, number) for number in range(first, first + count)]


def case(seed: int, number: int, max_nodes: int = 3) -> Case:
    rng = random.Random(f"toposched-oracle-dra:{seed}:{number}")
    nodes = rng.randint(1, max_nodes)
    slices = tuple(s for node in range(nodes) for s in _node_slices(rng, node))
    earlier = tuple(_earlier(rng, i) for i in range(rng.choices((0, 1, 2, 3), weights=(2, 3, 3, 2))[0]))
    claims: list[Claim] = []
    kinds: list[str] = []
    for i in range(rng.choices((1, 2, 3), weights=(4, 4, 2))[0]):
        kind, spec = _claim_spec(rng)
        claims.append(Claim(f"claim-{i}", rng.random() < 0.5, spec))
        kinds.append(kind)
    shared: tuple[str, ...] = ()
    named = [c.name for p in earlier for c in p.claims if not c.template]
    if named and rng.random() < 0.15:
        shared = (rng.choice(named),)
        kinds.append("shared")
    racing = bool(earlier) and rng.random() < 0.15
    return Case(number, seed, nodes, slices, earlier, Pod("pod", tuple(claims), shared), tuple(kinds), racing)


# -- devices -----------------------------------------------------------------------------------------


def _node_slices(rng: random.Random, node: int) -> list[Slice]:
    drivers = rng.choice(((GPU,), (GPU,), (NIC,), (GPU, NIC), (GPU, NIC)))
    slices = []
    for driver in drivers:
        for pool in rng.sample("abcdefgh", rng.choices((1, 2), weights=(3, 2))[0]):
            count = rng.choices((1, 2, 3), weights=(4, 3, 2))[0]
            index = 0
            for name in rng.sample("pqrstuvw", count):  # in random order: the allocator reads them by name
                devices = []
                for _ in range(rng.choices(range(5), weights=(1, 2, 4, 4, 3))[0]):
                    devices.append(_device(rng, driver, f"{driver[:3]}-{pool}{index}"))
                    index += 1
                slices.append(Slice(node, driver, f"{pool}{node}", name, count, tuple(devices)))
    return slices


def _numa(rng: random.Random, driver: str) -> dict[str, dict[str, Any]]:
    """The device's NUMA attribute, in one of the forms drivers publish (or none)."""
    zone = rng.randint(0, 1)
    form = rng.choices(("standard", "minus-one", "missing", "dranet", "nvidia"), weights=(12, 2, 3, 2, 1))[0]
    if form == "standard":
        return {f"{STANDARD}/numaNode": {"int": zone}}
    if form == "minus-one":
        return {f"{STANDARD}/numaNode": {"int": -1}}
    if form == "dranet":
        return {"dra.net/numaNode": {"int": rng.choice((zone, -1))}}
    if form == "nvidia" and driver == GPU:
        return {"gpu.nvidia.com/numa": {"int": zone}}
    return {}


def _device(rng: random.Random, driver: str, name: str) -> Device:
    tainted = rng.random() < 0.06
    attributes = _numa(rng, driver)
    if rng.random() < 0.8:
        attributes[f"{STANDARD}/pcieRoot"] = {"string": f"pci0000:{rng.choice(('00', '40', '80'))}"}
    if driver == GPU:
        attributes["model"] = {"string": rng.choice(("a100", "h100", "l4"))}
        attributes["index"] = {"int": rng.randint(0, 7)}
        if rng.random() < 0.03:
            return Device(name, attributes, tainted=tainted)
        memory: dict[str, Any] = {"value": rng.choice(("16Gi", "40Gi", "80Gi"))}
        shared = rng.random() < 0.15
        if shared:  # handed out in steps of 10Gi, 10Gi when a request says nothing
            memory["value"] = rng.choice(("40Gi", "80Gi"))  # the API wants two steps at least
            memory["requestPolicy"] = {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}
        return Device(name, attributes, {"memory": memory}, shared, tainted)
    attributes["rdma"] = {"bool": rng.random() < 0.5}
    return Device(name, attributes, tainted=tainted)


# -- claims ------------------------------------------------------------------------------------------

SELECTORS: dict[str, tuple[str, ...]] = {
    "model": (f'device.attributes["{GPU}"].model == "h100"', f'device.attributes["{GPU}"].model != "l4"'),
    "memory": (f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0',),
    "guarded-numa": (
        f'"numaNode" in device.attributes["{STANDARD}"] && device.attributes["{STANDARD}"].numaNode == 1',
        f'!("numaNode" in device.attributes["{STANDARD}"]) || device.attributes["{STANDARD}"].numaNode == 0',
    ),
    "pcie": (f'"pcieRoot" in device.attributes["{STANDARD}"]',),
    "index": (f'device.attributes["{GPU}"].index % 2 == 0',),
    "rdma": (f'device.attributes["{NIC}"].rdma',),
    "unguarded-numa": (f'device.attributes["{STANDARD}"].numaNode == 1',),
    "none": (f'device.attributes["{GPU}"].model == "b200"',),
}
"""Request selectors by what they are drawn as: ``unguarded-numa`` fails at run time on a device
without the attribute (a CEL error the scheduler reports), ``model`` and ``index`` on a device of
another driver (under the class of every device), ``none`` matches nothing."""

SELECTOR_WEIGHTS = {
    "model": 4,
    "memory": 2,
    "guarded-numa": 4,
    "pcie": 2,
    "index": 2,
    "rdma": 1,
    "unguarded-numa": 1,
    "none": 1,
}
_READS = {"model": GPU, "memory": GPU, "index": GPU, "none": GPU, "rdma": NIC}
SELECTOR_DRIVERS = {name: _READS.get(name, "") for name in SELECTORS}
"""The driver whose attributes a selector reads: under another driver's class, or the class of
every device, it fails at run time (drawn so on a few requests only)."""
CLASS_DRIVERS = {"gpu": ("", GPU), "gpu-big": ("", GPU), "nic": ("", NIC), "any": ("",), "numa0": ("",)}
MATCH_ATTRIBUTES = (f"{STANDARD}/pcieRoot", f"{GPU}/model", f"{STANDARD}/numaNode")


def _claim_spec(rng: random.Random) -> tuple[str, Spec]:
    """A claim of 1-3 requests (some with subrequests) and now and then a matchAttribute
    constraint, with what it was drawn as."""
    requests: list[dict[str, Any]] = []
    kinds: list[str] = []
    for r in range(rng.choices((1, 2, 3), weights=(6, 3, 1))[0]):
        if rng.random() < 0.2:
            subrequests = [{"name": f"s{i}", **_exactly(rng, kinds)} for i in range(rng.randint(2, 3))]
            requests.append({"name": f"r{r}", "firstAvailable": subrequests})
            kinds.append("firstAvailable")
        else:
            requests.append({"name": f"r{r}", "exactly": _exactly(rng, kinds)})
    spec: Spec = {"devices": {"requests": requests}}
    if rng.random() < 0.3:
        constraint: dict[str, Any] = {"matchAttribute": rng.choice(MATCH_ATTRIBUTES)}
        if len(requests) > 1 and rng.random() < 0.5:
            constraint["requests"] = [r["name"] for r in rng.sample(requests, 2)]
        spec["devices"]["constraints"] = [constraint]
        kinds.append("matchAttribute")
    return "+".join(kinds), spec


def _exactly(rng: random.Random, kinds: list[str]) -> dict[str, Any]:
    """One request's device class, selectors and count (``All`` now and then)."""
    class_name = rng.choices(list(CLASSES), weights=(8, 2, 3, 2, 1))[0]
    request: dict[str, Any] = {"deviceClassName": class_name}
    if rng.random() < 0.08:
        request["allocationMode"] = "All"
        kinds.append(f"{class_name}:All")
    else:
        request["count"] = rng.choices((1, 2, 3), weights=(7, 2, 1))[0]
        kinds.append(f"{class_name}x{request['count']}")
    if rng.random() < 0.1:
        request["capacity"] = {"requests": {"memory": rng.choice(("10Gi", "20Gi", "40Gi"))}}
        kinds[-1] += "+memory"
    if rng.random() < 0.1:
        request["tolerations"] = [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]
        kinds[-1] += "+tolerates"
    if rng.random() < 0.45:
        names = [n for n in SELECTOR_WEIGHTS if rng.random() < 0.15 or SELECTOR_DRIVERS[n] in CLASS_DRIVERS[class_name]]
        drawn = rng.choices(names, weights=[SELECTOR_WEIGHTS[n] for n in names])[0]
        request["selectors"] = [{"cel": {"expression": rng.choice(SELECTORS[drawn])}}]
        kinds[-1] += f"[{drawn}]"
    return request


def _earlier(rng: random.Random, index: int) -> Pod:
    """A pod whose one claim (a device or two, sometimes pinned to a NUMA node) the scheduler
    allocates before the case pod comes."""
    class_name = rng.choices(("gpu", "nic", "any", "numa0"), weights=(6, 2, 1, 1))[0]
    request: dict[str, Any] = {"deviceClassName": class_name, "count": rng.choice((1, 1, 2))}
    if rng.random() < 0.25:
        request["selectors"] = [{"cel": {"expression": rng.choice(SELECTORS["guarded-numa"])}}]
    spec: Spec = {"devices": {"requests": [{"name": "r0", "exactly": request}]}}
    return Pod(f"earlier-{index}", (Claim(f"earlier-{index}", rng.random() < 0.4, spec),))
