"""The exporter's parsers against mutated real inputs: sysfs trees and kubelet configurations give
a machine (and an NRT the API accepts) or one error line naming the file; never a hang."""

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit import sysfs
from testkit.fuzz import garbled, mutate_sysfs, one_line, parse_error, seeds
from toposched.exporter.kubeletconfig import KubeletConfig, parse
from toposched.exporter.sysfs import read_machine
from toposched.exporter.topology import Inputs, build

KUBELET = seeds().kubelet


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("machines")
    return {"two_socket": sysfs.two_socket(root / "two"), "eight_node": sysfs.eight_node(root / "eight")}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["two_socket", "eight_node"]), st.integers(0, 2**32), st.integers(1, 3))
def test_sysfs(
    machines: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, kind: str, seed: int, rounds: int
) -> None:
    work = tmp_path_factory.mktemp("case")
    shutil.copytree(machines[kind].parent, work / "machine", symlinks=True)
    root = work / "machine" / "sys"
    rng = random.Random(seed)
    for _ in range(rounds):
        mutate_sysfs(root, rng)
    machine = None

    def read() -> None:
        nonlocal machine
        machine = read_machine(root, total_memory=lambda: 2**34)

    error = parse_error(read)
    assert error is None or one_line(error)
    if machine is not None:  # what it gives is a machine the NRT model takes as it is
        build(Inputs(node="n", machine=machine, kubelet=KubeletConfig()))
    shutil.rmtree(work)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 4))
def test_kubelet_configuration(seed: int, rounds: int) -> None:
    data = garbled(KUBELET, seed, rounds)
    if isinstance(data, dict):
        error = parse_error(lambda: parse(data, "config.yaml"))
        assert error is None or (one_line(error) and error.startswith("config.yaml: "))
