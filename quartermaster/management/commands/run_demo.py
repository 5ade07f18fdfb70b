"""The embedded demo's two processes, the scheduler loop and the web server, started and
stopped together (``make demo``): Ctrl-C stops both and then ends the demo's running jobs,
so nothing of the demo runs on after it.

The web server is uvicorn serving ``quartermaster.asgi`` (the portal, and the interactive
sessions' proxy with its WebSockets, which ``runserver`` cannot serve); static files come
from WhiteNoise, which with ``DEBUG`` reads them from the finders as ``runserver`` did.

Ctrl-C on a terminal reaches every process of its foreground group: both children get it
and stop on their own; this command waits for them, asks again (SIGINT, then SIGKILL)
any that lingers, and cancels the jobs still active on the local clusters
(``scheduler.jobs.verbs.cancel_job``: the job's runner is stopped and the job is recorded
CANCELLED "by demo-stop", with its timeline). A SIGTERM to this command does the same.

The demo's e-mail (its users are ``<name>@demo.invalid``) is written to files in
``EMAIL_FILE_PATH`` (Django's file backend) rather than to an SMTP server on localhost
that a fresh machine does not run; the profile page says so. ``EMAIL_BACKEND`` set in the
environment is kept.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler.backends.local import LocalBackend
from scheduler.choices import ACTIVE_STATES, BackendKind
from scheduler.jobs.remote import backend_for
from scheduler.jobs.transitions import JobStateConflict
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Cluster, Job

#: How long each child has to stop after Ctrl-C before it is asked again, then killed.
STOP_SECONDS = 10.0
STOPPED_BY = "demo-stop"


#: Where the demo's e-mail goes unless the environment names a backend.
DEMO_MAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"


def demo_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The children's environment: ``environ``, with the demo's mail backend unless it names one."""
    return {**environ, "EMAIL_BACKEND": environ.get("EMAIL_BACKEND") or DEMO_MAIL_BACKEND}


#: How long uvicorn waits for open connections (a notebook's WebSockets) when it is stopped.
GRACEFUL_SECONDS = 3

_ADDRPORT = re.compile(r"(?:(?P<host>\[[0-9a-fA-F:.]+\]|[^:\[\]]+):)?(?P<port>\d{1,5})")


def web_server_command(addrport: str) -> list[str]:
    """uvicorn serving the portal at ``addrport`` (``host:port``, ``[::1]:port`` or a bare
    port on 127.0.0.1, as ``runserver`` takes it). Raises ``CommandError`` for anything else."""
    match = _ADDRPORT.fullmatch(addrport.strip())
    if match is None or not 0 < int(match["port"]) < 65536:
        raise CommandError(f"addrport must be HOST:PORT, [IPv6]:PORT or PORT, got {addrport!r}")
    host = (match["host"] or "127.0.0.1").strip("[]")
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "quartermaster.asgi:application",
        "--host",
        host,
        "--port",
        match["port"],
        "--ws",
        "websockets-sansio",
        "--timeout-graceful-shutdown",
        str(GRACEFUL_SECONDS),
    ]


class Stop(Exception):
    """SIGTERM, handled as Ctrl-C is."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop


def stop_children(children: list[subprocess.Popen[bytes]]) -> None:
    """Each child that still runs: SIGINT (what Ctrl-C sends), then SIGKILL if it lingers."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
    for child in children:
        try:
            child.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def end_demo_jobs() -> int:
    """Cancel every job still active on a local cluster, then stop whatever its backend still
    runs (a job caught between hand-off and the record of it has no backend id in the
    database yet); returns how many jobs were ended."""
    ended = 0
    for job in Job.objects.filter(state__in=ACTIVE_STATES, cluster__kind=BackendKind.LOCAL).order_by("id"):
        try:
            cancel_job(job, by=STOPPED_BY)
        except JobStateConflict:  # it ended by itself meanwhile
            continue
        ended += 1
    for cluster in Cluster.objects.filter(kind=BackendKind.LOCAL):
        backend = backend_for(cluster)
        if not isinstance(backend, LocalBackend):
            continue
        for external_id in backend.list_jobs().values():
            backend.cancel(external_id)
    return ended


class Command(BaseCommand):
    help = "Run the demo's scheduler loop and web server; Ctrl-C stops both and ends the demo's running jobs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", help="Where the web server listens, e.g. 127.0.0.1:8000.")

    def handle(self, *args: Any, **options: Any) -> None:
        signal.signal(signal.SIGTERM, _raise_stop)
        # Started in the background of a script, this process and so its children would
        # ignore SIGINT; Python's own handler here means theirs is the default again.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        web_server = web_server_command(options["addrport"])
        environ = demo_environment(os.environ)
        if environ["EMAIL_BACKEND"] == DEMO_MAIL_BACKEND:
            self.stdout.write(f"The demo's e-mail is written to files in {settings.EMAIL_FILE_PATH}, not sent.")
        children = [
            subprocess.Popen([*manage, "run_scheduler"], env=environ),
            subprocess.Popen(web_server, env=environ, cwd=settings.BASE_DIR),
        ]
        interrupted = False
        try:
            # Either one ending (a port in use, a crash) ends the demo: half a demo misleads.
            while all(child.poll() is None for child in children):
                try:
                    children[1].wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    continue
        except (KeyboardInterrupt, Stop):
            interrupted = True
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
            stop_children(children)
            ended = end_demo_jobs()
            self.stdout.write(f"Demo stopped: the web server and the scheduler ended, and {ended} running job(s).")
        if not interrupted:
            which = "web server" if children[1].returncode else "scheduler loop"
            self.stderr.write(f"The demo's {which} stopped by itself (its message is above).")
            raise SystemExit(1)
