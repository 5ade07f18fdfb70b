"""The ``slurm`` backend beyond the shared contract: Slurm's words mapped onto ours,
its config, its errors, and the Slurm-only verbs (drain, hold, requeue).

Parsing and config tests need no cluster. Error handling runs the real adapter against
stand-in ``sbatch``/``squeue``/``sacct`` scripts in a ``bin_dir`` (Slurm's exact words,
no cluster). Tests marked ``slurm`` use the real dev cluster (scripts/slurm-dev-cluster.sh).
No Django.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scheduler.backends import load_backend
from scheduler.backends import slurm_parse as parse
from scheduler.backends.base import (
    LOG_CHUNK_BYTES,
    BackendError,
    JobOutput,
    JobSpec,
    LogSource,
    NodeAdmin,
    Placement,
    RemoteState,
    RunAs,
)
from scheduler.backends.slurm import SlurmBackend
from tests import slurm_dev


@pytest.fixture(autouse=True)
def _isolated_scheduler_settings() -> None:
    """Replaces the Django-side autouse fixture of tests/conftest.py: no Django here."""


# --- Slurm's words -> ours -------------------------------------------------------------


@pytest.mark.parametrize(
    ("slurm_state", "status", "ours", "exit_code"),
    [
        ("PENDING", 0, RemoteState.PENDING, None),
        ("RUNNING", 0, RemoteState.RUNNING, None),
        ("COMPLETING", 0, RemoteState.RUNNING, None),
        ("COMPLETED", 0, RemoteState.COMPLETED, 0),
        ("FAILED", 3 << 8, RemoteState.FAILED, 3),
        ("FAILED", 9, RemoteState.FAILED, 137),
        ("CANCELLED", 15, RemoteState.CANCELLED, None),
        ("TIMEOUT", 15, RemoteState.TIMEOUT, 143),
        ("NODE_FAIL", 0, RemoteState.NODE_FAIL, 0),
        ("PREEMPTED", 15, RemoteState.PREEMPTED, 143),
        ("OUT_OF_MEMORY", 9, RemoteState.FAILED, 137),
        ("BOOT_FAIL", 0, RemoteState.NODE_FAIL, 0),
        ("DEADLINE", 0, RemoteState.TIMEOUT, 0),
        ("REQUEUED", 0, RemoteState.PENDING, None),
        ("SOMETHING_NEW", 0, RemoteState.RUNNING, None),
    ],
    ids=[
        "pending",
        "running",
        "completing is still running",
        "completed exit 0",
        "exit 3 fails with 3",
        "SIGKILL is 137",
        "cancelled has no exit code",
        "timeout",
        "node failure",
        "preempted",
        "out of memory fails",
        "boot failure is a node failure",
        "deadline is a timeout",
        "requeued waits again",
        "unknown state is not an end",
    ],
)
def test_squeue_job_states_and_exit_codes(
    slurm_state: str, status: int, ours: RemoteState, exit_code: int | None
) -> None:
    result = parse.from_squeue_line(f"7|{slurm_state}|None|100|160|{status}")

    assert result is not None
    assert (result.external_id, result.state, result.exit_code) == ("7", ours, exit_code)
    if ours.is_terminal:
        assert result.ended_at == datetime.fromtimestamp(160, tz=UTC)


def squeue_line(line: str) -> Any:
    result = parse.from_squeue_line(line)
    assert result is not None, line
    return result


def test_out_of_memory_and_unknown_states_say_why() -> None:
    assert "out of memory" in squeue_line("1|OUT_OF_MEMORY|OutOfMemory|100|160|9").reason
    assert "SOMETHING_NEW" in squeue_line("1|SOMETHING_NEW|None|100|NONE|0").reason


def test_an_unknown_state_is_not_taken_for_an_end() -> None:
    result = squeue_line("1|SOMETHING_NEW|None|100|NONE|0")
    assert result.state is RemoteState.RUNNING and not result.state.is_terminal


def test_pending_job_has_no_start_time_yet() -> None:
    """squeue shows a pending job's *expected* start; it has not started."""
    result = squeue_line("1|PENDING|Resources|4102444800|N/A|0")

    assert (result.started_at, result.ended_at, result.reason) == (None, None, "Resources")


def test_a_running_jobs_unset_end_and_a_reason_with_the_separator_are_read() -> None:
    running = squeue_line("5|RUNNING|None|1700000000|NONE|0")
    assert (running.state, running.started_at, running.ended_at, running.reason) == (
        RemoteState.RUNNING,
        datetime.fromtimestamp(1700000000, tz=UTC),
        None,
        "",
    )
    assert squeue_line("6|PENDING|odd|reason|Unknown|N/A|0").reason == "odd|reason"


