"""What a real machine can have: the bounds every quantity, count and distance toposched reads is
checked against. A value beyond them is invalid input, not a very large machine.

The one place these figures live. The CRD schemas (``crds/*.yaml``) spell the same figures in
their CEL rules, maxItems and maxLength (a unit test keeps the two in step), the admission webhook
and the parsers import them from here. The list sizes are also what keeps the CRDs' CEL rules
within the apiserver's cost budget.
"""

from decimal import Decimal
from typing import Final

MAX_CPUS: Final = 8192
"""Logical CPUs of one machine (node or NUMA zone): Linux's largest NR_CPUS (x86-64 MAXSMP)."""
MAX_MEMORY: Final = 2**52
"""Bytes of memory, or of hugepages of one size, of one machine: 4 PiB, a 52-bit physical address space."""
MAX_BANDWIDTH: Final = 10**13
"""Bits per second of one node's NICs or of one dependency between two pods: 10 Tbit/s."""
MAX_QUANTITY: Final = 2**53
"""Any other quantity (devices, storage, pods, bandwidth summed over a zone): 8 Pi. In thousandths
(the placement columns) it still fits a signed 64-bit integer."""
MAX_NUMA_NODES: Final = 1024
"""NUMA nodes of one machine (Linux's MAX_NUMNODES); ids are 0..1023."""
MAX_NUMA_DISTANCE: Final = 255
"""ACPI SLIT distances are one byte; 255 means unreachable."""
LOCAL_DISTANCE: Final = 10
"""The SLIT distance of a NUMA node to itself; other nodes are farther (Linux ignores a SLIT that says otherwise)."""
MAX_NIC_SPEED_MBPS: Final = MAX_BANDWIDTH // 10**6
"""A NIC's ``speed`` in sysfs (Mb/s)."""
HUGEPAGE_SIZES_KB: Final = (64, 1024, 2048, 8192, 16384, 32768, 262144, 524288, 1048576, 2097152, 16777216, 536870912)
"""Huge page sizes some Linux architecture supports (64Ki ... 512Gi): x86-64 2Mi and 1Gi, arm64 64Ki, 2Mi, 32Mi,
512Mi, 1Gi and 16Gi, POWER 16Mi and 16Gi, s390 1Mi and 2Gi, sparc 8Mi and 256Mi, RISC-V 512Gi."""
MAX_QUANTITY_TEXT: Final = 40
"""Characters of a quantity as written: canonical forms are a few; more is garbage, not precision."""
MAX_ZONES: Final = 128
"""Zones of one NodeResourceTopology (and entries of a zone's distance row): NUMA nodes of the largest
machines (32 sockets with sub-NUMA clustering) with room to spare."""
MAX_ZONE_RESOURCES: Final = 64
"""Resources listed by one zone: cpu, memory, a few huge page sizes and device resources."""
MAX_WORKLOADS: Final = 256
"""Workloads of one AppGroup."""
MAX_DEPENDENCIES: Final = 64
"""Dependencies of one workload."""
MAX_FILE_BYTES: Final = 16 * 2**20
"""Largest manifest or configuration file the commands read."""
MAX_SYSFS_FILE_BYTES: Final = 64 * 2**10
"""Largest sysfs or procfs file the exporter reads (sysfs attributes are one page; meminfo a few KiB)."""
MAX_NAME_LENGTH: Final = 253
"""Object names, label keys with prefix and similar identifiers (a DNS subdomain)."""

_SHOWN = {MAX_MEMORY: "4Pi", MAX_QUANTITY: "8Pi", MAX_BANDWIDTH: "10T"}


def limit_of(resource: str) -> int:
    """The largest amount of ``resource`` one machine (or one pod on it) can have."""
    if resource == "cpu":
        return MAX_CPUS
    if resource == "memory" or resource.startswith("hugepages-"):
        return MAX_MEMORY
    if resource == "network.aware.com/bandwidth":
        return MAX_BANDWIDTH
    return MAX_QUANTITY


def show_limit(limit: int) -> str:
    return _SHOWN.get(limit, str(limit))


def check_amount(resource: str, value: Decimal) -> Decimal:
    """``value`` when it is an amount of ``resource`` a real machine can have, else ValueError."""
    if value < 0:
        raise ValueError(f"{resource} {_show(value)} is negative")
    limit = limit_of(resource)
    if value > limit:
        raise ValueError(f"{resource} {_show(value)} is more than any machine has (at most {show_limit(limit)})")
    return value


def check_bandwidth(value: Decimal, limit: int = MAX_BANDWIDTH) -> Decimal:
    if value < 0:
        raise ValueError(f"bandwidth {_show(value)} is negative")
    if value > limit:
        raise ValueError(f"bandwidth {_show(value)} is more than any network carries (at most {show_limit(limit)})")
    return value


def _show(value: Decimal) -> str:
    """Short enough for a message whatever the exponent (``1E+999999``, not a million digits)."""
    return f"{value:.6g}" if abs(value.adjusted()) > 15 else format(value.normalize(), "f")
