"""scheduler-plugins (``sigs.k8s.io/scheduler-plugins``, "SP") in the bench harness.

Its scheduler, built from the Go module by hack/build-scheduler-plugins.sh, runs beside the
others against the same control plane, and reads the objects toposched publishes: the NRTs
(simulated or from ``toposched exporter``), the AppGroups' ``status.topologyOrder`` (written by
``toposched operator``) and the NetworkTopologies. Its profiles follow its own documentation:

- ``sp-numa``: NodeResourceTopologyMatch at every extension point (filter, score, reserve) with
  the OverReserve cache its documentation recommends (``cacheResyncPeriodSeconds: 5``, which
  relies on the NRT's pods fingerprint) and LeastAllocated scoring;
- ``sp-network``: TopologicalSort as the queue sort and NetworkOverhead (weight 5), both reading
  the run namespaces. Unlike its example configuration, NodeResourcesFit stays enabled: with it
  disabled nodes are overcommitted, and the costs would not compare with the others'.

Each is its own process: every profile of one scheduler must share the queue sort.
"""

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Sequence

from bench.harness import Harness, SetupError
from testkit.paths import REPO

NUMA = "sp-numa"
NETWORK = "sp-network"
RESYNC_SECONDS = 5

_HEAD = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{kubeconfig: {kubeconfig}}}
leaderElection: {{leaderElect: false}}
"""

_NUMA = """profiles:
- schedulerName: {name}
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourceTopologyMatch
  pluginConfig:
  - name: NodeResourceTopologyMatch
    args:
      scoringStrategy: {{type: {strategy}}}
      cacheResyncPeriodSeconds: {resync}
"""

_NETWORK = """profiles:
- schedulerName: {name}
  plugins:
    queueSort:
      enabled: [{{name: TopologicalSort}}]
      disabled: [{{name: "*"}}]
    multiPoint:
      enabled:
      - name: NetworkOverhead
        weight: 5
  pluginConfig:
  - name: TopologicalSort
    args:
      namespaces: {namespaces}
  - name: NetworkOverhead
    args:
      namespaces: {namespaces}
      weightsName: {weights}
      networkTopologyName: {topology}
"""


def binary() -> str:
    """The scheduler's path, built first when missing (about 10 minutes the first time)."""
    done = subprocess.run(
        [str(REPO / "hack" / "build-scheduler-plugins.sh")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SetupError(f"could not build scheduler-plugins: {done.stderr.strip()[-1000:]}")
    return done.stdout.strip().splitlines()[-1]


def version() -> str:
    for line in (REPO / "hack" / "versions.env").read_text().splitlines():
        if line.startswith("SCHEDULER_PLUGINS_VERSION="):
            return line.split("=", 1)[1]
    return "unknown"


def numa_config(kubeconfig: str, name: str = NUMA, strategy: str = "LeastAllocated") -> str:
    return _HEAD.format(kubeconfig=kubeconfig) + _NUMA.format(name=name, strategy=strategy, resync=RESYNC_SECONDS)


def network_config(kubeconfig: str, namespaces: Sequence[str], topology: str, weights: str = "UserDefined") -> str:
    listed = "[" + ", ".join(namespaces) + "]"
    return _HEAD.format(kubeconfig=kubeconfig) + _NETWORK.format(
        name=NETWORK, namespaces=listed, topology=topology, weights=weights
    )


@contextlib.asynccontextmanager
async def numa_running(h: Harness, schedulers: Sequence[str]) -> AsyncIterator[None]:
    """SP's NUMA profile while the block runs, if ``schedulers`` includes it: a fresh process for
    each run, started once the NRTs are up to date. Its cache lists the NRTs once, at start; it
    marks a node where another scheduler's pods ran as not fresh until a resync, and its resync
    skips a node without any pod ("cannot find any pod for node"), so on the bench's emptied
    nodes a long-running process would never place a pod again."""
    if NUMA not in schedulers:
        yield
        return
    proc = h.start_scheduler(await asyncio.to_thread(binary), numa_config(str(h.kubeconfig)), NUMA)
    await asyncio.sleep(3)  # its informers sync
    try:
        yield
    finally:
        h.stop(proc)


@contextlib.asynccontextmanager
async def network_running(h: Harness, namespaces: Sequence[str], topology: str) -> AsyncIterator[None]:
    """SP's network profile for ``namespaces``, and ``toposched operator`` (whose AppGroup
    ``status.topologyOrder`` its TopologicalSort reads)."""
    config = network_config(str(h.kubeconfig), namespaces, topology)
    proc = h.start_scheduler(await asyncio.to_thread(binary), config, NETWORK)
    operator = h.start_operator()
    await asyncio.sleep(3)
    try:
        yield
    finally:
        h.stop(proc)
        h.stop(operator)