@pytest.mark.parametrize("line", ["", "JOBID|STATE|REASON|START|END|EXIT", "7|RUNNING", "7_3|RUNNING|None|1|2|0"])
def test_a_line_that_is_not_a_jobs_is_skipped(line: str) -> None:
    assert parse.from_squeue_line(line) is None


@pytest.mark.parametrize(
    ("line", "state", "exit_code", "reason"),
    [
        ("12|COMPLETED|0:0|100|160|None", RemoteState.COMPLETED, 0, ""),
        ("12|FAILED|3:0|100|160|NonZeroExitCode", RemoteState.FAILED, 3, "NonZeroExitCode"),
        ("12|FAILED|0:9|100|160|None", RemoteState.FAILED, 137, ""),
        ("12|CANCELLED by 0|0:0|100|160|None", RemoteState.CANCELLED, None, ""),
        ("12|TIMEOUT|0:15|100|160|TimeLimit", RemoteState.TIMEOUT, 143, "TimeLimit"),
    ],
    ids=["completed", "exit 3", "killed", "cancelled by a user", "timeout"],
)
def test_sacct_lines(line: str, state: RemoteState, exit_code: int | None, reason: str) -> None:
    result = parse.from_sacct_line(line)

    assert result is not None
    assert (result.external_id, result.state, result.exit_code, result.reason) == ("12", state, exit_code, reason)
    assert result.started_at == datetime.fromtimestamp(100, tz=UTC)


def test_sacct_lines_that_are_not_jobs_are_ignored() -> None:
    assert parse.from_sacct_line("") is None
    assert parse.from_sacct_line("12.batch|COMPLETED|0:0|1|2|None") is None


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:a100:8", ("a100", 8)),
        ("gpu:h100:4(S:0-1)", ("h100", 4)),
        ("gpu:2", ("", 2)),
        ("craynetwork:4,gpu:l4:2", ("l4", 2)),
        ("", ("", 0)),
        ("(null)", ("", 0)),
    ],
    ids=["typed", "with sockets", "untyped", "among other GRES", "none", "null"],
)
def test_gres_gpus(gres: str, expected: tuple[str, int]) -> None:
    assert parse.gres_gpus(gres) == expected


@pytest.mark.parametrize(
    ("state", "flags", "ours"),
    [
        ("idle", [], "up"),
        ("mixed", [], "up"),
        ("allocated", [], "up"),
        ("idle", ["DRAIN"], "drain"),
        ("allocated", ["DRAIN"], "drain"),
        ("down", [], "down"),
        ("mixed", ["NOT_RESPONDING"], "drain"),
        ("unknown", [], "drain"),
        ("idle", ["POWERED_DOWN"], "up"),
        ("down", ["DRAIN"], "down"),
    ],
    ids=[
        "idle",
        "mixed",
        "allocated",
        "drained",
        "draining",
        "down",
        "not responding keeps its jobs",
        "unknown",
        "powered down for power saving",
        "down and drained",
    ],
)
def test_node_states(state: str, flags: list[str], ours: str) -> None:
    assert parse.node_state(state, flags) == ours


def test_sinfo_node_becomes_node_info_with_gpus_of_the_configured_model() -> None:
    raw = {
        "name": "node2",
        "cpus": 16,
        "real_memory": 64000,
        "gres": "gpu:h100:8",
        "state": "idle",
        "state_flags": ["DRAIN"],
        "reason": "bad fan",
        "features": "h100,node2",
        "partitions": ["gpu"],
    }
    models = {"h100": parse.GpuModel("H100-80GB", 81920, "9.0")}

    node = parse.node_from_sinfo(raw, "c1", models)

    assert (node.name, node.cpus, node.memory_mib, node.state, node.reason) == ("node2", 16, 64000, "drain", "bad fan")
    assert [g.index for g in node.gpus] == list(range(8))
    assert {(g.model, g.memory_mib, g.compute_capability) for g in node.gpus} == {("H100-80GB", 81920, "9.0")}
    assert node.labels["slurm_state"] == "idle+drain"
    assert parse.node_from_sinfo(raw, "c1", models).gpus == node.gpus  # stable uuids
    assert parse.node_from_sinfo(raw, "c1", {}).gpus[0].model == "h100"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1, "0-00:00:01"), (3600, "0-01:00:00"), (90061, "1-01:01:01")],
    ids=["one second", "an hour", "a day and a bit"],
)
def test_walltime_format(seconds: int, text: str) -> None:
    assert parse.walltime(seconds) == text


