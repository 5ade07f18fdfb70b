"""The ``qm`` client against a live server, over real HTTP with an API token."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest

from monitoring.efficiency import record_efficiencies
from monitoring.models import JobEfficiency
from people.services import create_api_token
from qm.api import Api
from qm.cli import main
from qm.request import parse_walltime
from scheduler.choices import JobState
from scheduler.clusters.poll import poll_backends
from scheduler.jobs.transitions import transition
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job
from scheduler.tick.run import run_tick
from tests.builders import T0, queue_line, run_attempt, submit
from tests.monitoring.history import gpu, ran, samples


@pytest.fixture
def qm(transactional_db, live_server, world):
    _, secret = create_api_token(world.alice, "cli")

    def run(*argv: str, sleep=None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        extra = {"sleep": sleep} if sleep else {}
        code = main(["--url", live_server.url, "--token", secret, *argv], out=out, err=err, **extra)
        return code, out.getvalue(), err.getvalue()

    return run


def test_submit_jobs_show_estimate_cancel(qm, world):
    code, out, _ = qm("estimate", "--gpus", "1", "--walltime", "1h", "--", "python", "train.py")
    assert code == 0 and "Would start now." in out
    code, out, _ = qm("submit", "--name", "cli-job", "-G", "2", "-t", "90m", "-e", "A=1", "--", "python", "train.py")
    job = Job.objects.get(name="cli-job")
    assert code == 0 and f"Submitted job {job.id}" in out
    assert (job.gpus_per_node, job.walltime_seconds, job.env, job.command) == (2, 5400, {"A": "1"}, "python train.py")
    code, out, _ = qm("jobs")
    assert code == 0 and "cli-job" in out and "PENDING" in out
    code, out, _ = qm("--json", "show", str(job.id))
    assert json.loads(out)["name"] == "cli-job"
    code, out, _ = qm("cancel", str(job.id))
    assert code == 0 and "CANCELLED" in out
    code, _, err = qm("cancel", str(job.id))
    assert code == 1 and "only" in err


def test_show_says_a_waiting_jobs_p50_and_p90_starts_beside_the_latest(qm, world):
    job = submit(world.alice, world.lab, name="waiter")
    Job.objects.filter(pk=job.pk).update(
        estimated_start_at=T0 + timedelta(hours=4),
        estimated_start_p50_at=T0 + timedelta(hours=1),
        estimated_start_p90_at=T0 + timedelta(hours=3),
    )
    code, out, _ = qm("show", str(job.id))
    assert code == 0 and "estimated start (latest): 2026-01-01T04:00:00Z" in out
    assert "likely start: 2026-01-01T01:00:00Z (p50), 2026-01-01T03:00:00Z (p90)" in out


def test_show_says_where_a_waiting_job_stands_in_line_and_nothing_once_it_runs(qm, world):
    job = submit(world.alice, world.lab)
    queue_line({job.id: (3, 12.5)})
    code, out, _ = qm("show", str(job.id))
    assert code == 0 and "  in line: 3 jobs ahead, asking 12.5 GPU-hours, for the nodes it could run on" in out
    queue_line({job.id: (0, 0.0)})
    assert "  in line: next (no job waits its turn ahead of it" in qm("show", str(job.id))[1]
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    assert "in line" not in qm("show", str(job.id))[1]


def test_wrap_sends_a_command_line_as_written_and_words_after_dashes_stay_words(qm):
    code, _, _ = qm("submit", "-t", "1h", "--wrap", 'cd /tmp && echo "rank $QM_NODE_RANK"; true')
    wrapped = Job.objects.get(name="wrap")
    assert code == 0 and wrapped.command == 'cd /tmp && echo "rank $QM_NODE_RANK"; true'
    code, _, _ = qm("submit", "--name", "words", "-t", "1h", "--", "echo", "a; b")
    assert code == 0 and Job.objects.get(name="words").command == "echo 'a; b'"  # one argument, as typed


@pytest.mark.parametrize(
    "what", [[], ["--"], ["--wrap", "true", "--", "true"], ["--wrap", "true", "--script", "/dev/null"]]
)
def test_submit_needs_exactly_one_thing_to_run(qm, what):
    code, _, err = qm("submit", "-t", "1h", *what)
    assert code == 2 and "exactly one of" in err
    assert not Job.objects.exists()


def test_api_refusals_are_reported_per_field(qm):
    code, _, err = qm("submit", "-G", "64", "-t", "1h", "--", "true")
    assert code == 1 and "gpus_per_node: No node has 64 GPUs" in err


def test_submit_wait_shows_progress_until_the_job_ends(qm, world, settings):
    world.cluster.config = {**world.cluster.config, "simulate": 0}
    world.cluster.save()
    polls = iter(range(100))

    def tick_between_polls(_seconds: float) -> None:
        # What the scheduler loop would do between two polls of the client.
        run_tick()
        if next(polls) > 0:
            poll_backends()

    result = qm("submit", "--wait", "--interval", "0", "-t", "1h", "--", "true", sleep=tick_between_polls)
    code, out, _ = result
    assert code == 0, result
    assert "PENDING" in out and "COMPLETED" in out and "exit code 0" in out


def test_the_slurm_options_reach_the_request(qm, world):
    first = Job.objects.get(pk=int(qm("submit", "--name", "a", "-t", "1h", "--", "true")[1].split()[2]))
    code, _, err = qm(
        "submit", "--name", "b", "-t", "1h", "--nice", "5", "--dependency", f"afterok:{first.id}",
        "--gpus", "1", "--gpu-model", "L4", "--", "true",
    )  # fmt: skip
    assert code == 0, err
    job = Job.objects.get(name="b")
    assert (job.nice, job.dependencies, job.gpu_model) == (5, [{"type": "afterok", "job": first.id}], "L4")
    code, _, err = qm("submit", "-t", "1h", "--gpus", "1", "--gpu-share", "0.5", "--", "true")
    assert code == 1 and "gpu_share: No node has a shared GPU" in err
    code, _, err = qm("submit", "-t", "1h", "--node-label", "rack=nowhere", "--", "true")
    assert code == 1 and "node_labels: No node has the labels rack=nowhere" in err
    code, _, err = qm("submit", "--name", "c", "-t", "1h", "--cpus", "250m", "--", "true")
    assert code == 0, err
    assert str(Job.objects.get(name="c").cpus_per_node) == "0.250"
    code, _, err = qm("submit", "-t", "1h", "--cpus", "a few", "--", "true")
    assert code == 1 and "cpus_per_node: 'a few' is not a number of CPUs" in err


def test_hold_release_requeue_and_edit_a_waiting_job(qm, world):
    qm("submit", "--name", "w", "-t", "2h", "--", "true")
    job = Job.objects.get(name="w")
    assert qm("hold", str(job.id))[1].strip() == f"Job {job.id}: HELD"
    code, out, _ = qm("edit", str(job.id), "--walltime", "1h", "--name", "w2", "--nice", "3")
    assert code == 0 and "name, nice, walltime_seconds changed" in out
    job.refresh_from_db()
    assert (job.name, job.walltime_seconds, job.nice, job.state) == ("w2", 3600, 3, "HELD")
    code, _, err = qm("edit", str(job.id), "--walltime", "5h")
    assert code == 1 and "Only staff may raise" in err
    assert qm("edit", str(job.id))[0] == 2  # nothing to change
    assert qm("release", str(job.id))[1].strip() == f"Job {job.id}: PENDING"
    code, _, err = qm("requeue", str(job.id))
    assert code == 1 and "only" in err


def test_priority_and_fairshare_print_sprio_and_sshare_tables(qm, world):
    qm("submit", "--name", "p", "-t", "1h", "--", "true")
    job = Job.objects.get(name="p")
    code, out, _ = qm("priority", str(job.id))
    header, row = out.splitlines()
    assert code == 0 and header.split() == ["JOBID", "PRIORITY", "AGE", "FAIRSHARE", "JOBSIZE", "QOS", "NICE"]
    assert row.split()[0] == str(job.id)
    code, out, _ = qm("fairshare")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:2] == ["ACCOUNT", "USER"]
    assert any(line.split()[:2] == ["lab", "alice"] for line in lines[1:])
    assert not any(line.split()[0] == "other" for line in lines[1:])  # alice is not in other


def test_log_follow_prints_each_part_once_until_the_job_ends(qm, world):
    world.cluster.config = {**world.cluster.config, "simulate": 0}
    world.cluster.save()
    qm("submit", "--name", "l", "-t", "1h", "--", "true")
    job = Job.objects.get(name="l")
    steps = iter(range(100))

    def advance(_seconds: float) -> None:
        step = next(steps)
        if step == 0:
            run_tick()
        else:
            poll_backends()

    code, out, _ = qm("log", str(job.id), "--follow", "--interval", "0", sleep=advance)
    assert code == 0 and out.count("simulated") == 1


def test_logs_prints_one_rank_s_stream_whole_and_follows_a_running_job_to_its_end(qm, world):
    """Two ranks each write 1.5 MiB to stdout (more than one read of the API brings),
    then rank 1 a line to stderr while the job still runs: ``qm logs --rank 1 --stream
    stdout`` prints that log whole, once; ``--follow`` on rank 1's stderr prints its
    line once and ends with the job."""
    command = 'seq -f "r${QM_NODE_RANK}-%09g" 1 150000; sleep 1; echo "rank $QM_NODE_RANK done" >&2'
    qm("submit", "--name", "ranks", "-N", "2", "-G", "1", "-t", "10m", "--wrap", command)
    job = Job.objects.get(name="ranks")
    run_tick()

    def advance(_seconds: float) -> None:
        poll_backends()

    code, out, _ = qm(
        "logs", str(job.id), "--rank", "1", "--stream", "stderr", "--follow", "--interval", "0.1", sleep=advance
    )
    assert (code, out) == (0, "rank 1 done\n")
    assert Job.objects.get(pk=job.pk).state == JobState.COMPLETED
    code, out, _ = qm("log", str(job.id), "--rank", "1", "--stream", "stdout")
    assert code == 0 and out == "".join(f"r1-{n:09d}\n" for n in range(1, 150001))


def test_logs_of_a_rank_the_job_has_not_says_which_it_has(qm, world):
    world.cluster.config = {**world.cluster.config, "simulate": 0}
    world.cluster.save()
    qm("submit", "--name", "l", "-t", "1h", "--", "true")
    run_tick()

    code, _, err = qm("logs", str(Job.objects.get(name="l").id), "--rank", "3")

    assert code == 1 and err == "qm: rank: This job has no log of rank 3; it has: all ranks combined.\n"


class ClosedPipe(io.StringIO):
    """Standard output whose reader has gone away (``qm jobs | head`` after head's lines)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_that_goes_away_ends_qm_quietly_not_as_a_network_error(live_server, world):
    _, secret = create_api_token(world.alice, "cli")
    err = io.StringIO()

    code = main(["--url", live_server.url, "--token", secret, "jobs"], out=ClosedPipe(), err=err)

    assert (code, err.getvalue()) == (141, "")


def test_unreachable_server_is_a_clear_error():
    err = io.StringIO()
    assert main(["--url", "http://127.0.0.1:9", "jobs"], out=io.StringIO(), err=err) == 1
    assert "cannot reach" in err.getvalue()


@pytest.mark.parametrize(
    ("text", "seconds"), [("3600", 3600), ("90m", 5400), ("2h", 7200), ("1:30:00", 5400), ("1-00:00:00", 86400)]
)
def test_walltime_forms(text, seconds):
    assert parse_walltime(text) == seconds


def test_api_builds_urls_under_api_v1():
    assert Api("http://x:8000/", "t").base == "http://x:8000/api/v1/"


def test_a_redirect_is_refused_so_the_token_never_travels_elsewhere():
    """A server answering 302 to another host must not receive the bearer token there."""
    import http.server
    import threading

    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(302)
            self.send_header("Location", "http://elsewhere.invalid/api/v1/jobs/")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        err = io.StringIO()
        url = f"http://127.0.0.1:{server.server_port}"
        assert main(["--url", url, "--token", "qm_x_secret", "jobs"], out=io.StringIO(), err=err) == 1
    finally:
        server.shutdown()
    assert seen == ["Bearer qm_x_secret"]  # asked once, not followed
    assert "redirected to" in err.getvalue()


def test_show_prints_seff_lines_for_a_finished_job(qm, world):
    job = ran(submit(world.alice, world.lab, walltime_seconds=1200), T0, T0 + timedelta(minutes=10), ("h100-01", 0))
    samples([gpu("h100-01", 0).id], T0, 60, utilization=42.0)
    record_efficiencies(T0 + timedelta(hours=1))

    code, out, _ = qm("show", str(job.id))

    assert code == 0
    assert "efficiency: 0.17 GPU-hours; elapsed 600 s of 1200 s (50% of the walltime)" in out
    assert (
        "GPU utilization: mean 42%, peak 42%" in out and "GPU memory: mean 1000 MiB, peak 1000 MiB of 81920 MiB" in out
    )


def test_show_says_where_a_job_s_output_files_are(qm, world):
    job = submit(
        world.alice, world.lab, name="train", workdir="/home/alice/run", output_path="o-%j.txt", error_path="e"
    )

    code, out, _ = qm("show", str(job.id))

    assert code == 0
    assert f"  output to /home/alice/run/o-{job.id}.txt\n  errors to /home/alice/run/e\n" in out


def test_usage_prints_sreports_table(qm, world):
    run_attempt(submit(world.alice, world.lab), T0, T0 + timedelta(hours=2))
    code, out, _ = qm("usage", "--start", "2026-01-01", "--end", "2026-01-01", "--by", "user")
    title, header, row = out.splitlines()
    assert code == 0 and title == "GPU-hours from 2026-01-01 to 2026-01-01 (UTC days, inclusive), by user:"
    assert header.split() == ["USER", "ATTEMPTS", "GPU-HOURS", "BILLED", "USED", "IDLE", "UNMEASURED", "EFFICIENCY"]
    assert row.split() == ["alice", "1", "2.00", "2.00", "0.00", "0.00", "2.00", "-"]  # no samples: unmeasured


def test_an_array_is_submitted_listed_compactly_and_moved_whole_or_per_task(qm, world):
    code, out, _ = qm("submit", "--name", "sweep", "-t", "1h", "--array", "0-9%3", "--", "python", "sweep.py")
    first = Job.objects.get(name="sweep", array_task_id=0)
    assert code == 0 and f"Submitted array job {first.id} (sweep): 10 tasks" in out
    run_tick()

    code, out, _ = qm("jobs")
    assert code == 0
    assert f"{first.id}_[3-9]" in out and f"{first.id}_0 " in out and f"{first.id}_4" not in out

    code, out, _ = qm("jobs", "--array", str(first.id), "--state", "PENDING")
    assert code == 0 and all(f"{first.id}_{i} " in out for i in range(3, 10)) and "_[" not in out

    code, out, _ = qm("hold", f"{first.id}_5")
    assert code == 0 and f"Job {first.id}_5: HELD" in out
    code, out, _ = qm("show", f"{first.id}_5")
    assert f"task 5 of array {first.id} (0-9%3)" in out and "1 HELD" in out
    code, out, _ = qm("cancel", str(first.id))
    assert code == 0 and f"Array {first.id}: 10 tasks cancelled; now 10 CANCELLED" in out
    code, _, err = qm("cancel", f"{first.id}_77")
    assert code == 1 and f"no task 77 of array {first.id}" in err


def test_a_job_reference_is_an_id_or_an_array_task(capsys):
    with pytest.raises(SystemExit) as usage:
        main(["cancel", "12x"])
    assert usage.value.code == 2
    assert "'12x' is not a job id (42) or an array task (42_7)" in capsys.readouterr().err


def _finished(world, state: str, exit_code: int):
    job = submit(world.alice, world.lab, walltime_seconds=1200)
    run_attempt(job, T0, None)
    transition(job.id, [JobState.RUNNING], state, ended_at=T0 + timedelta(minutes=10), exit_code=exit_code)
    return job


def _measured_in_part(world):
    """A finished job whose figures hold only what was measured (each may be null in the
    API), as the demo's history wrote them: utilization's mean, nothing of its memory."""
    job = _finished(world, JobState.COMPLETED, 0)
    JobEfficiency.objects.create(
        job=job, attempt=0, gpu_hours=0.17, elapsed_seconds=600, samples=60, gpu_util_mean=42.0, computed_at=T0
    )
    return job


def _unmeasured(world):
    job = _finished(world, JobState.COMPLETED, 0)
    record_efficiencies(T0 + timedelta(hours=1))  # no samples: unmeasured
    return job


def _cancelled_while_waiting(world):
    job = submit(world.alice, world.lab)
    cancel_job(job, by="alice")
    return job


def _running(world):
    job = submit(world.alice, world.lab)
    run_attempt(job, T0, None)
    return job


JOB_SHAPES = {
    "pending": (lambda world: submit(world.alice, world.lab), "[PENDING]"),
    "running": (_running, "on h100-01 GPUs 0"),
    "failed": (lambda world: _finished(world, JobState.FAILED, 3), "exit code 3"),
    "cancelled while waiting": (_cancelled_while_waiting, "[CANCELLED]"),
    "unmeasured": (_unmeasured, "GPU utilization: unmeasured"),
    "measured in part": (_measured_in_part, "GPU utilization: mean 42%, peak -"),
}


@pytest.mark.parametrize("shape", JOB_SHAPES)
def test_show_prints_every_shape_of_job(qm, world, shape):
    make, expected = JOB_SHAPES[shape]
    job = make(world)
    code, out, err = qm("show", str(job.id))
    assert (code, err) == (0, "")
    assert out.startswith(f"Job {job.id}: job  [") and expected in out


def test_show_prints_an_array_task_and_its_array(qm, world):
    code, _, _ = qm("submit", "--name", "sweep", "-t", "1h", "--array", "0-2", "--", "true")
    first = Job.objects.get(name="sweep", array_task_id=0)
    code, out, err = qm("show", f"{first.id}_2")
    assert (code, err) == (0, "")
    assert f"task 2 of array {first.id} (0-2): 3 PENDING" in out


def test_advise_prints_the_advice_for_a_job_or_a_shape_described(qm, world):
    from django.core.cache import cache

    from tests.scheduler.test_advice import crowded_history

    cache.clear()
    crowded_history(world)
    job = world.alice.jobs.first()
    said = "Your last 12 jobs of this shape used 8% of their walltime and 2 of 8 GPUs; asking 1 h 15 min and 2 GPUs"

    code, out, _ = qm("advise", str(job.id))
    assert code == 0 and out.startswith(said) and "sooner on average." in out
    code, out, _ = qm("advise", "--gpus", "8", "--walltime", "12h")
    assert code == 0 and out.startswith(said)
    code, out, _ = qm("advise", "--gpus", "4", "--walltime", "12h")
    assert (code, out) == (0, "No advice: fewer than 10 of your ended jobs of this shape.\n")
    cache.clear()


@pytest.mark.parametrize(
    ("argv", "status", "says"),
    [
        ((), 2, "give a job ID or --gpus N --walltime T"),
        (("7", "--gpus", "8"), 2, "give a job ID or --gpus N --walltime T"),
        (("--gpus", "8"), 2, "needs both --gpus N"),
        (("--gpus", "8", "--walltime", "0"), 1, "walltime_seconds"),  # the API's refusal, per field
    ],
    ids=["nothing", "both", "half a shape", "a refused walltime"],
)
def test_advise_needs_a_job_or_a_whole_shape(qm, argv, status, says):
    code, _, err = qm("advise", *argv)
    assert code == status and says in err
