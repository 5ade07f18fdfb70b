"""The job log's API answers: the tail (the quick view), a piece from an offset (to follow
a log as it grows) and the whole log, streamed as a download. What they read and which
log a request names is :mod:`scheduler.clusters.logs`; this module only checks the query
and shapes the answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response

from common.api.errors import Conflict, Unavailable
from common.streaming import StreamedResponse
from scheduler.backends.base import LOG_STREAMS, BackendError, LogSource
from scheduler.clusters.logs import (
    MAX_PART_BYTES,
    LogRequestError,
    choose_source,
    job_log_sources,
    read_job_log,
    read_log_part,
    stream_job_log,
)
from scheduler.models import Job

#: An offset beyond any log (a client's mistake, not a file that large).
MAX_OFFSET = 2**62

RANK_PARAMETER = OpenApiParameter(
    "rank", int, description="Which rank's log (QM_NODE_RANK); left out: every rank's, or the job's first log."
)
STREAM_PARAMETER = OpenApiParameter(
    "stream",
    str,
    enum=list(LOG_STREAMS),
    description="stdout or stderr where the cluster keeps them apart (the local cluster, per rank); combined "
    "where one log takes both (Slurm: one log of every rank; Kubernetes: one per rank, its pod's). The answer's "
    "sources list what the job has; naming a log it has not is a 400 saying which it has.",
)
OFFSET_PARAMETER = OpenApiParameter(
    "offset", int, description="Read the log from this byte on instead of its tail (0: from its start)."
)


class JsonWhateverAccepted(BaseContentNegotiation):
    """A download is asked for with any ``Accept`` (``text/plain``, ``*/*``) and any
    ``?format=``; its body is the log itself, and its errors are JSON whatever was asked."""

    def select_parser(self, request: Any, parsers: Any) -> Any:
        return parsers[0]

    def select_renderer(self, request: Any, renderers: Any, format_suffix: str | None = None) -> tuple[Any, str]:
        return renderers[0], renderers[0].media_type


def tail_answer(job: Job, query: Mapping[str, str]) -> Response:
    """The quick view: the last ``max_bytes`` of the job's combined log."""
    return Response({"job": job.id, "log": read_job_log(job, _max_bytes(query, default=65536))})


def part_answer(job: Job, query: Mapping[str, str]) -> Response:
    """At most ``max_bytes`` of one log from ``offset``, with where to read on."""
    offset = _offset(query)
    max_bytes = _max_bytes(query, default=65536)
    sources, source = _chosen(job, query)
    try:
        part = read_log_part(job, source, offset, max_bytes)
    except BackendError as exc:
        raise _unavailable(exc) from exc
    return Response(
        {
            "job": job.id,
            "log": part.data.decode("utf-8", errors="replace"),
            "rank": source.rank,
            "stream": source.stream,
            "offset": part.offset,
            "next_offset": part.next_offset,
            "ended": part.ended,
            "sources": [{"rank": s.rank, "stream": s.stream} for s in sources],
        }
    )


def download_answer(job: Job, query: Mapping[str, str]) -> StreamingHttpResponse:
    """One log whole (from ``offset``), streamed as it is read: never in memory whole."""
    offset = _offset(query)
    _, source = _chosen(job, query)
    try:
        chunks = stream_job_log(job, source, offset)
    except BackendError as exc:
        raise _unavailable(exc) from exc
    response = StreamedResponse(chunks, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{download_name(job, source)}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def download_name(job: Job, source: LogSource) -> str:
    """``job-42-rank1-stderr.log``, ``job-42-combined.log``."""
    rank = "" if source.rank is None else f"-rank{source.rank}"
    return f"job-{job.id}{rank}-{source.stream}.log"


def _chosen(job: Job, query: Mapping[str, str]) -> tuple[tuple[LogSource, ...], LogSource]:
    try:
        sources = job_log_sources(job)
    except BackendError as exc:
        raise _unavailable(exc) from exc
    try:
        return sources, choose_source(sources, query.get("rank"), query.get("stream"))
    except LogRequestError as exc:
        raise ValidationError(exc.problems) from exc


def _offset(query: Mapping[str, str]) -> int:
    raw = query.get("offset", "0")
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_OFFSET:
        raise ValidationError({"offset": "Must be a byte offset: a whole number from 0."})
    return int(raw)


def _max_bytes(query: Mapping[str, str], *, default: int) -> int:
    raw = query.get("max_bytes", str(default))
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_PART_BYTES:  # "²".isdigit() too
        raise ValidationError({"max_bytes": f"Must be an integer between 1 and {MAX_PART_BYTES}."})
    return int(raw)


def _unavailable(exc: BackendError) -> Exception:
    """A workload manager that cannot give the log now (503, retry) or ever (409)."""
    detail = f"The log is unavailable: {exc.message}"
    return Conflict(detail) if exc.permanent else Unavailable(detail)
