"""Placement order of an AppGroup's workloads: six deterministic topological sorts.

Pure: plain models in, plain lists out. The graph has one node per workload in spec order
(isolated workloads included) and an edge A -> B for each dependency B of A, in declared
order. Every tie is broken by spec order or declared order, never by hash order, so the same
spec always gives the same order.

A cycle does not stop the sort: its strongly connected components are condensed into single
nodes (placed at the position of their first member in spec order), the condensed graph is
sorted, and each component is expanded into its members in spec order.
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum

from toposched.apis.appgroup import AppGroupSpec, SortingAlgorithm
from toposched.apis.graph import Graph, InvalidSpecError, build_graph

__all__ = ["Graph", "InvalidSpecError", "SortResult", "build_graph", "sort_graph", "sort_spec"]


@dataclass(frozen=True)
class SortResult:
    order: list[str]
    """Workload selectors, first to place first."""
    cycles: list[list[str]] = field(default_factory=list)
    """Members (selectors, spec order) of each dependency cycle, in spec order of their first member."""


def _kahn(n: int, deps: Sequence[Sequence[int]]) -> list[int] | None:
    """Kahn's algorithm with a LIFO stack; None when a cycle leaves nodes unemitted."""
    indegree = [0] * n
    for targets in deps:
        for t in targets:
            indegree[t] += 1
    # Pushed in reverse so that the first root in spec order is popped first.
    stack = [i for i in range(n - 1, -1, -1) if indegree[i] == 0]
    out: list[int] = []
    while stack:
        node = stack.pop()
        out.append(node)
        for t in deps[node]:
            indegree[t] -= 1
            if indegree[t] == 0:
                stack.append(t)
    return out if len(out) == n else None


class Step(Enum):
    """What the depth-first search reports as it goes (``_depth_first``)."""

    ENTER = "enter"
    SEEN = "seen"
    LEAVE = "leave"


def _depth_first(n: int, deps: Sequence[Sequence[int]]) -> Iterator[tuple[Step, int, int]]:
    """An iterative depth-first search from each node not yet reached, in spec order, following
    dependencies in declared order. Yields ``(ENTER, node, parent)`` when it reaches a node,
    ``(SEEN, node, target)`` for a dependency on a node reached before, and ``(LEAVE, node, parent)``
    once every dependency of the node was followed; the parent of a root is -1."""
    reached = [False] * n
    for root in range(n):
        if reached[root]:
            continue
        reached[root] = True
        yield Step.ENTER, root, -1
        # (node, position of the next dependency to follow)
        frames: list[list[int]] = [[root, 0]]
        while frames:
            frame = frames[-1]
            node, pos = frame
            targets = deps[node]
            if pos < len(targets):
                frame[1] = pos + 1
                t = targets[pos]
                if reached[t]:
                    yield Step.SEEN, node, t
                else:
                    reached[t] = True
                    yield Step.ENTER, t, node
                    frames.append([t, 0])
                continue
            frames.pop()
            yield Step.LEAVE, node, frames[-1][0] if frames else -1


def _tarjan(n: int, deps: Sequence[Sequence[int]]) -> list[int] | None:
    """Reverse post-order of a depth-first search; None when it meets a back edge (a cycle)."""
    on_path = [False] * n
    post: list[int] = []
    for step, node, other in _depth_first(n, deps):
        if step is Step.ENTER:
            on_path[node] = True
        elif step is Step.SEEN:
            if on_path[other]:
                return None
        else:
            on_path[node] = False
            post.append(node)
    post.reverse()
    return post


def strongly_connected_components(n: int, deps: Sequence[Sequence[int]]) -> list[int]:
    """Component id of each node (Tarjan's SCC algorithm, iterative)."""
    order = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    comp = [-1] * n
    n_comp = 0
    counter = 0
    for step, node, other in _depth_first(n, deps):
        if step is Step.ENTER:
            order[node] = low[node] = counter
            counter += 1
            stack.append(node)
            on_stack[node] = True
        elif step is Step.SEEN:
            if on_stack[other]:
                low[node] = min(low[node], order[other])
        else:
            if other != -1:
                low[other] = min(low[other], low[node])
            if low[node] == order[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    comp[member] = n_comp
                    if member == node:
                        break
                n_comp += 1
    return comp


BaseSort = Callable[[int, Sequence[Sequence[int]]], list[int] | None]


def _sort_condensed(n: int, deps: Sequence[Sequence[int]], base: BaseSort) -> tuple[list[int], list[list[int]]]:
    """Sort a graph with cycles: condense its components, sort, expand in spec order."""
    comp = strongly_connected_components(n, deps)
    # Number the components by their first member in spec order, so ties still follow the spec.
    renumber: dict[int, int] = {}
    members: list[list[int]] = []
    for node in range(n):
        c = comp[node]
        if c not in renumber:
            renumber[c] = len(members)
            members.append([])
        members[renumber[c]].append(node)
    cdeps: list[list[int]] = [[] for _ in members]
    for cid, nodes in enumerate(members):
        seen = {cid}
        for node in nodes:
            for t in deps[node]:
                tc = renumber[comp[t]]
                if tc not in seen:
                    seen.add(tc)
                    cdeps[cid].append(tc)
    corder = base(len(members), cdeps)
    assert corder is not None, "a condensed graph has no cycle"
    order = [node for cid in corder for node in members[cid]]
    return order, [nodes for nodes in members if len(nodes) > 1]


def _alternate(order: list[int]) -> list[int]:
    """First, last, second, second-to-last, ..."""
    n = len(order)
    return [order[i // 2] if i % 2 == 0 else order[n - (i + 1) // 2] for i in range(n)]


_BASE: dict[SortingAlgorithm, BaseSort] = {
    SortingAlgorithm.KAHN: _kahn,
    SortingAlgorithm.REVERSE_KAHN: _kahn,
    SortingAlgorithm.ALTERNATE_KAHN: _kahn,
    SortingAlgorithm.TARJAN: _tarjan,
    SortingAlgorithm.REVERSE_TARJAN: _tarjan,
    SortingAlgorithm.ALTERNATE_TARJAN: _tarjan,
}


def sort_graph(graph: Graph, algorithm: SortingAlgorithm) -> SortResult:
    n = len(graph.selectors)
    base = _BASE[algorithm]
    order = base(n, graph.deps)
    cycles: list[list[int]] = []
    if order is None:
        order, cycles = _sort_condensed(n, graph.deps, base)
    if algorithm in (SortingAlgorithm.REVERSE_KAHN, SortingAlgorithm.REVERSE_TARJAN):
        order.reverse()
    elif algorithm in (SortingAlgorithm.ALTERNATE_KAHN, SortingAlgorithm.ALTERNATE_TARJAN):
        order = _alternate(order)
    s = graph.selectors
    return SortResult(order=[s[i] for i in order], cycles=[[s[i] for i in c] for c in cycles])


def describe_cycles(cycles: Sequence[Sequence[str]]) -> str:
    """``dependency cycle among a, b, c; dependency cycle among x, y`` (members in spec order)."""
    return "; ".join("dependency cycle among " + ", ".join(cycle) for cycle in cycles)


def sort_spec(spec: AppGroupSpec) -> SortResult:
    """The placement order of a spec with its own algorithm; raises InvalidSpecError."""
    return sort_graph(build_graph(spec), spec.topology_sorting_algorithm)
