"""Pure topological sort of the largest random AppGroup the API accepts: median time per algorithm."""

import random
import time
from typing import Any

from bench.stats import summary
from testkit.builders import appgroup_spec
from toposched.apis.appgroup import AppGroupSpec, SortingAlgorithm
from toposched.apis.limits import MAX_WORKLOADS
from toposched.operators.appgroup.toposort import build_graph, sort_graph


def random_dag_spec(n: int, max_deps: int, seed: int) -> AppGroupSpec:
    """Workloads w0..w(n-1) in a shuffled spec order; each depends on up to ``max_deps`` later ones."""
    rng = random.Random(seed)
    names = [f"w{i}" for i in range(n)]
    deps = {}
    for i in range(n):
        later = rng.sample(range(i + 1, n), min(max_deps, n - i - 1)) if i + 1 < n else []
        deps[names[i]] = [names[j] for j in later]
    rng.shuffle(names)
    return AppGroupSpec.model_validate(appgroup_spec({w: deps[w] for w in names}))


def run(workloads: int = MAX_WORKLOADS, max_deps: int = 3, repeats: int = 15) -> dict[str, Any]:
    spec = random_dag_spec(workloads, max_deps, seed=1)
    edges = sum(len(w.dependencies or ()) for w in spec.workloads)
    build = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        graph = build_graph(spec)
        build.append((time.perf_counter() - t0) * 1000)
    results: dict[str, Any] = {
        "workloads": workloads,
        "edges": edges,
        "build_graph_ms": summary(build, "ms"),
        "sort_ms": {},
    }
    for algorithm in SortingAlgorithm:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sort_graph(graph, algorithm)
            times.append((time.perf_counter() - t0) * 1000)
        results["sort_ms"][algorithm.value] = summary(times, "ms")
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
