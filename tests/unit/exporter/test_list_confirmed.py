"""A changed PodResources List is published once a second read agrees: the kubelet admits a pod
manager by manager, and a List read in between shows the pod without its CPUs."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toposched.exporter import daemon
from toposched.exporter.daemon import Exporter
from toposched.exporter.settings import ExporterSettings
from toposched.exporter.topology import Allocatable, PodUse

A, B, C = PodUse("ns", "a"), PodUse("ns", "b"), PodUse("ns", "c")


class Kubelet:
    """Answers List from ``lists`` in turn (the last one for ever); at each call, notes what the
    exporter holds by then (after it handled the previous read)."""

    def __init__(self, lists: list[list[PodUse]], exporter: Exporter, reads: int) -> None:
        self.lists = lists
        self.exporter = exporter
        self.reads = reads
        self.seen: list[list[PodUse] | None] = []
        self.calls = 0
        self.done = asyncio.Event()

    async def list_pods(self) -> list[PodUse]:
        if self.calls:
            self.seen.append(self.exporter.pods)
        if len(self.seen) >= self.reads:
            self.done.set()
        self.calls += 1
        return self.lists[min(self.calls - 1, len(self.lists) - 1)]

    async def allocatable(self) -> Allocatable:
        return Allocatable(cpu_ids=(), memory=())


async def published(lists: list[list[PodUse]], reads: int, tmp_path: Path) -> list[list[PodUse] | None]:
    """What the exporter holds for publishing after each of the first ``reads`` reads."""
    exporter = Exporter(ExporterSettings(kubelet_state_dir=tmp_path, list_interval=0.1))
    kubelet = Kubelet(lists, exporter, reads)
    poll = asyncio.create_task(exporter.poll_pods(kubelet))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(kubelet.done.wait(), 10)
    finally:
        poll.cancel()
    return kubelet.seen[:reads]


@pytest.mark.parametrize(
    ("lists", "expected"),
    [
        pytest.param([[A], [A, B], [A, B]], [[A], [A], [A, B]], id="confirmed-by-the-next-read"),
        pytest.param([[A], [A, B], [A, C], [A, C]], [[A], [A], [A], [A, C]], id="a-passing-list-never-published"),
    ],
)
async def test_a_changed_list_waits_for_a_second_read(
    lists: list[list[PodUse]], expected: list[Any], tmp_path: Path
) -> None:
    assert await published(lists, len(expected), tmp_path) == expected


async def test_a_list_that_keeps_changing_is_published_after_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon, "CONFIRM_WITHIN", 0.25)
    changing = [[A]] + [[A, PodUse("ns", f"p{i}")] for i in range(20)]
    seen = await published(changing, 8, tmp_path)
    assert seen[1] == [A]  # the first change waits
    assert seen[-1] != [A]  # but not for ever


@pytest.mark.parametrize(
    ("changes", "interval"),
    [
        pytest.param([("List", True)], daemon.RELEASE_WRITE_INTERVAL, id="a-pod-let-go"),
        pytest.param([("List", True), ("List", True)], daemon.RELEASE_WRITE_INTERVAL, id="two-let-go"),
        pytest.param([("List", False)], 1.0, id="a-pod-admitted"),
        pytest.param([("List", True), ("cpu_manager_state", False)], 1.0, id="let-go-then-a-checkpoint-written"),
        pytest.param([("cpu_manager_state", False), ("List", True)], 1.0, id="a-checkpoint-then-let-go"),
    ],
)
def test_pods_let_go_are_written_sooner_than_other_changes(changes: list[tuple[str, bool]], interval: float) -> None:
    """The kubelet gives a pod's CPUs to the next pod as soon as it lets go of it."""
    exporter = Exporter(ExporterSettings(min_write_interval=1.0))
    for why, release in changes:
        exporter.mark_changed(why, release=release)
    assert exporter.write_interval() == interval
    exporter.changed.clear()  # written
    exporter.mark_changed("List", release=False)
    assert exporter.write_interval() == 1.0


async def test_a_list_with_fewer_pods_is_a_release(tmp_path: Path) -> None:
    exporter = Exporter(ExporterSettings(kubelet_state_dir=tmp_path, list_interval=0.1))
    exporter.pods, exporter.pods_digest = [A, B], hash((A, B))  # published

    class Written(Kubelet):  # each change written before the next read
        async def list_pods(self) -> list[PodUse]:
            exporter.changed.clear()
            return await super().list_pods()

    kubelet = Written([[A], [A]], exporter, 2)
    poll = asyncio.create_task(exporter.poll_pods(kubelet))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(kubelet.done.wait(), 10)
    finally:
        poll.cancel()
    assert exporter.pods == [A]
    assert exporter.only_releases
