"""The CPU, Memory and device managers' topology hints, for one node or for many at once. Pure.

A manager offers a hint for every NUMA mask its free resources can serve the request from, and
prefers the masks as narrow as the narrowest one that could hold the request at all (the
kubelet's minAffinitySize; when no mask could, the number of NUMA nodes the manager knows).

Written once over arrays: amounts in thousandths (int64, requests rounded up and capacities down,
so comparisons are exact), zones on the first axis, and any trailing axes -- none for one node's
prediction, nodes for the columnar table, which evaluates thousands of nodes with the same calls.
A ``Masks`` says which masks are looked at: every mask over the zones for the full prediction,
or only the single zones, all that single-numa-node keeps.
"""

import functools
import itertools
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import TypeVar

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Array = TypeVar("Array", Ints, Bools)


def milli(value: Decimal, rounding: str = ROUND_FLOOR) -> int:
    """An amount in thousandths (rounded down: what a node has)."""
    return int((value * 1000).to_integral_value(rounding))


def milli_request(value: Decimal) -> int:
    """A request in thousandths (rounded up: what a pod needs)."""
    return milli(value, ROUND_CEILING)


@dataclass(frozen=True, eq=False)
class Masks:
    """Masks over zone positions, in the kubelet's order (by size, then lexicographically)."""

    member: Ints
    """[mask, zone]: 1 where the zone is in the mask."""
    size: Ints
    """[mask]: how many zones it holds."""
    positions: tuple[tuple[int, ...], ...]
    """Each mask's zone positions."""
    singles: bool
    """Each mask is one zone, the zone of the same position (sums are the values themselves)."""

    def total(self, values: Ints) -> Ints:
        """[mask, ...]: the sum of ``values`` ([zone, ...]) over each mask's zones."""
        if self.singles:
            return values
        out: Ints = self.member @ values
        return out

    def totals(self, values: Ints) -> Ints:
        """[type, mask, ...]: ``total`` of each type of ``values`` ([type, zone, ...])."""
        if self.singles:
            return values
        out: Ints = values @ self.member.T if values.ndim == 2 else self.member @ values
        return out

    def expand(self, per_mask: Array, like: Ints | Bools) -> Array:
        """A [mask] vector shaped to broadcast against ``like`` ([mask, ...])."""
        return per_mask.reshape(per_mask.shape + (1,) * (like.ndim - 1))


@functools.cache
def every_mask(positions: tuple[int, ...], zones: int) -> Masks:
    """Every non-empty mask over ``positions`` (of ``zones`` in all), as the full prediction iterates them."""
    combos = [c for size in range(1, len(positions) + 1) for c in itertools.combinations(positions, size)]
    member = np.zeros((len(combos), zones), dtype=np.int64)
    for i, combo in enumerate(combos):
        member[i, list(combo)] = 1
    return Masks(member, member.sum(axis=1), tuple(combos), singles=False)


@functools.cache
def single_zones(zones: int) -> Masks:
    """The single zones alone: all that single-numa-node keeps of any manager's hints."""
    member = np.eye(zones, dtype=np.int64)
    return Masks(member, np.ones(zones, dtype=np.int64), tuple((z,) for z in range(zones)), singles=True)


WIDE = np.iinfo(np.int64).max


def narrowest(masks: Masks, could: Bools, known: int | Ints) -> Ints:
    """The size of the narrowest mask that ``could`` hold the request at all (``known``, the
    number of NUMA nodes the manager knows, when none could): the managers' minAffinitySize."""
    size = masks.expand(masks.size, could)
    out: Ints = np.minimum(np.where(could, size, WIDE).min(axis=0, initial=WIDE), known)
    return out


