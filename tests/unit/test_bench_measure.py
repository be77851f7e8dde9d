"""The benchmarks' arithmetic: equal client limits for every scheduler, CPU per pod less the idle rate."""

from string import Template
from typing import Any

import pytest
import yaml

from bench import cpu, scale
from bench.harness import DEFAULT_LIMITS, PLAIN, RAISED_LIMITS, ClientLimits
from testkit.extender import SCHEDULER_CONFIG


def chart_config() -> str:
    """The chart's kube-scheduler configuration, its placeholders filled."""
    return Template(SCHEDULER_CONFIG.read_text()).safe_substitute(KUBECONFIG="/k", EXTENDER_SERVER_NAME="")


@pytest.mark.parametrize(
    ("configuration", "limits"),
    [
        pytest.param(Template(PLAIN).substitute(kubeconfig="/k"), RAISED_LIMITS, id="plain-raised"),
        pytest.param(Template(PLAIN).substitute(kubeconfig="/k"), DEFAULT_LIMITS, id="plain-defaults"),
        pytest.param(chart_config(), RAISED_LIMITS, id="chart-raised"),
        pytest.param(chart_config(), DEFAULT_LIMITS, id="chart-overridden-to-the-defaults"),
    ],
)
def test_every_scheduler_gets_the_limits_of_the_run(configuration: str, limits: ClientLimits) -> None:
    before, after = yaml.safe_load(configuration), yaml.safe_load(limits.apply(configuration))
    assert after["clientConnection"] == {"kubeconfig": "/k", "qps": limits.qps, "burst": limits.burst}
    assert {k: v for k, v in after.items() if k != "clientConnection"} == {
        k: v for k, v in before.items() if k != "clientConnection"
    }


def test_the_defaults_are_kube_schedulers_own() -> None:
    assert (DEFAULT_LIMITS.qps, DEFAULT_LIMITS.burst) == (50, 100)


@pytest.mark.parametrize(
    ("cmdline", "role"),
    [
        pytest.param(["/bin/kube-scheduler", "--config=/w/plain.yaml", "--secure-port=0"], "kube-scheduler", id="ks"),
        pytest.param(["/bin/sp-scheduler", "--config=/w/sp-numa.yaml"], "kube-scheduler", id="scheduler-plugins"),
        pytest.param(["python", "-m", "toposched", "schedhook", "--port", "1"], "extender", id="extender"),
        pytest.param(["python", "-m", "toposched", "operator"], None, id="operator"),
    ],
)
def test_a_process_role_from_its_command_line(cmdline: list[str], role: str | None) -> None:
    assert cpu.role(cmdline) == role


def sample(at: float, pods: int, **used: float) -> cpu.Sample:
    return cpu.Sample(at, pods, {name.replace("_", "-"): v for name, v in used.items()})


@pytest.mark.parametrize(
    ("first", "last", "idle", "expected"),
    [
        pytest.param(
            sample(10, 1, kube_scheduler=1.0),
            sample(20, 1001, kube_scheduler=3.0),
            {},
            {"kube-scheduler": 2.0},
            id="raw",
        ),
        pytest.param(
            sample(10, 1, kube_apiserver=5.0),
            sample(20, 501, kube_apiserver=7.0),
            {"kube-apiserver": 0.1},
            {"kube-apiserver": 2.0},  # (2 s - 0.1 x 10 s) / 500 pods
            id="less-idle",
        ),
        pytest.param(
            sample(10, 1, etcd=1.0), sample(20, 101, etcd=1.2), {"etcd": 0.05}, {"etcd": 0.0}, id="never-negative"
        ),
        pytest.param(
            sample(10, 1, kube_scheduler=1.0),
            sample(20, 101, kube_scheduler=2.0, extender=9.0),
            {},
            {"kube-scheduler": 10.0},
            id="sampled-in-both-only",
        ),
        pytest.param(sample(10, 5, etcd=1.0), sample(20, 5, etcd=2.0), {}, {}, id="no-pod-bound"),
    ],
)
def test_cpu_per_pod(first: cpu.Sample, last: cpu.Sample, idle: dict[str, float], expected: dict[str, float]) -> None:
    assert cpu.per_pod_ms(cpu.window(first, last, {}), idle) == expected


def backlog(apiserver: float, idle_apiserver: float, scheduler: float, idle_scheduler: float) -> dict[str, Any]:
    """A backlog of 100 pods over 10 s."""
    first = sample(0, 0, kube_apiserver=0.0, kube_scheduler=0.0)
    last = sample(10, 100, kube_apiserver=apiserver, kube_scheduler=scheduler)
    return {"cpu": cpu.window(first, last, {"kube-apiserver": idle_apiserver, "kube-scheduler": idle_scheduler})}


def test_the_control_plane_is_charged_less_its_quietest_idle_rate_of_the_runs_on_the_nodes() -> None:
    runs = [backlog(1.5, 0.1, 0.5, 0.01), backlog(2.5, 0.2, 0.6, 0.02), {"pods_per_second": 0}]
    cpu.settle(runs)
    # apiserver: (1.5 - 0.1 x 10) / 100 and (2.5 - 0.1 x 10) / 100; each scheduler less its own idle
    assert [r.get("cpu_ms_per_pod") for r in runs] == [
        {"kube-apiserver": 5.0, "kube-scheduler": 4.0},
        {"kube-apiserver": 15.0, "kube-scheduler": 4.0},
        None,
    ]


@pytest.mark.parametrize(
    ("rates", "expected"),
    [
        pytest.param(
            [{"etcd": 0.2}, {"etcd": 0.1, "kube-apiserver": 0.3}], {"etcd": 0.1, "kube-apiserver": 0.3}, id="min"
        ),
        pytest.param([], {}, id="none"),
    ],
)
def test_the_lowest_idle_rate_counts(rates: list[dict[str, float]], expected: dict[str, float]) -> None:
    assert cpu.lowest(*rates) == expected


@pytest.mark.parametrize(
    ("curve", "kept"),
    [
        pytest.param({"1000": {"nodes": 1000, "stopped": {"step": "nodes"}}}, False, id="stopped-before-any-run"),
        pytest.param({"1000": {"nodes": 1000, "skipped": "no room"}}, False, id="skipped"),
        pytest.param(
            {"1000": {"nodes": 1000, "runs": {"raised": {}}}, "5000": {"stopped": {"step": "nodes"}}},
            True,
            id="one-size-ran",
        ),
    ],
)
def test_a_curve_that_ran_no_scheduler_leaves_the_reference_alone(curve: dict[str, Any], kept: bool) -> None:
    assert (scale.measured(curve) is curve) is kept
