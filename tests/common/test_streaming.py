"""A streamed answer over a synchronous iterator reaches an ASGI server a chunk at a time."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from common.streaming import StreamedResponse


class Counted:
    """Chunks of a download, counting how many were read from the source."""

    def __init__(self, chunks: int) -> None:
        self.chunks, self.read = chunks, 0

    def __iter__(self) -> Iterator[bytes]:
        for _ in range(self.chunks):
            self.read += 1
            yield b"x" * 65536


async def first_part_then_rest(response: StreamedResponse, source: Counted) -> tuple[int, int]:
    """How many chunks the source had given when the server got its first part, and in all."""
    parts = 0
    read_at_first = 0
    async for _ in response:  # what Django's ASGI handler does
        parts += 1
        if parts == 1:
            read_at_first = source.read
    return read_at_first, parts


def test_under_asgi_a_synchronous_download_is_not_read_whole_before_its_first_byte():
    source = Counted(1000)  # 62.5 MiB
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Django warns when it would read the iterator whole
        # A loop of its own in a thread of its own: the browser tests' Playwright runs one in this thread.
        with ThreadPoolExecutor(1) as thread:
            read_at_first, parts = thread.submit(
                asyncio.run, first_part_then_rest(StreamedResponse(source), source)
            ).result()

    assert read_at_first == 1
    assert parts == 1000


def test_under_wsgi_it_is_the_same_synchronous_stream():
    source = Counted(3)
    response = StreamedResponse(source)

    assert b"".join(response) == b"x" * 65536 * 3
