"""Interactive sessions on Slurm: the batch script is the session's script, run on the
allocated node with the apps' environment first on its PATH, and the portal finds the
server at the node's ``NodeAddr`` as Slurm has it (``session_host``), never where the job
says. Stand-in Slurm commands for the words, the real dev cluster for the rest."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.backends import load_backend
from scheduler.backends import slurm_parse as parse
from scheduler.backends.base import BackendError, Placement
from scheduler.backends.slurm import SlurmBackend
from scheduler.sessions.script import SECRET_ENV, reported_port, session_script
from tests import slurm_dev
from tests.contract.test_slurm_backend import ALICE, fake_slurm, spec

PORTS = (20000, 29999)
SCONTROL_NODE = """NodeName=node3 Arch=x86_64 CoresPerSocket=1
   CPUAlloc=1 CPUEfctv=16 CPUTot=16 CPULoad=0.01
   Gres=gpu:a100:8
   NodeAddr=10.1.2.3 NodeHostName=node3 Version=22.05.8
   State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1
"""


@pytest.mark.parametrize(("out", "host"), [("node3\n", "node3"), ("n/a\n", None), ("", None)])
def test_the_batch_host_is_read_from_squeue(out: str, host: str | None) -> None:
    assert parse.batch_host(out) == host


def test_the_node_address_is_read_from_scontrol() -> None:
    assert parse.node_address(SCONTROL_NODE) == "10.1.2.3"
    assert parse.node_address("NodeName=node3 NodeAddr=(null)") is None


def test_session_host_is_the_batch_nodes_address_as_slurm_has_it(tmp_path: Path) -> None:
    backend = fake_slurm(
        tmp_path,
        squeue='[ "$3" = 42 ] && echo node3',
        scontrol=f"[ \"$3\" = node3 ] && cat <<'EOF'\n{SCONTROL_NODE}EOF",
    )

    assert backend.session_host("42", (Placement("node3", (0,)),)) == "10.1.2.3"


def test_session_host_of_a_job_on_no_node_yet_is_a_transient_error(tmp_path: Path) -> None:
    backend = fake_slurm(tmp_path, squeue="echo n/a")

    with pytest.raises(BackendError, match="runs on no node yet") as caught:
        backend.session_host("42", (Placement("node3", (0,)),))
    assert not caught.value.permanent


def test_a_sessions_batch_script_puts_the_apps_first_on_its_path_and_a_jobs_does_not(tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    backend = fake_slurm(tmp_path, sbatch=f'cat >> {scripts}; echo "----" >> {scripts}; echo 42')
    backend.apps_env = "/shared/apps-env"

    backend.submit(spec(env={SECRET_ENV: "s3cret"}))
    backend.submit(spec())

    session, ordinary, _ = scripts.read_text().split("----\n")
    assert 'export PATH=/shared/apps-env/bin:"$PATH"\n' in session
    assert "apps-env" not in ordinary


def test_apps_env_must_be_an_absolute_path(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="apps_env must be an absolute, normalised path"):
        load_backend("slurm", "c1", {"apps_env": "var/apps-env"}, work_dir=tmp_path)


# --- On the real dev cluster -----------------------------------------------------------------


@pytest.fixture
def slurm(tmp_path: Path, passable_tmp: Path) -> Iterator[SlurmBackend]:
    """The dev cluster with an apps' environment alice's jobs can reach (a stand-in:
    one program, ``qm-app``), jobs run as alice with their output under her home."""
    env = passable_tmp / "apps-env"
    (env / "bin").mkdir(parents=True)
    app = env / "bin" / "qm-app"
    app.write_text("#!/bin/sh\necho from-the-apps-env\n")
    app.chmod(0o755)
    env.chmod(0o755)
    (env / "bin").chmod(0o755)
    test_dir = f".quartermaster/test-{uuid.uuid4().hex[:12]}"
    config = {"slurm_conf": slurm_dev.slurm_conf(), "output_dir": f"{{home}}/{test_dir}", "apps_env": str(env)}
    backend = load_backend("slurm", "devcluster", config, work_dir=tmp_path / "work")
    assert isinstance(backend, SlurmBackend)
    yield backend
    slurm_dev.scancel_jobs_in(slurm_dev.home_of(ALICE.user) / test_dir)


@pytest.mark.slurm
def test_a_session_on_slurm_reports_ready_and_answers_at_its_nodes_address(slurm: SlurmBackend) -> None:
    server = 'echo "app: $(qm-app)"; exec python3 -m http.server {port} --bind 0.0.0.0'
    script = session_script(command=server, values={}, base_url="/sessions/5/", ready_path="", ports=PORTS)
    session = spec(command="", script=script, run_as=ALICE, env={SECRET_ENV: "s3cret"}, walltime_seconds=300)
    external_id = slurm.submit(session)

    deadline = time.monotonic() + 120
    while (port := reported_port(slurm.read_log(external_id), PORTS)) is None:
        assert not slurm.poll([external_id])[external_id].state.is_terminal, slurm.read_log(external_id)
        assert time.monotonic() < deadline, f"no ready line: {slurm.read_log(external_id)}"
        time.sleep(0.2)
    host = slurm.session_host(external_id, session.placements)

    assert "app: from-the-apps-env" in slurm.read_log(external_id)
    assert host == "127.0.0.1"  # every node of the dev cluster is this machine, as slurm.conf says
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/", timeout=30) as answer:
            assert answer.status == 200
    finally:
        slurm.cancel(external_id)
