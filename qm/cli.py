"""``qm``: Quartermaster from the command line, through the REST API only.

Configuration: ``QM_URL`` (default ``http://127.0.0.1:8000``) and ``QM_TOKEN`` (create one
on the portal's API tokens page), or ``--url`` and ``--token``.

    qm submit [options] -- COMMAND...     submit (``--wait`` follows it to the end)
    qm estimate [options] -- COMMAND...   when would it start? nothing is submitted
    qm jobs [--state S] [--account A]     list jobs you can see
    qm show ID                            one job, with why it waits
    qm cancel ID...                       cancel jobs
    qm wait ID                            follow a job until it ends

Exit status: 0 on success (``--wait``: the job completed), 1 when the API refused
(the message says why, per field), 2 for bad usage, 3 when a waited-on job did not
complete.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, TextIO

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"}
SPINNER = "|/-\\"


class ApiError(Exception):
    """The API answered with an error status; ``body`` is its JSON (or text)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body

    def describe(self) -> str:
        body = self.body
        if isinstance(body, dict):
            if set(body) == {"detail"}:
                return str(body["detail"])
            lines: list[str] = []
            for field, problems in body.items():
                items = problems if isinstance(problems, list) else [problems]
                lines.extend(f"{field}: {p}" for p in items)
            return "\n".join(lines)
        return str(body) or f"HTTP {self.status}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would carry the bearer token along, to any
    host. A redirect comes back as an error naming where it pointed."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


class Api:
    """A minimal JSON client for ``/api/v1/`` with a bearer token (stdlib only)."""

    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.base = url.rstrip("/") + "/api/v1/"
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Send one request; return the decoded JSON; raise ``ApiError`` on 4xx/5xx."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path.lstrip("/"), data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                where = exc.headers.get("Location", "?")
                raise ApiError(exc.code, f"the server redirected to {where}; give that address with --url") from None
            raw = exc.read()
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")[:500]
            raise ApiError(exc.code, parsed) from None
        return json.loads(raw) if raw else None

    def get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode([(k, v) for k, v in params.items() if v not in (None, "")], doseq=True)
        return self.request("GET", path + (f"?{query}" if query else ""))

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("POST", path, body)


def parse_walltime(text: str) -> int:
    """``3600``, ``90m``, ``2h``, ``1d`` or ``h:mm[:ss]`` -> seconds."""
    text = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].isdigit():
        return int(text[:-1]) * units[text[-1]]
    if ":" in text:
        parts = [int(p) for p in text.split(":")]
        while len(parts) < 3:
            parts.append(0)
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    return int(text)


def _walltime(text: str) -> int:
    try:
        return parse_walltime(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad walltime {text!r}: use 2h, 90m, 1:30:00 or seconds") from None


def _env(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"bad --env {text!r}: use KEY=value")
    return key, value


def _request_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="job name (default: the command's first word)")
    parser.add_argument("--account", "-A")
    parser.add_argument("--qos", "-q")
    parser.add_argument("--nodes", "-N", type=int)
    parser.add_argument("--gpus", "-G", type=int, dest="gpus_per_node", help="GPUs per node")
    parser.add_argument("--gpu-model")
    parser.add_argument("--min-gpu-memory", type=int, dest="min_gpu_memory_mib", help="MiB")
    parser.add_argument("--min-compute-capability")
    parser.add_argument("--cpus", type=int, dest="cpus_per_node", help="CPUs per node")
    parser.add_argument("--memory", type=int, dest="memory_mib_per_node", help="MiB per node")
    parser.add_argument("--walltime", "-t", type=_walltime, required=True, help="2h, 90m, 1:30:00 or seconds")
    parser.add_argument("--image")
    parser.add_argument("--env", "-e", type=_env, action="append", default=[], help="KEY=value (repeatable)")
    parser.add_argument("--script", type=argparse.FileType("r"), help="a script file to run instead of a command")
    parser.add_argument(
        "--wrap",
        help="a shell command line run as written, as sbatch --wrap: 'cd data && python train.py $QM_NODE_RANK'",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command and its arguments, each quoted")


def _request_body(args: argparse.Namespace) -> dict[str, Any]:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    body: dict[str, Any] = {"walltime_seconds": args.walltime}
    for field in (
        "account",
        "qos",
        "nodes",
        "gpus_per_node",
        "gpu_model",
        "min_gpu_memory_mib",
        "min_compute_capability",
        "cpus_per_node",
        "memory_mib_per_node",
        "image",
    ):
        value = getattr(args, field)
        if value is not None:
            body[field] = value
    if args.env:
        body["env"] = dict(args.env)
    if args.script is not None:
        body["script"] = args.script.read()
    if args.wrap is not None:
        body["command"] = args.wrap
    elif command:  # words, as a shell would have split them: quoted again, run as they are
        body["command"] = " ".join(_quote(c) for c in command)
    default = os.path.basename(command[0]) if command else "wrap" if args.wrap is not None else "script"
    body["name"] = (args.name or default)[:128]
    return body


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)


