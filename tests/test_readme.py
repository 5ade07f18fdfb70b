"""The README's examples are the truth: its `qm` and `curl` blocks, run as written against a
live demo (`make demo`'s steps: migrate, seed_demo, the scheduler loop and the web server,
on a scratch QM_VAR_DIR), submit jobs that run to COMPLETED.

Only what the README tells the reader to fill in is filled in: the portal's address and
the token (``QM_URL`` and ``QM_TOKEN`` in its setup block). The token is made as the
README's reader makes it on the API tokens page, by the same service.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.scheduler.tick.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- readme-test: (?P<name>[a-z]+) -->\n```sh\n(?P<body>.*?)```", re.S)
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"}
#: What the embedded demo must not inherit from the test run (CI points these at its services).
NOT_THE_DEMOS = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "QM_WORK_DIR", "QM_URL", "QM_TOKEN")

MAKE_TOKEN = """
from django.contrib.auth import get_user_model
from people.services import create_api_token
print(create_api_token(get_user_model().objects.get(username="alice"), "readme")[1])
"""


def readme_blocks() -> dict[str, str]:
    """The README's blocks that this test runs, by the name their marker gives them."""
    return {m["name"]: m["body"] for m in BLOCK.finditer((ROOT / "README.md").read_text())}


def test_the_readme_marks_its_setup_qm_and_curl_blocks() -> None:
    blocks = readme_blocks()
    assert set(blocks) == {"setup", "qm", "curl"}, blocks.keys()
    assert re.search(r"^export QM_URL=\S+ QM_TOKEN=\S+", blocks["setup"], re.M), blocks["setup"]
    assert "$QM_URL" in blocks["curl"] and "$QM_TOKEN" in blocks["curl"]


def with_this_demo(setup: str, url: str, token: str) -> str:
    """The setup block with the reader's own address and token in its ``export`` line."""
    setup, urls = re.subn(r"\bQM_URL=\S+", f"QM_URL={url}", setup)
    setup, tokens = re.subn(r"\bQM_TOKEN=\S+", f"QM_TOKEN={token}", setup)
    assert urls == tokens == 1, setup
    return setup


@dataclass
class Demo:
    url: str
    token: str
    var: Path

    def get(self, path: str) -> bytes:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return bytes(response.read())

    def job(self, job_id: int) -> dict[str, object]:
        return dict(json.loads(self.get(f"/api/v1/jobs/{job_id}/")))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/login/", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C, as the reader stops it (which also ends the demo's jobs), then SIGKILL."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """`make demo` on a scratch QM_VAR_DIR and a free port, as the README's reader runs it."""
    if shutil.which("curl") is None or shutil.which("bash") is None:
        pytest.skip("the README's examples need curl and bash")
    var = tmp_path_factory.mktemp("readme-demo")
    env = {k: v for k, v in os.environ.items() if k not in NOT_THE_DEMOS}
    env.update(DEBUG="1", QM_VAR_DIR=str(var), PYTHONUNBUFFERED="1")
    _manage(env, "migrate", "--noinput")
    _manage(env, "seed_demo", "--no-jobs")  # the demo's own jobs sleep for minutes and outlive the test
    token = _manage(env, "shell", "-c", MAKE_TOKEN).strip().splitlines()[-1]
    url = f"http://127.0.0.1:{_free_port()}"
    # make demo's last step: the scheduler loop and the web server, stopped together.
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "run_demo", url.removeprefix("http://")],
        cwd=ROOT,
        env=env,
        stdout=(var / "run_demo.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: _answers(url), timeout=120, interval=0.5, what=f"the demo portal at {url}")
        yield Demo(url, token, var)
    finally:
        _stop(proc)


def run_block(demo: Demo, name: str) -> subprocess.CompletedProcess[str]:
    """The setup block and the named block, as one script in the checkout, as a reader
    types them (``alias`` included: a script file is read line by line)."""
    blocks = readme_blocks()
    script = demo.var / f"readme-{name}.sh"
    script.write_text(with_this_demo(blocks["setup"], demo.url, demo.token) + "\n" + blocks[name])
    env = {k: v for k, v in os.environ.items() if k not in NOT_THE_DEMOS}
    return subprocess.run(
        ["bash", "-O", "expand_aliases", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=420
    )


def outcome(demo: Demo, job_id: int) -> str:
    """The job's end state (waiting for it to end), with its log when it did not complete."""
    wait_for(lambda: demo.job(job_id)["state"] in ENDED, timeout=300, interval=1, what=f"job {job_id} to end")
    job = demo.job(job_id)
    if job["state"] == "COMPLETED":
        return "COMPLETED"
    log = json.loads(demo.get(f"/api/v1/jobs/{job_id}/log/"))
    return f"{job['state']} (exit {job.get('exit_code')}): {log}"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_qm_block_runs_as_written_and_its_jobs_complete(demo: Demo) -> None:
    done = run_block(demo, "qm")
    assert "Traceback" not in done.stderr, done.stderr
    submitted = [int(n) for n in re.findall(r"^Submitted job (\d+)", done.stdout, re.M)]
    commands = [line for line in readme_blocks()["qm"].splitlines() if line.startswith("qm submit")]
    assert len(submitted) == len(commands), done.stdout + done.stderr
    outcomes = {command: outcome(demo, job_id) for command, job_id in zip(commands, submitted, strict=True)}
    assert all(o == "COMPLETED" for o in outcomes.values()), outcomes
    for job_id in submitted:  # the block's `qm jobs` lists what it submitted
        assert re.search(rf"^\s*{job_id}\b", done.stdout, re.M), done.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_curl_block_runs_as_written_and_its_job_completes(demo: Demo) -> None:
    done = run_block(demo, "curl")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["account"] == "nlp", answer  # alice's default account, as the README says
    assert outcome(demo, int(answer["id"])) == "COMPLETED"
