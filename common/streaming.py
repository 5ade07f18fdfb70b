"""One home for an HTTP answer streamed from a synchronous iterator (a file a user's agent
pipes out, a job's log read as its owner), under WSGI and ASGI alike.

Why not plain ``StreamingHttpResponse``: served under ASGI (uvicorn: ``make demo`` and
the production web process, since the sessions' proxy needs it), Django 5.2 reads a
synchronous iterator whole into a list before it sends a byte ("StreamingHttpResponse
must consume synchronous iterators"), so a 1 GiB download held 1 GiB of the worker's
memory. :class:`StreamedResponse` hands the ASGI server one chunk at a time, each read
in a worker thread of its own (not Django's one thread for sync code, which a long
download would otherwise hold), and stays the plain synchronous iteration under WSGI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import cast

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse


def _next_part(parts: Iterator[bytes]) -> bytes | None:
    """The next chunk, or None once there is none (a chunk is bytes, never None)."""
    return next(parts, None)


class StreamedResponse(StreamingHttpResponse):
    """A ``StreamingHttpResponse`` whose synchronous content streams under ASGI too."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.is_async:
            async for chunk in super().__aiter__():
                yield chunk
            return
        parts = cast(Iterator[bytes], self.streaming_content)  # not is_async: Django's map over a sync iterator
        take = sync_to_async(_next_part, thread_sensitive=False)
        while (part := await take(parts)) is not None:
            yield part
