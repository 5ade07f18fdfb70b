"""The session's script: ports, placeholders and the ready line the portal reads."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

import pytest

from scheduler.sessions.script import (
    READY_MARKER,
    SECRET_ENV,
    UnknownPlaceholder,
    fill_command,
    reported_port,
    session_script,
)

PORTS = (20000, 29999)


def test_form_values_reach_the_command_shell_quoted():
    command = fill_command(
        "tensorboard --logdir {logdir} --port {port}", {"logdir": "a b; rm -rf ~"}, port="7", base_url="/s/"
    )
    assert command == "tensorboard --logdir 'a b; rm -rf ~' --port 7"


def test_bash_own_braces_are_left_alone():
    assert fill_command("echo ${HOME} {base_url}", {}, port="1", base_url="/sessions/3/") == "echo ${HOME} /sessions/3/"


def test_a_placeholder_that_is_no_field_is_refused():
    with pytest.raises(UnknownPlaceholder, match="logdir"):
        fill_command("tensorboard --logdir {logdir}", {}, port="1", base_url="/")


@pytest.mark.parametrize(
    ("log", "port"),
    [
        pytest.param(f"starting\n{READY_MARKER} port=20001\n", 20001, id="the first ready line"),
        pytest.param("starting\n", None, id="not ready yet"),
        pytest.param(f"{READY_MARKER} port=5432\n", None, id="a port outside the range is no port"),
        pytest.param(f"say {READY_MARKER} port=20001\n", None, id="only a line of its own counts"),
    ],
)
def test_the_reported_port(log, port):
    assert reported_port(log, PORTS) == port


def test_the_secret_is_never_in_the_script():
    script = session_script(command="serve {port}", values={}, base_url="/sessions/1/", ready_path="", ports=PORTS)
    assert f"${SECRET_ENV}" in script  # read from the environment when the probe runs


def test_the_script_reports_a_free_port_once_the_server_answers(tmp_path):
    server = f"exec {sys.executable} -m http.server {{port}} --bind 127.0.0.1 --directory {tmp_path}"
    script = session_script(command=server, values={}, base_url="/sessions/9/", ready_path="", ports=PORTS)
    process = subprocess.Popen(
        ["bash", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, SECRET_ENV: "s3cret"},
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the server's own lines go to stderr
            if line.startswith(READY_MARKER):
                break
        port = reported_port(line, PORTS)
        assert port is not None
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).status == 200
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=30)