def preferred(masks: Masks, could: Bools, fits: Bools, known: int | Ints) -> Bools:
    """Which fitting masks are preferred: those as narrow as the narrowest mask that ``could`` hold
    the request at all. Exact whichever masks are looked at: the narrowest of the single zones is
    1 exactly when the narrowest of all masks is."""
    if masks.singles:  # every size is 1: the narrowest is 1 where some zone could, else ``known``
        out: Bools = fits & (could.any(axis=0) | (np.asarray(known) == 1))
        return out
    out = fits & (masks.expand(masks.size, could) == narrowest(masks, could, known))
    return out


def cpu_hints(
    masks: Masks,
    capacity: Ints,
    free: Ints,
    request: int,
    known: int | Ints,
    reused: int = 0,
    inside: Bools | None = None,
    sockets: Ints | None = None,
    per_socket: int = 0,
) -> tuple[Bools, Bools]:
    """The static CPU manager's hints (fits, preferred) for ``request`` exclusive CPUs (thousandths).

    ``reused``: CPUs of the pod's init containers it hands on (they count as free in any mask
    that ``inside`` says holds them all); ``known``: how many NUMA nodes have CPUs. Under
    align-by-socket, ``sockets`` ([mask]: the sockets each spans) and ``per_socket`` (NUMA nodes
    per socket, as the kubelet divides them): a fitting mask spanning as few sockets as the
    narrowest possible mask needs is preferred as well."""
    could = masks.total(capacity) >= request
    fits = masks.total(free) + reused >= request
    if inside is not None:
        fits &= masks.expand(inside, fits)
    chosen = preferred(masks, could, fits, known)
    if sockets is not None and per_socket > 0:  # align-by-socket: within the fewest sockets is preferred too
        fewest = (narrowest(masks, could, known) + per_socket - 1) // per_socket
        chosen = chosen | (fits & (masks.expand(sockets, fits) == fewest))
    return fits, chosen


def memory_hints(
    masks: Masks,
    allocatable: Ints,
    free: Ints,
    request: Ints,
    known: int | Ints,
    reusable: Ints | None = None,
    allowed: Bools | None = None,
) -> tuple[Bools, Bools]:
    """The Static Memory Manager's hints (fits, preferred) for all pinned types at once.

    ``allocatable`` and ``free`` are [type, zone, ...], ``request`` [type] (thousandths); a mask
    offers a hint only if its allocatable holds every type (so it could), its free memory (with the
    pod's ``reusable`` [type, mask]) does too, and ``allowed`` ([mask, ...]: the NUMA groups of
    earlier multi-NUMA allocations) lets it."""
    wanted = request.reshape(request.shape + (1,) * (allocatable.ndim - 1))
    held = masks.totals(free)
    if reusable is not None:
        held = held + reusable.reshape(reusable.shape + (1,) * (held.ndim - 2))
    could = np.asarray((masks.totals(allocatable) >= wanted).all(axis=0), dtype=np.bool_)
    fits = np.asarray((held >= wanted).all(axis=0), dtype=np.bool_) & could
    if allowed is not None:
        fits &= allowed
    return fits, preferred(masks, could, fits, known)


def device_hints(
    masks: Masks, held: Ints, free: Ints, request: int, known: int | Ints, inside: Bools | None = None
) -> tuple[Bools, Bools]:
    """The device manager's hints (fits, preferred) for ``request`` devices of one resource
    (thousandths). ``held`` and ``free`` are [mask, ...]: the devices (free ones) attached to any
    zone of the mask -- a device on two zones counts for every mask that touches either, which a
    sum over zones cannot say (``reach``); ``known``: how many NUMA zones have devices of the
    resource (the masks run over those); ``inside``: masks that touch every device the pod's
    init containers hand on."""
    could = held >= request
    fits = free >= request
    if inside is not None:
        fits &= masks.expand(inside, fits)
    return fits, preferred(masks, could, fits, known)


def reach(masks: Masks, attached: Bools) -> Ints:
    """[mask, group]: 1 where the mask touches a group of devices attached to zones ``attached``
    ([group, zone]); a group without topology is reached by no mask."""
    out: Ints = (masks.member @ attached.T.astype(np.int64) > 0).astype(np.int64)
    return out
