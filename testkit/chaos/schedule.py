"""The faults of a run and when they come, from a seed. Pure.

Every kind comes once, in an order the seed shuffles, before any comes twice; then the seed picks
kinds and targets at random. Faults come one at a time: each starts ``gap`` seconds (drawn from the
range) after the one before has recovered, so the schedule gives the gaps, not clock times.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass

EXPORTER_RESTART = "exporter-restart"
"""kill -9 a node's exporter and start it again."""
NRT_RECREATE = "nrt-recreate"
"""Delete a node's NRT; its exporter publishes it again."""
NODE_RECREATE = "node-recreate"
"""Delete a Node (its NRT goes with it) and create it again: a kwok node by its object, a real
node by its kubelet registering it again after a restart."""
APISERVER_KILL = "apiserver-kill"
"""kill -9 the apiserver and start it again."""
LARGE_NRT = "large-nrt"
"""The largest NRT the CRD takes, rewritten every 100 ms for a while."""
KUBELET_RESTART = "kubelet-restart"
"""Restart a real node's kubelet (its containers keep running)."""
WATCH_EXPIRED = "watch-expired"
"""Compact etcd and kill -9 the apiserver: every watch resumes from a resourceVersion that is gone
(410 Gone) and lists again."""
KINDS = (EXPORTER_RESTART, NRT_RECREATE, NODE_RECREATE, APISERVER_KILL, LARGE_NRT, KUBELET_RESTART, WATCH_EXPIRED)
ON_ANY_NODE = (EXPORTER_RESTART, NRT_RECREATE, NODE_RECREATE)
ON_REAL_NODE = (KUBELET_RESTART,)


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str
    """The node it hits ("" for the control plane's faults)."""
    gap: float
    """Seconds of quiet before it, after the fault before it has recovered."""


def fault_count(seconds: float, gap: tuple[float, float]) -> int:
    """How many faults a run of ``seconds`` draws: as many as the shortest gaps allow, every kind
    once besides. The count decides the whole schedule (the kinds are drawn first), so runs whose
    seconds and gaps keep one ratio share their faults: ``--minutes 2 --gap 2,4`` has those of
    ``--minutes 20``, each gap a tenth."""
    return int(seconds / gap[0]) + len(KINDS)


def schedule(
    seed: int, count: int, real: Sequence[str], kwok: Sequence[str], gap: tuple[float, float] = (20.0, 40.0)
) -> list[Fault]:
    """``count`` faults (at least one of each kind when ``count`` allows) on ``real`` and ``kwok`` nodes."""
    rng = random.Random(seed)
    first = list(KINDS)
    rng.shuffle(first)
    kinds = first[:count] + [rng.choice(KINDS) for _ in range(count - len(first))]
    faults = []
    for kind in kinds:
        if kind in ON_ANY_NODE:
            target = rng.choice([*real, *kwok])
        elif kind in ON_REAL_NODE:
            target = rng.choice(real)
        else:
            target = ""
        faults.append(Fault(kind, target, round(rng.uniform(*gap), 1)))
    return faults
