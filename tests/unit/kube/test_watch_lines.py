"""A watch stream's events are read whole, however long, however the bytes arrive."""

import asyncio
import random

import aiohttp
import pytest
from aiohttp.base_protocol import BaseProtocol

from toposched.kube.watch import event_lines


async def lines_of(chunks: list[bytes], limit: int = 2**24) -> list[bytes]:
    loop = asyncio.get_running_loop()
    content = aiohttp.StreamReader(BaseProtocol(loop), 2**26, loop=loop)  # never pauses: no transport here
    for chunk in chunks:
        content.feed_data(chunk)
    content.feed_eof()
    return [line async for line in event_lines(content, limit)]


def split(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), min(40, len(data) - 1)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@pytest.mark.parametrize("seed", range(5))
async def test_lines_far_above_aiohttps_limit_arrive_whole(seed: int) -> None:
    rng = random.Random(seed)
    events = [b'{"n":%d,"pad":"%s"}' % (i, b"x" * rng.choice((10, 600_000, 3_000_000))) for i in range(6)]
    data = b"\n".join(events) + b"\n\n" + (b"" if seed % 2 else b'{"tail":1}')
    expected = events + ([] if seed % 2 else [b'{"tail":1}'])
    assert await lines_of(split(data, rng)) == expected


async def test_a_line_past_the_limit_is_an_error() -> None:
    with pytest.raises(ValueError, match="longer than 1000 bytes"):
        await lines_of([b"y" * 3000], limit=1000)
