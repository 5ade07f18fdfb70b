"""Interactive sessions on the local cluster: a session's job finds the apps' environment
first on its PATH, read-only, and nothing else of the portal's tree around it; the real
JupyterLab and TensorBoard of ``make apps`` start in the sandbox, report ready on a port
of their own, and JupyterLab answers only with the session's secret.

Tried as an attacker would: a session is code its owner controls (a notebook runs
anything), so it gets no more of the portal than any job does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import websocket

from scheduler.backends.base import BackendError, JobSpec, Placement, RunAs
from scheduler.backends.local import LocalBackend
from scheduler.sessions.script import SECRET_ENV, reported_port, session_script
from tests.conftest import apps_env

NODES = [{"name": "n-01", "cpus": 8, "memory_mib": 8000, "gpus": {"count": 2, "model": "L4", "memory_mib": 24576}}]
ALICE = RunAs("alice", 20001, 20001)
PORTS = (20000, 29999)
PORTAL_SECRET = "portal-secret-" + uuid.uuid4().hex
#: The apps' commands as a site would write them (``InteractiveApp.command``).
JUPYTERLAB = (
    'export JUPYTER_TOKEN="$QM_SESSION_SECRET"; exec jupyter lab --no-browser --ip=0.0.0.0 --port={port} '
    '--ServerApp.base_url={base_url} --ServerApp.root_dir="$HOME"'
)
TENSORBOARD = 'exec tensorboard --logdir "$HOME" --host 0.0.0.0 --port {port} --path_prefix {base_url}'


def job(run_as: RunAs = ALICE, *, session: bool = True, script: str = "", command: str = "") -> JobSpec:
    return JobSpec(
        key=f"{uuid.uuid4()}.1",
        name="session",
        owner=run_as.user,
        account="lab",
        command=command,
        script=script,
        walltime_seconds=120,
        placements=(Placement("n-01", (0,)),),
        run_as=run_as,
        env={SECRET_ENV: "the-sessions-secret"} if session else {},
    )


def ended_log(backend: LocalBackend, spec: JobSpec) -> str:
    external_id = backend.submit(spec)
    deadline = time.monotonic() + 60
    while not backend.poll([external_id])[external_id].state.is_terminal:
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)
    return backend.read_log(external_id)


@pytest.fixture
def portal(tmp_path: Path) -> Path:
    """A portal's tree as the demo has it: its settings and a world-readable database
    (Django's default umask) holding a secret, and the apps' environment in its var/ (a
    stand-in: one program, ``qm-app``, and the venv's ``pyvenv.cfg``)."""
    root = tmp_path / "portal"
    (root / "quartermaster").mkdir(parents=True)
    (root / "quartermaster" / "settings.py").write_text(f"SECRET_KEY = {PORTAL_SECRET!r}\n")
    (root / "var").mkdir(mode=0o755)
    (root / "var" / "quartermaster.sqlite3").write_text(f"SQLite format 3 {PORTAL_SECRET}")
    for made in (root / "quartermaster" / "settings.py", root / "var" / "quartermaster.sqlite3"):
        made.chmod(0o644)
    fake_env(root / "var" / "apps-env")
    return root


def fake_env(env: Path) -> Path:
    (env / "bin").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    app = env / "bin" / "qm-app"
    app.write_text("#!/bin/sh\necho app-from-the-apps-env\n")
    app.chmod(0o755)
    return env


def sandboxed(portal: Path, **config: Any) -> LocalBackend:
    config = {"nodes": NODES, "sandbox": "bwrap", "apps_env": str(portal / "var" / "apps-env"), **config}
    return LocalBackend(name="demo", config=config, work_dir=portal / "var" / "work")


@pytest.mark.bwrap
def test_a_sessions_job_runs_the_apps_env_first_and_finds_nothing_else_of_the_portal(portal: Path) -> None:
    backend = sandboxed(portal)
    env = portal / "var" / "apps-env"
    (env / "bin").chmod(0o777)  # whoever the job runs as, only the sandbox keeps it out
    attack = f"""
    echo "path=$PATH"
    qm-app
    touch {env}/bin/planted 2>&1 | sed 's/^/plant: /'
    cat {portal}/var/quartermaster.sqlite3 2>&1 | sed 's/^/database: /'
    cat {portal}/quartermaster/settings.py 2>&1 | sed 's/^/settings: /'
    ls -a {portal} {portal}/var 2>&1 | sed 's/^/tree: /'
    find / -xdev -name '*.sqlite3' 2>/dev/null | sed 's/^/found /'
    """

    log = ended_log(backend, job(command=attack))
    print(log)  # the attack's own words, for a reader of -s output

    assert f"path={env}/bin:" in log and "app-from-the-apps-env" in log
    assert "plant: touch:" in log and "Read-only file system" in log and not (env / "bin" / "planted").exists()
    assert "database: cat:" in log and "settings: cat:" in log and PORTAL_SECRET not in log
    listed = {line.split()[-1] for line in log.splitlines() if line.startswith("tree: ") and ":" not in line[6:]}
    assert listed <= {".", "..", "var", "apps-env", "work"}  # passages only: no database, no settings
    assert "found " not in log


@pytest.mark.bwrap
def test_an_ordinary_job_neither_finds_the_apps_on_its_path_nor_sees_them(portal: Path) -> None:
    backend = sandboxed(portal)
    env = portal / "var" / "apps-env"

    log = ended_log(backend, job(session=False, command=f"echo path=$PATH; qm-app; ls {env} 2>&1 | sed 's/^/env: /'"))

    assert str(env) not in log.split("path=", 1)[1].splitlines()[0]
    assert "app-from-the-apps-env" not in log and "env: ls:" in log


def test_a_session_on_a_cluster_whose_apps_env_is_not_built_is_refused_for_good(portal: Path) -> None:
    backend = LocalBackend(
        name="demo", config={"nodes": NODES, "apps_env": str(portal / "nowhere")}, work_dir=portal / "work"
    )

    with pytest.raises(BackendError, match=r"apps_env .*nowhere has no bin/ directory \(make apps builds it\)") as err:
        backend.submit(job(command="true"))
    assert err.value.permanent


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("only root runs jobs as their owners' uids; here every job runs as the portal's own user")


def test_unsandboxed_as_its_owner_a_session_runs_a_root_owned_apps_env(as_root: None, passable_tmp: Path) -> None:
    env = fake_env(passable_tmp / "apps-env")
    backend = LocalBackend(
        name="demo",
        config={"nodes": NODES, "sandbox": "none", "apps_env": str(env), "homes_dir": str(passable_tmp / "homes")},
        work_dir=passable_tmp / "work",
    )

    log = ended_log(backend, job(command=f"id -u; qm-app; touch {env}/bin/planted 2>&1 | sed 's/^/plant: /'"))

    assert log.splitlines()[:2] == ["20001", "app-from-the-apps-env"]
    assert "plant: touch:" in log and not (env / "bin" / "planted").exists()


def test_unsandboxed_as_its_owner_a_session_refuses_an_apps_env_others_may_change(
    as_root: None, passable_tmp: Path
) -> None:
    """An environment another user could write is one where Bob plants code that Alice's
    JupyterLab then runs as Alice: refused, saying why and where to build it."""
    env = fake_env(passable_tmp / "apps-env")
    env.chmod(0o777)
    backend = LocalBackend(
        name="demo",
        config={"nodes": NODES, "sandbox": "none", "apps_env": str(env), "homes_dir": str(passable_tmp / "homes")},
        work_dir=passable_tmp / "work",
    )

    with pytest.raises(BackendError, match=r"may be changed by other users .* /opt/quartermaster/apps-env") as err:
        backend.submit(job(command="true"))
    assert err.value.permanent


# -- the real apps, from the environment make apps builds ---------------------------------


@pytest.fixture
def apps(tmp_path: Path) -> LocalBackend:
    """The local backend in its sandbox with the real apps' environment."""
    config = {"nodes": NODES, "sandbox": "bwrap", "apps_env": str(apps_env())}
    return LocalBackend(name="demo", config=config, work_dir=tmp_path / "var" / "work")


def start(
    backend: LocalBackend, command: str, *, base_url: str, ready_path: str, secret: str, gpus: tuple[int, ...] = (0,)
) -> tuple[str, int]:
    """Submit a session of ``command`` on ``gpus`` and wait for its ready line: its id and port."""
    script = session_script(command=command, values={}, base_url=base_url, ready_path=ready_path, ports=PORTS)
    spec = dataclasses.replace(job(script=script), env={SECRET_ENV: secret}, placements=(Placement("n-01", gpus),))
    external_id = backend.submit(spec)
    deadline = time.monotonic() + 120
    while (port := reported_port(backend.read_log(external_id), PORTS)) is None:
        state = backend.poll([external_id])[external_id]
        assert not state.state.is_terminal, f"the session ended before it was ready: {backend.read_log(external_id)}"
        assert time.monotonic() < deadline, f"no ready line: {backend.read_log(external_id)}"
        time.sleep(0.1)
    return external_id, port


def status(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.bwrap
@pytest.mark.apps
@pytest.mark.slow
def test_jupyterlab_starts_in_the_sandbox_and_answers_only_with_the_sessions_secret(apps: LocalBackend) -> None:
    alices, bobs = f"alice-{uuid.uuid4().hex}", f"bob-{uuid.uuid4().hex}"
    first, first_port = start(apps, JUPYTERLAB, base_url="/sessions/7/", ready_path="api/status", secret=alices)
    second, second_port = start(apps, JUPYTERLAB, base_url="/sessions/8/", ready_path="api/status", secret=bobs)
    try:
        assert first_port != second_port  # two sessions on one node
        url = f"http://127.0.0.1:{first_port}/sessions/7/api/status"
        assert status(url, alices) == 200
        assert status(url) in (401, 403)  # another user of the node who found the port
        assert status(url, bobs) in (401, 403)  # another session's secret opens nothing here
        assert status(f"http://127.0.0.1:{second_port}/sessions/8/api/status", bobs) == 200
        assert alices not in apps.read_log(first)  # the secret never reaches the log
    finally:
        apps.cancel(first)
        apps.cancel(second)


def run_cell(port: int, base_url: str, secret: str, code: str) -> str:
    """Start a kernel in the session's JupyterLab and run ``code`` in it over the kernel's
    WebSocket, as the browser does: what it printed."""
    api = f"http://127.0.0.1:{port}{base_url}api/kernels"
    headers = {"Authorization": f"token {secret}", "Content-Type": "application/json"}
    request = urllib.request.Request(api, data=b"{}", headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=60) as answer:
        kernel = json.load(answer)["id"]
    socket = websocket.create_connection(
        f"ws://127.0.0.1:{port}{base_url}api/kernels/{kernel}/channels",
        header=[f"Authorization: token {secret}"],
        timeout=120,
    )
    message = uuid.uuid4().hex
    header = {
        "msg_id": message,
        "msg_type": "execute_request",
        "session": uuid.uuid4().hex,
        "username": "",
        "version": "5.3",
    }
    content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False}
    socket.send(
        json.dumps({"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"})
    )
    printed: list[str] = []
    try:
        while True:
            reply = json.loads(socket.recv())
            if reply.get("parent_header", {}).get("msg_id") != message:
                continue
            if reply["msg_type"] in ("stream", "error"):
                printed.append(reply["content"].get("text") or "\n".join(reply["content"].get("traceback", [])))
            if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
                return "".join(printed)
    finally:
        socket.close()


@pytest.mark.bwrap
@pytest.mark.apps
@pytest.mark.slow
def test_a_notebook_cell_runs_in_the_sandbox_on_the_sessions_gpus_and_not_in_the_portal(apps: LocalBackend) -> None:
    secret = uuid.uuid4().hex
    session, port = start(apps, JUPYTERLAB, base_url="/sessions/11/", ready_path="api/status", secret=secret, gpus=(1,))
    checkout = Path(__file__).resolve().parents[2]  # the portal's tree the apps' environment lies in
    cell = f"""
import os
print('gpus=' + os.environ['CUDA_VISIBLE_DEVICES'])
for path in ({str(checkout / "quartermaster" / "settings.py")!r}, {str(checkout / "manage.py")!r}):
    try:
        open(path).read()
        print('read ' + path)
    except OSError as refused:
        print('refused ' + type(refused).__name__)
try:
    print('var=' + ','.join(sorted(os.listdir({str(checkout / "var")!r}))))
except OSError as refused:
    print('var refused ' + type(refused).__name__)
print('secret=' + str(any('SECRET_KEY' in name for name in os.environ)))
"""
    try:
        printed = run_cell(port, "/sessions/11/", secret, cell)
    finally:
        apps.cancel(session)

    assert "gpus=1\n" in printed  # the session's GPUs, through the kernel's WebSocket
    assert "read " not in printed and printed.count("refused FileNotFoundError") == 2
    assert "var refused " in printed or "var=apps-env\n" in printed  # at most a passage to the apps
    assert "secret=False" in printed


@pytest.mark.bwrap
@pytest.mark.apps
@pytest.mark.slow
def test_tensorboard_starts_in_the_sandbox_under_the_sessions_base_url(apps: LocalBackend) -> None:
    session, port = start(apps, TENSORBOARD, base_url="/sessions/9/", ready_path="", secret="unused")
    try:
        assert status(f"http://127.0.0.1:{port}/sessions/9/data/logdir") == 200
    finally:
        apps.cancel(session)
