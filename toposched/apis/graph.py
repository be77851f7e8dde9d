"""The dependency graph of an AppGroup spec, with the checks that make a spec valid. Pure.

Shared by the operator (which sorts it) and the validating webhook (which rejects specs that
cannot be turned into a graph). One node per workload in spec order, identified by selector;
an edge A -> B for each dependency B of A, in declared order.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from toposched.apis.appgroup import AppGroupSpec


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
