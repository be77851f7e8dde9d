"""The pods fingerprint of the NRT (``pfp0v001``), computed as the upstream podfingerprint library does.

Per pod: XXH64 of the name seeded with XXH64 of the namespace. The values are sorted, fed
as 8 little-endian bytes each into a fresh XXH64, and the digest is written as 16 hex digits
after the prefix. Schedulers compare it with their own view of the node's pods.
"""

from collections.abc import Iterable

import xxhash

PREFIX = "pfp0"
VERSION = "v001"
METHOD_ALL = "all"
METHOD_EXCLUSIVE = "with-exclusive-resources"


def fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """The fingerprint of (namespace, name) pairs."""
    return of_hashes(pod_hash(namespace, name) for namespace, name in pods)


def pod_hash(namespace: str, name: str) -> int:
    """One pod's part of the fingerprint."""
    return xxhash.xxh64_intdigest(name, seed=xxhash.xxh64_intdigest(namespace))


def of_hashes(hashes: Iterable[int]) -> str:
    """The fingerprint of pods by their ``pod_hash`` (in any order): many sets of the same pods are
    tried without hashing each pod again."""
    digest = xxhash.xxh64()
    for value in sorted(hashes):
        digest.update(value.to_bytes(8, "little"))
    return PREFIX + VERSION + digest.hexdigest()
