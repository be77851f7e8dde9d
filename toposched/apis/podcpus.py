"""The ``toposched.io/pod-cpus`` NRT attribute: each pod's exclusive CPUs by NUMA zone. Pure.

``ns/name=0:2,1:1;ns/other=1:4``: pods sorted by namespace and name, zones by id. The exporter
writes it from PodResources (the CPUs the kubelet pinned for the pod's containers); a scheduler
reads it to give back, on the right zones, the CPUs of a pod that has ended while its NRT, a
moment behind, still counts them.
"""

from collections.abc import Mapping

Key = tuple[str, str]
"""A pod's namespace and name."""


def format_pod_cpus(pods: Mapping[Key, Mapping[int, int]]) -> str:
    """The attribute's value (pods without CPUs left out)."""
    return ";".join(
        f"{ns}/{name}=" + ",".join(f"{zone}:{count}" for zone, count in sorted(zones.items()))
        for (ns, name), zones in sorted(pods.items())
        if any(zones.values())
    )


def parse_pod_cpus(text: str) -> dict[Key, dict[int, int]]:
    """The attribute's pods; ValueError when it is not the attribute's format."""
    out: dict[Key, dict[int, int]] = {}
    for part in filter(None, text.split(";")):
        pod, equals, zones = part.partition("=")
        namespace, slash, name = pod.partition("/")
        if not (equals and slash and namespace and name):
            raise ValueError(f"pod-cpus: not ns/name=zone:count,...: {part!r}")
        counts: dict[int, int] = {}
        for item in zones.split(","):
            zone, _, count = item.partition(":")
            if not (zone.isdigit() and count.isdigit() and int(count) > 0):
                raise ValueError(f"pod-cpus: not zone:count: {item!r}")
            counts[int(zone)] = int(count)
        out[(namespace, name)] = counts
    return out