@pytest.mark.parametrize(
    ("message", "transient"),
    [
        ("sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification", False),
        ("sbatch: error: Batch job submission failed: Requested node configuration is not available", False),
        ("sbatch: error: Batch job submission failed: Invalid partition name specified", False),
        ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)", True),
        ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", True),
        ("sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying", True),
    ],
    ids=["invalid GRES", "no such node configuration", "bad partition", "controller down", "timeout", "busy"],
)
def test_error_classification(message: str, transient: bool) -> None:
    assert parse.is_transient(message) is transient


# --- Config -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"slurmconf": "/etc/slurm/slurm.conf"}, "unknown key(s) slurmconf"),
        ({"slurm_conf": 42}, "slurm_conf must be a path"),
        ({"log_dir": ""}, "log_dir must be a path"),
        ({"partition": ["gpu"]}, "partition must be a string"),
        ({"command_timeout_seconds": 0}, "command_timeout_seconds must be a positive number"),
        ({"command_timeout_seconds": "soon"}, "command_timeout_seconds must be a positive number"),
        ({"accounting": "yes"}, "accounting must be true or false"),
        ({"gpu_models": ["a100"]}, "gpu_models must be a mapping"),
        ({"gpu_models": {"a100": {"memory_mib": 1}}}, "gpu_models.a100.model must be a non-empty string"),
        ({"gpu_models": {"a100": {"model": "A100", "memory_mib": -1}}}, "gpu_models.a100.memory_mib"),
        ({"gpu_models": {"a100": {"model": "A100", "vram": 1}}}, "gpu_models.a100 has unknown key(s) vram"),
    ],
    ids=[
        "typo in key",
        "slurm_conf not a path",
        "empty log_dir",
        "partition not a string",
        "zero timeout",
        "timeout not a number",
        "accounting not a bool",
        "gpu_models not a mapping",
        "gpu model missing",
        "negative GPU memory",
        "typo in gpu model key",
    ],
)
def test_bad_config_is_permanent_error_naming_the_field(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    with pytest.raises(BackendError) as caught:
        load_backend("slurm", "c1", config, work_dir=tmp_path)

    assert caught.value.permanent
    assert message in caught.value.message


def test_construction_runs_nothing_and_the_backend_can_drain(tmp_path: Path) -> None:
    backend = load_backend("slurm", "c1", {"bin_dir": str(tmp_path / "no-such-dir")}, work_dir=tmp_path)

    assert isinstance(backend, SlurmBackend) and isinstance(backend, NodeAdmin)
    assert backend.poll(["not-a-slurm-id", ""])["not-a-slurm-id"].state is RemoteState.UNKNOWN
    backend.cancel("not-a-slurm-id")  # nothing to run for an id Slurm cannot have made


# --- Errors, against stand-in Slurm commands -------------------------------------------------

SINFO = '{"nodes": [{"name": "node1", "cpus": 8, "real_memory": 1000, "gres": "gpu:a100:4", "state": "idle"}]}'


#: Whom the stand-in Slurm's jobs run as: a user every Debian host has, with a uid above 1000.
NOBODY = RunAs("nobody")
#: Whom the real dev cluster's jobs run as (``scripts/slurm-dev-users.sh``).
ALICE = RunAs("alice")


def fake_slurm(tmp_path: Path, *, instance: str = "", **scripts: str) -> SlurmBackend:
    """A backend whose Slurm commands are the given shell snippets (``sinfo`` answers one
    4-GPU node, the others print nothing unless given), run as their owner through a
    stand-in ``sudo`` that records its arguments in ``sudo-calls`` and runs the command."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sudo = f'printf "%s\\n" "$*" >> {tmp_path}/sudo-calls; while [ "$1" != "--" ]; do shift; done; shift; exec "$@"'
    scripts = {"sinfo": f"echo '{SINFO}'", "squeue": "true", "sacct": "true", "sudo": sudo, **scripts}
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    config = {
        "bin_dir": str(bin_dir),
        "command_timeout_seconds": 2,
        "sudo": str(bin_dir / "sudo"),
        "output_dir": str(tmp_path / "out/{user}"),
        "slurm_conf": str(tmp_path / "slurm.conf"),  # so sudo is always asked to keep SLURM_CONF
    }
    backend = load_backend("slurm", "c1", config, work_dir=tmp_path / "work", instance=instance)
    assert isinstance(backend, SlurmBackend)
    return backend


def spec(**fields: Any) -> JobSpec:
    values: dict[str, Any] = {
        "key": f"{uuid.uuid4()}.1",
        "name": "test job",
        "owner": "alice",
        "run_as": NOBODY,
        "account": "lab",
        "command": "true",
        "script": "",
        "walltime_seconds": 60,
        "placements": (Placement("node1", (0, 1)),),
    }
    values.update(fields)
    return JobSpec(**values)


@pytest.mark.parametrize(
    ("sbatch", "permanent", "shown"),
    [
        (
            "echo 'sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification' >&2;"
            "exit 1",
            True,
            "Invalid generic resource (gres) specification",
        ),
        (
            "echo 'sbatch: error: Batch job submission failed: Unable to contact slurm controller' >&2; exit 1",
            False,
            "Unable to contact slurm controller",
        ),
        ("sleep 5", False, "timed out after 2s"),
        ("echo 'not a number'", False, "not a job id"),
    ],
    ids=["invalid GRES is permanent", "controller down is transient", "hanging sbatch", "garbage from sbatch"],
)
def test_slurm_errors_become_backend_errors_with_slurms_message(
    tmp_path: Path, sbatch: str, permanent: bool, shown: str
) -> None:
    backend = fake_slurm(tmp_path, sbatch=sbatch)

    with pytest.raises(BackendError) as caught:
        backend.submit(spec())

    assert caught.value.permanent is permanent
    assert shown in caught.value.message


def test_missing_slurm_commands_are_transient(tmp_path: Path) -> None:
    backend = load_backend("slurm", "c1", {"bin_dir": str(tmp_path)}, work_dir=tmp_path)

    with pytest.raises(BackendError) as caught:
        backend.list_nodes()

    assert not caught.value.permanent and "cannot run sinfo" in caught.value.message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"placements": (Placement("node9", (0,)),)}, "unknown node 'node9'"),
        ({"placements": (Placement("node1", (0, 4)),)}, "has no GPU 4"),
        ({"placements": (Placement("node1", (1, 1)),)}, "repeat"),
        ({"placements": ()}, "no placements"),
        ({"walltime_seconds": 0}, "walltime_seconds"),
        ({"key": "../x"}, "key must match"),
        ({"command": ""}, "neither a command nor a script"),
        ({"env": {"SBATCH_PARTITION": "vip"}}, "may not set SBATCH_PARTITION"),
    ],
    ids=[
        "unknown node",
        "missing GPU",
        "GPU twice",
        "no placement",
        "zero walltime",
        "unsafe key",
        "nothing",
        "SBATCH_",
    ],
)
def test_malformed_specs_are_refused_before_sbatch(tmp_path: Path, fields: dict[str, Any], message: str) -> None:
    backend = fake_slurm(tmp_path, sbatch="echo called > sbatch-ran; echo 1")

    with pytest.raises(BackendError) as caught:
        backend.submit(spec(**fields))

    assert caught.value.permanent and message in caught.value.message
    assert not (tmp_path / "sbatch-ran").exists()


def test_sbatch_gets_the_placement_and_a_clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "portal-secret")
    monkeypatch.setenv("SBATCH_PARTITION", "vip")  # would change sbatch's options
    record = tmp_path / "sbatch.txt"
    backend = fake_slurm(tmp_path, sbatch=f'echo "$@" > {record}; env >> {record}; cat >> {record}; echo 42')
    job = spec(
        command="python train.py",
        cpus_per_node=Decimal(4),
        memory_mib_per_node=2048,
        walltime_seconds=3601,
        env={"FOO": "bar", "LD_PRELOAD": "/tmp/evil.so"},
    )

    assert backend.submit(job) == "42"

    recorded = record.read_text()
    for option in (
        "--parsable",
        f"--comment=qm:{job.key}",
        "--job-name=test job",
        "--nodelist=node1",
        "--gres=gpu:a100:2",
        "--cpus-per-task=4",
        "--mem=2048M",
        "--time=0-01:00:01",
        "--no-requeue",
    ):
        assert option in recorded
    assert f"QM_JOB_KEY={job.key}" in recorded and "QM_GPUS=node1:0,1" in recorded
    # The job's own variables reach the job through its script, never sbatch's process.
    assert "\nFOO=bar" not in recorded and "export FOO=bar\n" in recorded
    assert "portal-secret" not in recorded and "SBATCH_PARTITION" not in recorded
    assert "\nLD_PRELOAD=" not in recorded and "export LD_PRELOAD=/tmp/evil.so\n" in recorded
    assert "#!/bin/bash\n: Quartermaster job" in recorded and "python train.py" in recorded


def test_a_job_s_own_output_files_are_written_by_its_batch_script_beside_slurm_s_log(tmp_path: Path) -> None:
    """Slurm's --output stays the portal's log (named by Slurm's id, read by read_log);
    the job's own files, named by the portal's id, are copies its script makes on the
    node, as its owner: here the captured script is run as that node would run it."""
    captured = tmp_path / "batch.sh"
    backend = fake_slurm(tmp_path, sbatch=f'echo "$@" > {tmp_path}/argv; cat > {captured}; echo 42')
    output = JobOutput(stdout=str(tmp_path / "train-7.out"), stderr=str(tmp_path / "train-7.err"))

    backend.submit(spec(command="echo to-stdout; echo to-stderr >&2; exit 3", output=output))

    argv = (tmp_path / "argv").read_text()
    assert f"--output={tmp_path}/out/nobody/slurm-%j.out" in argv and "train-7" not in argv
    node = subprocess.run(["bash", str(captured)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert node.returncode == 3
    assert (node.stdout, node.stderr) == ("to-stdout\n", "to-stderr\n")  # what Slurm writes to the portal's log
    assert (tmp_path / "train-7.out").read_text() == "to-stdout\n"
    assert (tmp_path / "train-7.err").read_text() == "to-stderr\n"


def test_a_batch_script_whose_output_file_cannot_be_written_fails_saying_so(tmp_path: Path) -> None:
    captured = tmp_path / "batch.sh"
    backend = fake_slurm(tmp_path, sbatch=f"cat > {captured}; echo 42")
    path = str(tmp_path / "no-such-dir" / "out.txt")

    backend.submit(spec(command=f"touch {tmp_path}/ran", output=JobOutput(stdout=path, stderr=path)))

    node = subprocess.run(["bash", str(captured)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert node.returncode == 1 and f"qm: cannot write the output file {path}" in node.stderr
    assert not (tmp_path / "ran").exists()


def test_submit_finds_an_earlier_job_by_its_comment_instead_of_submitting_again(tmp_path: Path) -> None:
    job = spec()
    backend = fake_slurm(tmp_path, squeue=f"echo '17|qm:{job.key}'", sbatch="echo called > sbatch-ran; echo 99")

    assert backend.submit(job) == "17"
    assert not (tmp_path / "sbatch-ran").exists()


def test_a_portal_with_an_instance_names_it_in_the_comment_and_lists_only_its_own_jobs(tmp_path: Path) -> None:
    """Staging and production share one Slurm: each sweeps only its own orphans. A job
    from before comments named the instance (``qm:<key>``) is not listed either: never
    cancel what might be another portal's."""
    job = spec()
    record = tmp_path / "sbatch.txt"
    squeue = "; ".join(
        f"echo '{line}'"
        for line in ("11|qm:a1b2c3:ours.0", "12|qm:ffff00:theirs.0", "13|qm:legacy.0", "14|another comment", "15|")
    )
    backend = fake_slurm(tmp_path, instance="a1b2c3", squeue=squeue, sbatch=f'echo "$@" > {record}; echo 42')

    assert backend.list_jobs() == {"ours.0": "11"}
    assert backend.submit(job) == "42"
    assert f"--comment=qm:a1b2c3:{job.key}" in record.read_text()


def test_a_job_submitted_before_the_instance_was_named_is_still_found_by_its_key(tmp_path: Path) -> None:
    job = spec()
    backend = fake_slurm(tmp_path, instance="a1b2c3", squeue=f"echo '17|qm:{job.key}'", sbatch="echo 99")

    assert backend.submit(job) == "17"


def test_a_retried_submit_also_looks_in_accounting(tmp_path: Path) -> None:
    """The first sbatch hangs (Slurm took the job, we never heard); the job has since
    left slurmctld's memory, and only accounting still knows it."""
    job = spec()
    backend = fake_slurm(tmp_path, sacct=f"echo '5|qm:other'; echo '18|qm:{job.key}'", sbatch="sleep 5")
    with pytest.raises(BackendError):
        backend.submit(job)

    assert backend.submit(job) == "18"


def test_poll_asks_accounting_only_for_jobs_squeue_no_longer_shows(tmp_path: Path) -> None:
    backend = fake_slurm(
        tmp_path,
        squeue=f'echo "$@" > {tmp_path}/squeue-args; echo "1|RUNNING|None|100|NONE|0"; echo "4|RUNNING|None|1|NONE|0"',
        sacct=f'echo "$@" > {tmp_path}/sacct-args; echo "2|COMPLETED|0:0|100|200|None"',
    )

    results = backend.poll(["1", "2", "3"])

    assert [results[i].state for i in ("1", "2", "3")] == [
        RemoteState.RUNNING,
        RemoteState.COMPLETED,
        RemoteState.UNKNOWN,
    ]
    assert "-j 2,3" in (tmp_path / "sacct-args").read_text()
    assert f"-O {parse.SQUEUE_POLL_FORMAT}" in (tmp_path / "squeue-args").read_text()


def test_json_errors_with_exit_status_0_are_transient_errors_not_empty_answers(tmp_path: Path) -> None:
    """Slurm 22.05's ``sinfo --json`` exits 0 with no nodes when slurmctld is down."""
    answer = '{"errors": [{"error": "Unspecified error", "description": "Failed while looking for jobs"}], "nodes": []}'
    backend = fake_slurm(tmp_path, sinfo=f"echo '{answer}'")

    with pytest.raises(BackendError) as caught:
        backend.list_nodes()

    assert not caught.value.permanent and "Failed while looking for jobs" in caught.value.message


def test_poll_errors_are_transient(tmp_path: Path) -> None:
    backend = fake_slurm(tmp_path, squeue="echo 'slurm_load_jobs error: Invalid user' >&2; exit 1")

    with pytest.raises(BackendError) as caught:
        backend.poll(["1"])

    assert not caught.value.permanent and "Invalid user" in caught.value.message


# --- Against the real dev cluster ---------------------------------------------------------


def scontrol(*args: str) -> str:
    env = {**os.environ, "SLURM_CONF": slurm_dev.slurm_conf()}
    return subprocess.run(["scontrol", *args], env=env, capture_output=True, text=True, check=True, timeout=30).stdout


@pytest.fixture
def slurm(tmp_path: Path) -> Any:
    """The dev cluster, jobs run as alice with their output under her home."""
    test_dir = f".quartermaster/test-{uuid.uuid4().hex[:12]}"
    backend = load_backend(
        "slurm",
        "devcluster",
        {"slurm_conf": slurm_dev.slurm_conf(), "output_dir": f"{{home}}/{test_dir}"},
        work_dir=tmp_path / "work",
    )
    yield backend
    slurm_dev.scancel_jobs_in(slurm_dev.home_of(ALICE.user) / test_dir)


def wait_until(check: Any, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met after {timeout}s")
        time.sleep(0.1)
    return value


@pytest.mark.slurm
def test_job_in_slurm_carries_our_placement_and_labels(slurm: SlurmBackend) -> None:
    job = spec(
        command="sleep 30", cpus_per_node=Decimal(2), memory_mib_per_node=1000, walltime_seconds=600, run_as=ALICE
    )

    external_id = slurm.submit(job)

    shown = scontrol("show", "job", "-o", external_id)
    for field in (
        f"Comment=qm:{job.key}",
        "JobName=test job",
        "ReqNodeList=node1",
        "TimeLimit=00:10:00",
        "MinMemoryNode=1000M",
        "gres:gpu:a100:2",
    ):
        assert field in shown


@pytest.mark.slurm
def test_invalid_gres_is_refused_by_slurm_permanently_with_its_message(tmp_path: Path) -> None:
    backend = load_backend(
        "slurm",
        "devcluster",
        {"slurm_conf": slurm_dev.slurm_conf(), "partition": "no-such-partition"},
        work_dir=tmp_path,
    )

    with pytest.raises(BackendError) as caught:
        backend.submit(spec(run_as=ALICE))

    assert caught.value.permanent
    assert "Invalid partition name specified" in caught.value.message


@pytest.mark.slurm
def test_unreachable_controller_is_transient(tmp_path: Path) -> None:
    conf = Path(slurm_dev.slurm_conf()).read_text()
    broken = tmp_path / "slurm.conf"
    broken.write_text(re.sub(r"^SlurmctldPort=\d+", "SlurmctldPort=16797", conf, flags=re.MULTILINE))
    backend = load_backend(
        "slurm", "devcluster", {"slurm_conf": str(broken), "command_timeout_seconds": 20}, work_dir=tmp_path
    )

    with pytest.raises(BackendError) as caught:
        backend.list_nodes()  # --json: exit 0 with the failure in "errors"
    assert not caught.value.permanent and "reported errors" in caught.value.message
    with pytest.raises(BackendError) as caught:
        backend.poll(["1"])  # plain squeue: a failed exit
    assert not caught.value.permanent and "Unable to contact slurm controller" in caught.value.message


@pytest.mark.slurm
def test_drain_and_resume_reach_slurm(slurm: SlurmBackend) -> None:
    def state_of(name: str) -> tuple[str, str]:
        node = next(n for n in slurm.list_nodes() if n.name == name)
        return node.state, node.reason

    try:
        slurm.drain_node("node4", "fan replacement")
        assert state_of("node4") == ("drain", "fan replacement")
    finally:
        slurm.resume_node("node4")
    wait_until(lambda: state_of("node4") == ("up", ""))  # a resumed node is "not responding" until it pings


@pytest.mark.slurm
def test_hold_release_and_requeue(slurm: SlurmBackend) -> None:
    external_id = slurm.submit(spec(command="sleep 30", placements=(Placement("node3", (0,)),), run_as=ALICE))
    wait_until(lambda: slurm.poll([external_id])[external_id].state is RemoteState.RUNNING)
    time.sleep(1.5)  # Slurm refuses a requeue within a second of the start

    slurm.requeue(external_id)  # back to PENDING, under the same id (it waits ~10 s to restart)

    wait_until(lambda: "JobState=PENDING" in scontrol("show", "job", "-o", external_id))
    slurm.hold(external_id)
    assert "Reason=JobHeld" in scontrol("show", "job", "-o", external_id)
    slurm.release(external_id)
    assert "Reason=JobHeld" not in scontrol("show", "job", "-o", external_id)


# --- Jobs run as their owner ---------------------------------------------------------------


def test_sbatch_runs_as_the_owner_with_their_account_and_output_in_their_directory(tmp_path: Path) -> None:
    record = tmp_path / "sbatch.txt"
    backend = fake_slurm(tmp_path, sbatch=f'echo "$@" > {record}; echo 42')
    job = spec(account="nlp")

    assert backend.submit(job) == "42"

    own_dir = tmp_path / "out/nobody"
    calls = (tmp_path / "sudo-calls").read_text().splitlines()
    assert (
        calls[0] == f"-n --preserve-env=SLURM_CONF -u nobody -- mkdir -p -m 0700 -- {own_dir}"
    )  # made once, as the owner
    assert calls[1].startswith(f"-n --preserve-env=SLURM_CONF -u nobody -- {tmp_path}/bin/sbatch --parsable")
    args = record.read_text()
    for option in ("--account=nlp", f"--output={own_dir}/slurm-%j.out", f"--chdir={own_dir}"):
        assert option in args
    backend.submit(spec())
    assert sum("mkdir" in call for call in (tmp_path / "sudo-calls").read_text().splitlines()) == 1


@pytest.mark.parametrize(
    ("run_as", "message"),
    [
        (None, "its owner has no cluster identity, and this cluster runs every job as its owner"),
        (RunAs("root"), "'root' has uid 0, below 1000: a system account"),
        (RunAs("daemon"), "'daemon' has uid 1, below 1000: a system account"),
        (RunAs("no-such-user-here"), "'no-such-user-here' does not exist on the portal's host"),
        (RunAs("alice; rm -rf /"), "is not a POSIX user name"),
        (RunAs("-u"), "is not a POSIX user name"),
    ],
    ids=["no identity", "root", "system user", "unknown user", "shell in the name", "an option for a name"],
)
def test_a_job_never_runs_as_the_portal_root_or_a_system_account(
    tmp_path: Path, run_as: RunAs | None, message: str
) -> None:
    backend = fake_slurm(tmp_path, sbatch="echo called > sbatch-ran; echo 1")

    with pytest.raises(BackendError) as caught:
        backend.submit(spec(run_as=run_as))

    assert caught.value.permanent and message in caught.value.message
    assert not (tmp_path / "sbatch-ran").exists() and not (tmp_path / "sudo-calls").exists()


def test_cancel_hold_and_logs_act_as_the_user_slurm_names_for_the_job(tmp_path: Path) -> None:
    """Whose job it is comes from Slurm (squeue, then accounting), not from the portal's
    rows: the portal never acts on a job as anyone but its real owner."""
    backend = fake_slurm(
        tmp_path,
        squeue='[ "$5" = "%u" ] && echo nobody',
        scancel=f'echo "$@" > {tmp_path}/scancel-args',
        scontrol="true",
    )
    log = tmp_path / "out/nobody/slurm-7.out"
    log.parent.mkdir(parents=True)
    log.write_text("epoch 1\nepoch 2\n")

    backend.cancel("7")
    backend.hold("7")
    tail = backend.read_log("7", max_bytes=8)

    calls = (tmp_path / "sudo-calls").read_text().splitlines()
    assert calls[0] == f"-n --preserve-env=SLURM_CONF -u nobody -- {tmp_path}/bin/scancel 7"
    assert calls[1] == f"-n --preserve-env=SLURM_CONF -u nobody -- {tmp_path}/bin/scontrol hold 7"
    assert calls[2] == f"-n --preserve-env=SLURM_CONF -u nobody -- tail -c 8 -- {log}"
    assert tail == "epoch 2\n"


def test_a_job_slurm_has_forgotten_is_not_cancelled_and_has_no_log(tmp_path: Path) -> None:
    backend = fake_slurm(tmp_path, scancel=f"touch {tmp_path}/scancel-ran")

    backend.cancel("7")

    assert backend.read_log("7") == "" and not (tmp_path / "scancel-ran").exists()
    assert backend.log_sources("7") == () and list(backend.stream_log("7", LogSource(None, "combined"))) == []


def test_the_whole_log_is_streamed_as_the_job_s_owner_from_an_offset(tmp_path: Path) -> None:
    """Slurm keeps one combined log per job; it is read as the user Slurm names for the
    job (``tail -c +N`` through sudo), in chunks, never opened by the portal itself: the
    owner's output directory here is one the portal could not read were it not root."""
    backend = fake_slurm(tmp_path, squeue='[ "$5" = "%u" ] && echo nobody')
    log = tmp_path / "out/nobody/slurm-7.out"
    log.parent.mkdir(parents=True)
    text = b"".join(b"epoch %d \xc3\xa9\n" % n for n in range(40000))  # 520 KB
    log.write_bytes(text)

    assert backend.log_sources("7") == (LogSource(None, "combined"),)
    chunks = list(backend.stream_log("7", LogSource(None, "combined")))
    rest = b"".join(backend.stream_log("7", LogSource(None, "combined"), 123_457))

    assert b"".join(chunks) == text and len(chunks) > 1 and max(map(len, chunks)) <= LOG_CHUNK_BYTES
    assert rest == text[123_457:]
    calls = (tmp_path / "sudo-calls").read_text().splitlines()
    assert calls[-2:] == [
        f"-n --preserve-env=SLURM_CONF -u nobody -- tail -c +1 -- {log}",
        f"-n --preserve-env=SLURM_CONF -u nobody -- tail -c +123458 -- {log}",
    ]
    assert list(backend.stream_log("7", LogSource(0, "stdout"))) == []  # Slurm keeps no such log


def test_a_reader_that_stops_early_ends_the_owner_s_tail(tmp_path: Path) -> None:
    backend = fake_slurm(tmp_path, squeue='[ "$5" = "%u" ] && echo nobody')
    log = tmp_path / "out/nobody/slurm-7.out"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"x" * 5_000_000)

    stream = backend.stream_log("7", LogSource(None, "combined"))
    first = next(stream)
    stream.close()  # type: ignore[attr-defined]

    assert 0 < len(first) <= LOG_CHUNK_BYTES
    assert not [p for p in _processes() if p.endswith(f"tail -c +1 -- {log}")]


def _processes() -> list[str]:
    """Every process's command line, as ``ps`` shows them."""
    return subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True, check=True).stdout.splitlines()


def test_a_log_slurm_cannot_give_is_an_error_but_a_missing_file_is_no_output(tmp_path: Path) -> None:
    backend = fake_slurm(tmp_path, squeue='[ "$5" = "%u" ] && echo nobody')

    assert list(backend.stream_log("7", LogSource(None, "combined"))) == []  # not written yet
    assert backend.log_sources("x") == ()  # not a Slurm id
    (tmp_path / "out/nobody").mkdir(parents=True)
    (tmp_path / "out/nobody/slurm-7.out").mkdir()  # tail: "error reading ...: Is a directory"
    with pytest.raises(BackendError, match="stream_log 7 failed"):
        list(backend.stream_log("7", LogSource(None, "combined")))


def test_a_site_may_run_every_job_as_the_portal_when_it_says_so(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "sbatch.txt"
    for name, body in {"sinfo": f"echo '{SINFO}'", "squeue": "true", "sbatch": f'echo "$@" > {record}; echo 5'}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    config = {"bin_dir": str(bin_dir), "run_as_owner": False, "log_dir": str(tmp_path / "logs")}
    backend = load_backend("slurm", "c1", config, work_dir=tmp_path / "work")

    assert not backend.requires_identity
    assert backend.submit(spec(run_as=None)) == "5"
    assert "--account" not in record.read_text() and f"--output={tmp_path}/logs/" in record.read_text()
