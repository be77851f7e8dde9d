"""The benchmark report: sections merged into the reference run by run, goals judged, every section dated."""

from pathlib import Path
from typing import Any

import pytest

from bench import goals, reference, report

WHEN = {"old": "2026-11-20T10:00:00+00:00", "new": "2026-11-28T14:03:09+00:00"}


def run(when: str, full: bool = False) -> dict[str, Any]:
    return {
        "when": WHEN[when],
        "full": full,
        "real_nodes": 8,
        "version": "0.1.0",
        "versions": {"kubernetes": "v1.36.3", "kwok": "v0.8.0"},
        "machine": {"python": "3.11.7", "platform": "Linux", "cpus": 2, "memory_gib": 23.5},
        "seconds": {"step": 120.0},
    }


def sections(**figures: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A results document: section -> (which run, its figures)."""
    return {"sections": {name: {"run": run(when), "figures": f} for name, (when, f) in figures.items()}}


@pytest.mark.parametrize(
    ("committed", "measured", "expected"),
    [
        pytest.param({}, {"scale": "new"}, {"scale": "new"}, id="first-run"),
        pytest.param(
            {"numa": "old", "scale": "old"}, {"scale": "new"}, {"numa": "old", "scale": "new"}, id="subset-keeps-others"
        ),
        pytest.param(
            {"scale": "old"}, {"numa": "new", "dra": "new"}, {"numa": "new", "dra": "new", "scale": "old"}, id="adds"
        ),
        pytest.param({"smt": "old"}, {}, {"smt": "old"}, id="nothing-measured"),
    ],
)
def test_a_run_replaces_the_sections_it_measured(
    committed: dict[str, str], measured: dict[str, str], expected: dict[str, str]
) -> None:
    def doc(which: dict[str, str]) -> dict[str, Any]:
        return sections(**{name: (when, {name: when}) for name, when in which.items()})

    merged = reference.merge(doc(committed), doc(measured))
    assert {name: s["figures"][name] for name, s in merged["sections"].items()} == expected
    assert list(merged["sections"]) == [s for s in reference.SECTIONS if s in expected]  # the report's order


def test_figures_of_every_section_in_one_mapping() -> None:
    doc = sections(extender=("old", {"schedhook": 1, "capacity": 2}), network=("new", {"network": 3}))
    assert reference.figures(doc) == {"schedhook": 1, "capacity": 2, "network": 3}
    assert reference.run_of(doc, "network") == run("new")
    assert reference.run_of(doc, "smt") is None


def test_a_missing_reference_loads_empty(tmp_path: Path) -> None:
    assert reference.load(tmp_path / "results.json") == {"sections": {}}
    (tmp_path / "results.json").write_text(reference.dump(sections(dra=("old", {"dra": {}}))))
    assert reference.run_of(reference.load(tmp_path / "results.json"), "dra") == run("old")


@pytest.mark.parametrize(
    ("target", "at_most", "value", "met", "margin"),
    [
        pytest.param(0.8, False, 0.32, False, "missed by 60%", id="throughput-short"),
        pytest.param(0.8, False, 1.0, True, "25% to spare", id="throughput-above"),
        pytest.param(2.0, True, 3.0, False, "missed by 50%", id="cpu-over"),
        pytest.param(1.3, True, 1.3, True, "0% to spare", id="latency-at-the-limit"),
        pytest.param(3.0, False, None, None, "not measured", id="not-measured"),
    ],
)
def test_a_verdict_says_met_and_by_how_much(
    target: float, at_most: bool, value: float | None, met: bool | None, margin: str
) -> None:
    verdict = goals.Verdict("goal", target, at_most, value)
    assert (verdict.met, verdict.margin) == (met, margin)


def spread(median: float) -> dict[str, float]:
    return {"median": median, "min": median, "max": median}


def figures_of(pps: float, p99: float, cpu: dict[str, float], **more: Any) -> dict[str, Any]:
    return {
        "pods_per_second": spread(pps),
        "stream_p99_ms": spread(p99),
        "stream_median_ms": spread(p99 / 3),
        "cpu_ms_per_pod": {process: spread(v) for process, v in cpu.items()},
        **{key: spread(v) for key, v in more.items()},
    }


def size(nodes: int, tp_pps: float, tp_p99: float, extender_cpu: float) -> dict[str, Any]:
    """A size of the curve: kube-scheduler alone 100 pods/s, p99 20 ms, 1 CPU ms per pod; scheduler-plugins 20/s."""
    raised = {
        "plain": figures_of(100, 20, {"kube-scheduler": 1.0, "kube-apiserver": 1.5}),
        "toposched": figures_of(
            tp_pps,
            tp_p99,
            {"kube-scheduler": 1.2, "extender": extender_cpu, "kube-apiserver": 2.0},
            throughput_ratio=tp_pps / 100,
            extender_cpu_ratio=extender_cpu,
        ),
        "sp-numa": figures_of(20, 300, {"kube-scheduler": 4.0}, throughput_ratio=0.2),
    }
    defaults = {"plain": figures_of(55.5, 18, {"kube-scheduler": 1.1}), "toposched": figures_of(76, 25, {})}
    return {
        "nodes": nodes,
        "shape": "two-numa",
        "schedulers": ["plain", "toposched", "sp-numa"],
        "client_limits": {
            "raised": {"qps": 5000, "burst": 5000, "repeats": 3},
            "defaults": {"qps": 50, "burst": 100, "repeats": 1},
        },
        "raised": raised,
        "defaults": defaults,
        "extender_requests": {"filter": {"count": 1000, "mean_ms": 1.2, "p99_le_ms": 5.0}},
    }


CURVE = {"1000": size(1000, 90, 24, 1.5), "5000": size(5000, 70, 40, 2.5), "10000": size(10_000, 50, 80, 3.0)}


@pytest.mark.parametrize(
    ("goal", "met", "shows"),
    [
        pytest.param("1000: toposched >= 0.8 x kube-scheduler alone's throughput", True, "", id="1000-throughput"),
        pytest.param("5000: toposched >= 0.8 x kube-scheduler alone's throughput", False, "extender 2.50", id="5000"),
        pytest.param("10000: toposched >= 3 x scheduler-plugins' throughput", False, "", id="10000-vs-sp"),
        pytest.param("5000: extender CPU per pod <= 2 x kube-scheduler's", False, "extender 2.50", id="cpu"),
        pytest.param("1000: paced creation -> bound p99 <= 1.3 x alone's", True, "", id="1000-latency"),
        pytest.param("5000: paced creation -> bound p99 <= 1.3 x alone's", False, "filter 1.2 ms", id="5000-latency"),
    ],
)
def test_each_goal_is_judged_on_the_raised_runs(goal: str, met: bool, shows: str) -> None:
    verdicts = {v.goal: v for v in goals.issue_goals(CURVE)}
    assert verdicts[goal].met is met
    assert shows in verdicts[goal].shows if shows else verdicts[goal].shows == ""


def test_goals_at_sizes_they_name_only() -> None:
    named = [v.goal for v in goals.issue_goals(CURVE)]
    assert [g for g in named if g.startswith("10000")] == ["10000: toposched >= 3 x scheduler-plugins' throughput"]
    assert sum("CPU" in g for g in named) == 1


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The report of a scale section and a network section (rendered once: plotting is slow)."""
    plots = tmp_path_factory.mktemp("plots")
    return report.render(sections(scale=("new", {"scale": CURVE}), network=("old", {})), plots), plots


def test_the_report_dates_every_section_and_says_which_were_never_run(rendered: tuple[str, Path]) -> None:
    text, _ = rendered
    assert "| scale | 2026-11-28 14:03 UTC, quick run | 0.1.0 | v1.36.3 | 2 CPUs, 23.5 GiB | 2 |" in text
    assert "*Section scale: 2026-11-28 14:03 UTC, quick run.*" in text
    assert "*Section network: 2026-11-20 10:00 UTC, quick run.*" in text
    assert "*Section smt: not run yet; `python -m bench --only smt` measures it on real kubelet nodes.*" in text
    assert text.index("Section numa") < text.index("Section scale") < text.index("Section components")


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(
            "| 1000 | raised | 3 | kube-scheduler alone | 100 (100-100) | 1 | 7 (7-7) | 20 (20-20) | - |", id="alone"
        ),
        pytest.param(
            "| 5000 | raised | 3 | + toposched (default: MostAllocated) | 70 (70-70) | 0.7 (0.7-0.7) |", id="tp"
        ),
        pytest.param("| 1000 | defaults | 1 | kube-scheduler alone | 55.5 (55.5-55.5) | 1 |", id="defaults"),
        pytest.param(
            "| 5000 | raised | + toposched (default: MostAllocated) | 1.20 (1.20-1.20) | 2.50 (2.50-2.50) |", id="cpu"
        ),
        pytest.param(
            "| 5000: extender CPU per pod <= 2 x kube-scheduler's | 2.5 x: extender 2.50 vs kube-scheduler", id="goal"
        ),
    ],
)
def test_the_scale_section_says_which_limits_each_figure_ran_with(rendered: tuple[str, Path], row: str) -> None:
    assert row in rendered[0]


def test_the_curves_are_plotted_beside_the_report(rendered: tuple[str, Path]) -> None:
    plots = rendered[1]
    assert (plots / "scale-curve.png").exists()
    assert not (plots / "latency.png").exists()  # no run kept its latencies: no CDF


def test_a_goal_at_a_size_the_curve_lacks_is_listed_as_not_measured() -> None:
    verdicts = goals.issue_goals({"1000": CURVE["1000"]})
    missing = [v for v in verdicts if v.goal.startswith("5000")]
    assert len(missing) == 4
    assert {(v.met, v.margin, v.measured) for v in missing} == {(None, "not measured", "-")}
