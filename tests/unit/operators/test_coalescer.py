"""The coalescer: one run per burst of pokes, at once for run_now, again with backoff after a failure."""

import asyncio
import itertools

from toposched.operators.coalescer import Coalescer


async def test_a_burst_of_pokes_is_one_run() -> None:
    runs: list[str] = []

    async def action(key: str) -> None:
        runs.append(key)

    coalescer = Coalescer(action, delay=0.05)
    for _ in range(50):
        coalescer.poke("a")
    coalescer.poke("b")
    await asyncio.sleep(0.15)
    assert sorted(runs) == ["a", "b"]
    coalescer.poke("a")  # a poke after the run is a new burst
    await asyncio.sleep(0.15)
    assert sorted(runs) == ["a", "a", "b"]
    await coalescer.close()


async def test_run_now_does_not_wait_for_the_window() -> None:
    runs: list[str] = []

    async def action(key: str) -> None:
        runs.append(key)

    coalescer = Coalescer(action, delay=60)
    await coalescer.run_now("a")
    assert runs == ["a"]
    await coalescer.close()


async def test_a_failed_run_is_retried_with_backoff() -> None:
    attempts: list[float] = []
    succeeded = asyncio.Event()

    async def action(key: str) -> None:
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) < 3:
            raise RuntimeError("apiserver away")
        succeeded.set()

    coalescer = Coalescer(action, delay=0)
    await coalescer.run_now("a")
    await asyncio.wait_for(succeeded.wait(), 10)
    gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    assert gaps[0] >= 0.45  # 0.5 s, then 1 s
    assert gaps[1] >= 0.95
    await asyncio.sleep(0.2)
    assert len(attempts) == 3  # the third succeeded: no more
    await coalescer.close()


async def test_close_cancels_what_waits() -> None:
    runs: list[str] = []

    async def action(key: str) -> None:
        runs.append(key)

    coalescer = Coalescer(action, delay=0.05)
    coalescer.poke("a")
    await coalescer.close()
    await asyncio.sleep(0.1)
    assert runs == []
