"""A job's output, read from its workload manager: its tail (the quick view), and its
whole log, each rank's stdout and stderr where the backend keeps them apart
(:class:`~scheduler.backends.base.LogStreamer`), streamed or read on from an offset.

One home for what the API, the job page and ``qm log`` ask of a log: which logs a job
has (:func:`job_log_sources`), which one a request names (:func:`choose_source`, its
problems by field), a piece from an offset (:func:`read_log_part`) and the whole, streamed
(:func:`stream_job_log`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import chain

from scheduler.backends.base import LOG_STREAMS, BackendError, LogSource, LogStreamer
from scheduler.choices import TERMINAL_STATES
from scheduler.jobs.remote import backend_for
from scheduler.models import Job

#: The quick view's tail may be this long at most (API ``max_bytes``); a piece read from
#: an offset too.
MAX_PART_BYTES = 1_048_576
#: What a request that names no log gets, and what a job that has none yet offers.
WHOLE_JOB = LogSource(None, "combined")


def read_job_log(job: Job, max_bytes: int = 65536) -> str:
    """The job's output so far ('' before it starts or if the backend lost it)."""
    if job.cluster is None or not job.external_id:
        return ""
    try:
        return backend_for(job.cluster).read_log(job.external_id, max_bytes)
    except BackendError as exc:
        return f"[log unavailable: {exc.message}]"


def job_log_sources(job: Job) -> tuple[LogSource, ...]:
    """The logs ``job`` has (its current attempt's), the one to show first first; ()
    before it reached a workload manager. Raises :class:`BackendError`."""
    streamer = _streamer(job)
    return () if streamer is None else streamer.log_sources(job.external_id)


class LogRequestError(ValueError):
    """A request names no log the job has, or names it badly: ``problems`` by field."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {problem}" for field, problem in problems.items()))
        self.problems = dict(problems)


def choose_source(sources: tuple[LogSource, ...], rank: str | None, stream: str | None) -> LogSource:
    """The log a request's ``rank`` and ``stream`` (as given, None when left out) name
    among ``sources``. Neither: the first. ``stream`` alone: that stream of every rank
    together, else of the first rank that has it; ``rank`` alone: that rank's first log.
    A job with no logs yet takes any well-formed request (it reads as nothing).
    Raises :class:`LogRequestError` naming the field."""
    if stream is not None and stream not in LOG_STREAMS:
        raise LogRequestError({"stream": f"Must be one of {', '.join(LOG_STREAMS)}."})
    number = _rank(rank)
    if not sources:
        return LogSource(number, stream or "combined")
    wanted = [s for s in sources if (number is None or s.rank == number) and (stream is None or s.stream == stream)]
    if stream is not None and number is None:
        wanted.sort(key=lambda s: s.rank is not None)  # every rank's together first
    if wanted:
        return wanted[0]
    have = ", ".join(s.label for s in sources)
    if number is not None and all(s.rank != number for s in sources):
        raise LogRequestError({"rank": f"This job has no log of rank {number}; it has: {have}."})
    raise LogRequestError({"stream": f"This job has no {stream} log{_of(number)}; it has: {have}."})


def _rank(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 6:
        raise LogRequestError({"rank": "Must be a rank: a whole number from 0 (or left out: every rank)."})
    return int(raw)


def _of(rank: int | None) -> str:
    return "" if rank is None else f" of rank {rank}"


@dataclass(frozen=True, slots=True)
class LogPart:
    """A piece of one log: its bytes from ``offset`` to ``next_offset``, and whether the
    job had ended before they were read (then a piece with nothing new is the end)."""

    source: LogSource
    offset: int
    next_offset: int
    data: bytes
    ended: bool


def read_log_part(job: Job, source: LogSource, offset: int, max_bytes: int) -> LogPart:
    """At most ``max_bytes`` of ``source`` from ``offset``, ending on a whole UTF-8
    character while more may follow (so each piece decodes alone). Whether the job has
    ended is read first: a log read after its job ended is whole. Raises
    :class:`BackendError`."""
    ended = job.state in TERMINAL_STATES
    data = bytearray()
    chunks = stream_log(job, source, offset)
    try:
        for chunk in chunks:
            data += chunk
            if len(data) >= max_bytes:
                break
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    cut = len(data) > max_bytes
    del data[max_bytes:]
    if cut or not ended:
        del data[_whole_characters(data) :]
    return LogPart(source, offset, offset + len(data), bytes(data), ended)


def _whole_characters(data: bytes | bytearray) -> int:
    """How much of ``data`` ends on a character boundary: without a last UTF-8 sequence
    that its next bytes would complete (bytes that are no UTF-8 at all are kept)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: a sequence starts here
            needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
            return len(data) - back if needed > back else len(data)
    return len(data)


def stream_log(job: Job, source: LogSource, offset: int = 0) -> Iterator[bytes]:
    """``source`` of ``job`` from ``offset``, in chunks (nothing before it started).
    Raises :class:`BackendError`, at the first ``next`` at the latest."""
    streamer = _streamer(job)
    if streamer is None:
        return iter(())
    return streamer.stream_log(job.external_id, source, offset)


def stream_job_log(job: Job, source: LogSource, offset: int = 0) -> Iterator[bytes]:
    """:func:`stream_log`, its first chunk read already: a :class:`BackendError` from
    the workload manager raises here, before a response has begun, not halfway."""
    chunks = stream_log(job, source, offset)
    first = next(chunks, None)
    return iter(()) if first is None else chain((first,), chunks)


def _streamer(job: Job) -> LogStreamer | None:
    if job.cluster is None or not job.external_id:
        return None
    backend = backend_for(job.cluster)
    return backend if isinstance(backend, LogStreamer) else None
