"""A job's whole log through the API: every rank's stdout and stderr, downloaded whole and
byte-exact, read on from an offset to follow it, the tail kept as the quick view, and
read only by those who may see the job.

alice owns the job; bob coordinates her account; dora is a plain member of it; charlie is
in another account; admin is staff. The jobs really run on the local cluster.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.choices import TERMINAL_STATES
from scheduler.models import Job
from tests.builders import submit
from tests.scheduler.tick.waiting import wait_for

pytestmark = pytest.mark.django_db

SEES_ALICES_JOB = {"alice": True, "bob": True, "dora": False, "charlie": False, "admin": True}

#: Each of two ranks writes 1.2 MiB and more to stdout (one line with a character of two
#: bytes, é, and one of four, 🚀) and a few lines to stderr.
TWO_RANKS = (
    'for i in $(seq 1 3); do seq -f "r${QM_NODE_RANK}-out-$i-%08g" 1 40000; echo "é🚀"; done; '
    'seq -f "r${QM_NODE_RANK}-err-%g" 1 300 >&2'
)


def expected(rank: int, stream: str) -> bytes:
    if stream == "stderr":
        return b"".join(f"r{rank}-err-{n}\n".encode() for n in range(1, 301))
    blocks = ("".join(f"r{rank}-out-{i}-{n:08d}\n" for n in range(1, 40001)) + "é🚀\n" for i in (1, 2, 3))
    return "".join(blocks).encode()


def ended(job: Job) -> Job:
    from scheduler.clusters.poll import poll_backends

    def done() -> bool:
        poll_backends()
        job.refresh_from_db()
        return job.state in TERMINAL_STATES

    wait_for(done, timeout=60, what="the job's end")
    return job


@pytest.fixture
def two_rank_job(world: Any, tick: Any) -> Job:
    job = submit(world.alice, world.lab, command=TWO_RANKS, nodes=2, gpus_per_node=1, gpu_model="H100-80GB")
    tick()
    job = ended(job)
    assert job.state == "COMPLETED", job.state_reason
    return job


def download(client: Any, job: Job, **query: Any) -> Any:
    return client.get(f"/api/v1/jobs/{job.id}/log/download/", query)


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


@pytest.mark.parametrize(("rank", "stream"), [(0, "stdout"), (1, "stdout"), (0, "stderr"), (1, "stderr")])
def test_each_rank_s_stdout_and_stderr_download_whole_and_byte_exact(world, client_for, two_rank_job, rank, stream):
    response = download(client_for(world.alice), two_rank_job, rank=rank, stream=stream)

    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"] == f'attachment; filename="job-{two_rank_job.id}-rank{rank}-{stream}.log"'
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert body(response) == expected(rank, stream)


def test_the_combined_log_holds_every_rank_s_output_and_its_end_is_the_quick_view(world, client_for, two_rank_job):
    client = client_for(world.alice)

    combined = body(download(client, two_rank_job))  # no rank, no stream: the job's first log, all of it
    tail = client.get(f"/api/v1/jobs/{two_rank_job.id}/log/", {"max_bytes": 1_048_576}).json()

    assert len(combined) == sum(len(expected(r, s)) for r in (0, 1) for s in ("stdout", "stderr")) > 2 * 1_048_576
    assert combined.endswith(tail["log"].encode()) and len(tail["log"].encode()) >= 1_048_576 - 3
    assert set(tail) == {"job", "log"}  # the quick view answers as it always has


def test_a_download_resumes_from_an_offset(world, client_for, two_rank_job):
    whole = expected(1, "stdout")

    rest = body(download(client_for(world.alice), two_rank_job, rank=1, stream="stdout", offset=1_000_003))

    assert rest == whole[1_000_003:]


def follow(client: Any, job: Job, max_bytes: int, **query: Any) -> Iterator[dict[str, Any]]:
    """Read one log as ``qm log --follow`` and the job page do: from 0, each time from
    ``next_offset``, until the job had ended and nothing new came."""
    offset = 0
    while True:
        part = client.get(f"/api/v1/jobs/{job.id}/log/", {"offset": offset, "max_bytes": max_bytes, **query}).json()
        assert part["offset"] == offset
        yield part
        if part["ended"] and part["next_offset"] == offset:
            return
        offset = part["next_offset"]


@pytest.mark.parametrize("max_bytes", [65536, 99_999], ids=["whole chunks", "cut inside characters"])
def test_reading_on_from_each_next_offset_gives_the_log_exactly(world, client_for, two_rank_job, max_bytes):
    parts = list(follow(client_for(world.alice), two_rank_job, max_bytes, rank=0, stream="stdout"))

    assert "".join(p["log"] for p in parts).encode() == expected(0, "stdout")
    assert all(p["next_offset"] - p["offset"] <= max_bytes for p in parts)
    assert all("\ufffd" not in p["log"] for p in parts)  # a character cut in two waits for the next piece
    assert {(p["rank"], p["stream"]) for p in parts} == {(0, "stdout")}
    assert parts[0]["sources"] == [
        {"rank": None, "stream": "combined"},
        {"rank": 0, "stream": "stdout"},
        {"rank": 0, "stream": "stderr"},
        {"rank": 1, "stream": "stdout"},
        {"rank": 1, "stream": "stderr"},
    ]


def test_a_running_job_s_log_is_followed_as_it_grows(world, client_for, tick):
    """The job says where its home is, waits for a file the test makes there, then says
    more: a reader from next_offset sees the first line, then exactly the rest, then the
    end."""
    job = submit(
        world.alice,
        world.lab,
        command='echo "$HOME"; while [ ! -e "$HOME/go" ]; do sleep 0.05; done; echo second',
        walltime_seconds=120,  # ends by itself should the test fail before it makes the file
    )
    tick()
    client = client_for(world.alice)
    url = f"/api/v1/jobs/{job.id}/log/"
    first = wait_for(lambda: (p := client.get(url, {"offset": 0}).json())["log"] and p, what="the first line")
    home = first["log"].strip()
    assert (first["next_offset"], first["ended"]) == (len(home) + 1, False)

    (Path(home) / "go").touch()
    ended(job)
    rest = client.get(url, {"offset": first["next_offset"]}).json()
    last = client.get(url, {"offset": rest["next_offset"]}).json()

    assert (rest["log"], rest["next_offset"]) == ("second\n", first["next_offset"] + 7)
    assert (last["log"], last["next_offset"], last["ended"]) == ("", rest["next_offset"], True)


def test_a_job_that_has_not_started_has_an_empty_log(world, client_for):
    job = submit(world.alice, world.lab)
    client = client_for(world.alice)

    part = client.get(f"/api/v1/jobs/{job.id}/log/", {"offset": 0}).json()

    assert (part["log"], part["next_offset"], part["sources"], part["ended"]) == ("", 0, [], False)
    assert body(download(client, job)) == b""


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"rank": "x"}, "rank"),
        ({"rank": "-1"}, "rank"),
        ({"rank": "²"}, "rank"),
        ({"rank": "2"}, "rank"),
        ({"stream": "stdin"}, "stream"),
        ({"rank": "0", "stream": "combined"}, "stream"),
        ({"offset": "-1"}, "offset"),
        ({"offset": "1e3"}, "offset"),
        ({"offset": str(2**70)}, "offset"),
    ],
)
def test_bad_log_parameters_are_a_400_naming_the_field(world, client_for, two_rank_job, query, field):
    client = client_for(world.alice)

    for url in (f"/api/v1/jobs/{two_rank_job.id}/log/download/", f"/api/v1/jobs/{two_rank_job.id}/log/"):
        response = client.get(url, {"offset": "0", **query})
        assert response.status_code == 400, (url, response.content)
        assert list(response.json()) == [field]


def test_naming_a_log_the_job_has_not_says_which_it_has(world, client_for, two_rank_job):
    response = download(client_for(world.alice), two_rank_job, rank=3)

    assert response.status_code == 400
    assert response.json()["rank"] == (
        "This job has no log of rank 3; it has: all ranks combined, rank 0 stdout, rank 0 stderr, rank 1 stdout, "
        "rank 1 stderr."
    )


@pytest.mark.parametrize("who,sees", SEES_ALICES_JOB.items())
def test_only_those_who_may_see_the_job_read_its_whole_log(world, client_for, two_rank_job, who, sees):
    client = client_for(getattr(world, who))

    whole = download(client, two_rank_job, rank=0, stream="stderr")
    part = client.get(f"/api/v1/jobs/{two_rank_job.id}/log/", {"offset": 0, "rank": 0, "stream": "stderr"})

    assert (whole.status_code, part.status_code) == ((200, 200) if sees else (404, 404))
    if sees:
        assert body(whole) == expected(0, "stderr") == part.json()["log"].encode()


def test_anonymous_readers_get_nothing(client_for, two_rank_job):
    assert download(client_for(None), two_rank_job).status_code in (401, 403)


def test_a_download_asked_for_as_text_is_still_served(world, client_for, two_rank_job):
    client = client_for(world.alice)

    response = client.get(
        f"/api/v1/jobs/{two_rank_job.id}/log/download/?rank=1&stream=stderr", HTTP_ACCEPT="text/plain"
    )

    assert response.status_code == 200 and body(response) == expected(1, "stderr")


def test_a_big_log_downloads_in_flat_memory(world, client_for, tick):
    """64 MiB through the API while Python's allocations stay within a few chunks."""
    job = submit(world.alice, world.lab, command="head -c 67108864 /dev/zero | tr '\\0' x")
    tick()
    assert ended(job).state == "COMPLETED"
    response = download(client_for(world.alice), job, rank=0, stream="stdout")

    tracemalloc.start()
    try:
        size = sum(len(chunk) for chunk in response.streaming_content)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert size == 64 * 1024 * 1024
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes"
