"""Placement order of an AppGroup's workloads: six deterministic topological sorts.

Pure: plain models in, plain lists out. The graph has one node per workload in spec order
(isolated workloads included) and an edge A -> B for each dependency B of A, in declared
order. Every tie is broken by spec order or declared order, never by hash order, so the same
spec always gives the same order.

A cycle does not stop the sort: its strongly connected components are condensed into single
nodes (placed at the position of their first member in spec order), the condensed graph is
sorted, and each component is expanded into its members in spec order.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from apis.appgroup import AppGroupSpec, SortingAlgorithm


class InvalidSpecError(ValueError):
    """The spec cannot be turned into a graph; the message lists every problem found."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class Graph:
    """Workloads by selector in spec order; ``deps[i]`` are indices of node i's dependencies."""

    selectors: tuple[str, ...]
    names: tuple[str, ...]
    deps: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class SortResult:
    order: list[str]
    """Workload selectors, first to place first."""
    cycles: list[list[str]] = field(default_factory=list)
    """Members (selectors, spec order) of each dependency cycle, in spec order of their first member."""


def build_graph(spec: AppGroupSpec) -> Graph:
    """The dependency graph of a spec, or InvalidSpecError naming each problem precisely.

    Workloads are identified by ``selector`` (the pod label value the scheduler matches on);
    a dependency must name an existing workload with the same selector and name.
    """
    problems: list[str] = []
    index: dict[str, int] = {}
    names: dict[str, str] = {}
    for i, item in enumerate(spec.workloads):
        w = item.workload
        if w.selector in index:
            problems.append(
                f"workloads[{i}]: selector {w.selector!r} is already used by workloads[{index[w.selector]}]"
            )
        else:
            index[w.selector] = i
        if w.name in names:
            problems.append(f"workloads[{i}]: name {w.name!r} is already used by workload {names[w.name]!r}")
        else:
            names[w.name] = w.selector

    workload_names = [item.workload.name for item in spec.workloads]
    deps: list[tuple[int, ...]] = []
    for i, item in enumerate(spec.workloads):
        mine: list[int] = []
        for j, dep in enumerate(item.dependencies or ()):
            target = index.get(dep.workload.selector)
            valid = target is not None and dep.workload.name == workload_names[target]
            if valid and target is not None and target != i and target not in mine:
                mine.append(target)
                continue
            # The slow path only runs for a bad dependency, to say exactly what is wrong.
            where = f"workloads[{i}] ({item.workload.selector}).dependencies[{j}]"
            if target is None:
                problems.append(f"{where}: no workload has selector {dep.workload.selector!r}")
            elif dep.workload.name != workload_names[target]:
                problems.append(
                    f"{where}: names {dep.workload.name!r} but the workload with selector "
                    f"{dep.workload.selector!r} is named {workload_names[target]!r}"
                )
            elif target == i:
                problems.append(f"{where}: a workload cannot depend on itself")
            else:
                problems.append(f"{where}: {dep.workload.selector!r} is listed twice")
        deps.append(tuple(mine))
    if problems:
        raise InvalidSpecError(problems)
    return Graph(
        selectors=tuple(item.workload.selector for item in spec.workloads),
        names=tuple(workload_names),
        deps=tuple(deps),
    )


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


def _tarjan(n: int, deps: Sequence[Sequence[int]]) -> list[int] | None:
    """Reverse post-order of a depth-first search; None when it meets a back edge (a cycle)."""
    white, grey, black = 0, 1, 2
    colour = [white] * n
    post: list[int] = []
    for root in range(n):
        if colour[root] != white:
            continue
        colour[root] = grey
        # Iterative DFS: (node, position of the next dependency to visit).
        frames: list[list[int]] = [[root, 0]]
        while frames:
            frame = frames[-1]
            node, pos = frame
            targets = deps[node]
            if pos < len(targets):
                frame[1] = pos + 1
                t = targets[pos]
                if colour[t] == white:
                    colour[t] = grey
                    frames.append([t, 0])
                elif colour[t] == grey:
                    return None
            else:
                colour[node] = black
                post.append(node)
                frames.pop()
    post.reverse()
    return post


def strongly_connected_components(n: int, deps: Sequence[Sequence[int]]) -> list[int]:
    """Component id of each node (Tarjan's SCC algorithm, iterative)."""
    counter = 0
    order = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    comp = [-1] * n
    n_comp = 0
    for root in range(n):
        if order[root] != -1:
            continue
        order[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        frames: list[list[int]] = [[root, 0]]
        while frames:
            frame = frames[-1]
            node, pos = frame
            targets = deps[node]
            if pos < len(targets):
                frame[1] = pos + 1
                t = targets[pos]
                if order[t] == -1:
                    order[t] = low[t] = counter
                    counter += 1
                    stack.append(t)
                    on_stack[t] = True
                    frames.append([t, 0])
                elif on_stack[t]:
                    low[node] = min(low[node], order[t])
                continue
            frames.pop()
            if frames:
                parent = frames[-1][0]
                low[parent] = min(low[parent], low[node])
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