def _gpus(job: dict[str, Any]) -> str:
    if job.get("gpu_share"):
        return f"{job['nodes']}x{job['gpu_share']:g}"
    return f"{job['nodes']}x{job['gpus_per_node']}"


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds < 60:
        return "now"
    if seconds < 5400:
        return f"about {round(seconds / 60)} min"
    if seconds < 36 * 3600:
        return f"about {round(seconds / 3600)} h"
    return f"about {round(seconds / 86400)} days"


class Cli:
    def __init__(self, api: Api, out: TextIO, err: TextIO, sleep: Callable[[float], None] = time.sleep) -> None:
        self.api, self.out, self.err, self.sleep = api, out, err, sleep

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def submit(self, args: argparse.Namespace) -> int:
        job = self.api.post("jobs/", _request_body(args))
        if args.json:
            self.say(json.dumps(job, indent=2))
        else:
            self.say(f"Submitted job {job['id']} ({job['name']}): {job['state']}")
        return self.wait_for(job["id"], args.interval) if args.wait else 0

    def estimate(self, args: argparse.Namespace) -> int:
        answer = self.api.post("jobs/estimate/", _request_body(args))
        if args.json:
            self.say(json.dumps(answer, indent=2))
            return 0
        if answer["would_start_now"]:
            self.say("Would start now.")
        elif answer["estimated_start"]:
            self.say(
                f"Would start in {_when(answer['estimated_wait_seconds'])} (at the latest {answer['estimated_start']})."
            )
        else:
            self.say(f"Would wait ({answer['pending_reason']}); no start estimate.")
        for reason in answer["reasons"]:
            self.say(f"  {reason}")
        for blocker in answer.get("blockers") or []:
            self.say(f"  - {blocker['code']}: {blocker['message']}")
        return 0

    def jobs(self, args: argparse.Namespace) -> int:
        page = self.api.get("jobs/", state=args.state, account=args.account, owner=args.owner, page_size=args.limit)
        rows = page["results"] if isinstance(page, dict) else page
        if args.json:
            self.say(json.dumps(rows, indent=2))
            return 0
        self.say(f"{'ID':>8}  {'STATE':<11} {'GPUS':<6} {'ACCOUNT':<14} {'OWNER':<12} {'REASON':<16} NAME")
        for job in rows:
            self.say(
                f"{job['id']:>8}  {job['state']:<11} {_gpus(job):<6} {job['account']:<14} {job['owner']:<12} "
                f"{job['pending_reason'] or '':<16} {job['name']}"
            )
        return 0

    def show(self, args: argparse.Namespace) -> int:
        job = self.api.get(f"jobs/{args.id}/")
        if args.json:
            self.say(json.dumps(job, indent=2))
            return 0
        self.say(f"Job {job['id']}: {job['name']}  [{job['state']}]")
        self.say(f"  owner {job['owner']}, account {job['account']}, qos {job['qos'] or '-'}")
        self.say(f"  {_gpus(job)} {job['gpu_model'] or 'GPU'}, walltime {job['walltime_seconds']} s")
        for blocker in job.get("pending_blockers") or []:
            self.say(f"  waits: {blocker['code']}: {blocker['message']}")
        if job.get("estimated_start_at"):
            self.say(f"  estimated start (latest): {job['estimated_start_at']}")
        for alloc in job.get("allocations") or []:
            self.say(f"  on {alloc['node']} GPUs {','.join(map(str, alloc['gpu_indices']))}")
        if job.get("external_id"):
            self.say(f"  backend id {job['external_id']} on {job['cluster']}")
        if job.get("exit_code") is not None:
            self.say(f"  exit code {job['exit_code']}")
        return 0

    def cancel(self, args: argparse.Namespace) -> int:
        status = 0
        for job_id in args.ids:
            try:
                job = self.api.post(f"jobs/{job_id}/cancel/")
                self.say(f"Job {job['id']}: {job['state']}")
            except ApiError as exc:
                print(f"qm: job {job_id}: {exc.describe()}", file=self.err)
                status = 1
        return status

    def wait(self, args: argparse.Namespace) -> int:
        return self.wait_for(args.id, args.interval)

    def wait_for(self, job_id: int, interval: float) -> int:
        """Poll the job, printing each state change (and a spinner on a terminal) until it
        ends. 0 if it completed, 3 otherwise."""
        last = None
        started = time.monotonic()
        tick = 0
        while True:
            job = self.api.get(f"jobs/{job_id}/")
            state = job["state"]
            elapsed = int(time.monotonic() - started)
            if state != last:
                detail = ""
                if state in ("PENDING", "HELD") and job.get("pending_reason"):
                    detail = f" ({job['pending_reason']})"
                    if job.get("estimated_start_at"):
                        detail += f", estimated start {job['estimated_start_at']}"
                elif job.get("allocations"):
                    detail = " on " + ", ".join(a["node"] for a in job["allocations"])
                if self.err.isatty():
                    self.err.write("\r\033[K")
                self.say(f"[{elapsed:>5}s] job {job_id}: {state}{detail}")
                last = state
            if state in TERMINAL:
                if job.get("exit_code") is not None:
                    self.say(f"exit code {job['exit_code']}")
                return 0 if state == "COMPLETED" else 3
            if self.err.isatty():
                self.err.write(f"\r{SPINNER[tick % 4]} {state} for {elapsed}s")
                self.err.flush()
            tick += 1
            self.sleep(interval)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qm", description="Quartermaster from the command line (REST API).")
    parser.add_argument("--url", default=os.environ.get("QM_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("QM_TOKEN", ""))
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    sub = parser.add_subparsers(dest="verb", required=True)
    submit = sub.add_parser("submit", help="submit a job")
    _request_options(submit)
    submit.add_argument("--wait", action="store_true", help="follow the job until it ends")
    submit.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    estimate = sub.add_parser("estimate", help="when would a job start? (nothing is submitted)")
    _request_options(estimate)
    jobs = sub.add_parser("jobs", help="list jobs")
    jobs.add_argument("--state", action="append")
    jobs.add_argument("--account")
    jobs.add_argument("--owner")
    jobs.add_argument("--limit", type=int, default=50)
    show = sub.add_parser("show", help="show one job")
    show.add_argument("id", type=int)
    cancel = sub.add_parser("cancel", help="cancel jobs")
    cancel.add_argument("ids", type=int, nargs="+")
    wait = sub.add_parser("wait", help="follow a job until it ends")
    wait.add_argument("id", type=int)
    wait.add_argument("--interval", type=float, default=2.0)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    api: Api | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run one command; returns the exit status (see the module docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(argv)
    if args.verb in ("submit", "estimate"):
        given = [bool(args.command and args.command != ["--"]), args.script is not None, args.wrap is not None]
        if sum(given) != 1:
            print("qm: give exactly one of: a command after --, --wrap 'command line', --script FILE", file=err)
            return 2
    cli = Cli(api or Api(args.url, args.token), out, err, sleep)
    try:
        return int(getattr(cli, args.verb)(args))
    except ApiError as exc:
        print(f"qm: {exc.describe()}", file=err)
        return 1
    except BrokenPipeError:
        # The reader went away (``qm jobs | head``): stop quietly, as Unix tools do, and
        # keep the interpreter's final flush of stdout from complaining too.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool ended by a closed pipe
    except (urllib.error.URLError, OSError) as exc:
        print(f"qm: cannot reach {args.url}: {exc}", file=err)
        return 1
