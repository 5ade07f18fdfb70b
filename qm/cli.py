"""``qm``: Quartermaster from the command line, through the REST API only, with the verbs
of the Slurm commands a researcher uses.

Configuration: ``QM_URL`` (default ``http://127.0.0.1:8000``) and ``QM_TOKEN`` (create one
on the portal's API tokens page), or ``--url`` and ``--token``.

    qm sbatch [SBATCH OPTIONS] SCRIPT [ARGS...]
                                          sbatch itself: the script's #SBATCH lines and the
                                          options before it, as sbatch reads them (options
                                          over the script); ARGS are the script's $1 $2...
    qm submit [options] -- COMMAND...     submit (sbatch; ``--wait`` follows it to the end;
                                          sbatch's spellings -J -t --gres --mem -c... too)
    qm submit [options] --wrap 'CMD; CMD' a command line run by the shell as written
    qm estimate [options] -- COMMAND...   when would it start? nothing is submitted
    qm submit --array 0-99%10 [options]   a job array: one job per index, 10 at once at most
    qm jobs [--state S] [--account A]     list jobs you can see (squeue; an array's waiting
                                          tasks on one line, 42_[8-99]; --array 42: each task)
    qm show ID                            one job, with why it waits (scontrol show job)
    qm edit ID [options]                  change a waiting job (scontrol update)
    qm cancel|hold|release|requeue ID...  (scancel, scontrol hold|release|requeue); an
                                          array's id acts on all its tasks, 42_7 on one

ID is a job id (42) or a task of an array (42_7).
    qm log ID [--follow]                  the job's output (its tail); --follow: whole, and
          [--rank N] [--stream S]         what it adds while it runs; one rank's stdout or
                                          stderr (``qm logs`` too)
    qm priority ID                        a waiting job's priority factors (sprio)
    qm fairshare                          the fair-share tree of your accounts (sshare)
    qm usage [--start D --end D --by G]   GPU-hours you may see, by account/user/model/qos (sreport)
    qm wait ID                            follow a job until it ends
    qm advise ID | --gpus N --walltime T  right-sizing: what your ended jobs of that shape
                                          used, and what asking less would have bought

Exit status: 0 on success (``--wait``: the job completed), 1 when the API refused
(the message says why, per field), 2 for bad usage (a Slurm option or ``#SBATCH``
directive the portal refuses included), 3 when a waited-on job did not
complete, 141 when the reader of the output went away (``qm jobs | head``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from qm.api import Api, ApiError, Retry
from qm.request import add_edit_options, add_request_options, edit_body, job_ref, request_body, walltime_arg
from qm.sbatch import SBATCH_USAGE, SbatchUsage, sbatch_body

#: How much of a log one read asks for (the API's most).
LOG_PIECE_BYTES = 1_048_576
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"}
SPINNER = "|/-\\"
#: The verbs that move jobs, as the API names them, with their Slurm command.
VERBS = {
    "cancel": "cancel jobs (scancel)",
    "hold": "keep waiting jobs from starting (scontrol hold)",
    "release": "let held jobs start (scontrol release)",
    "requeue": "put jobs back in the queue as a new attempt (scontrol requeue)",
}
DONE = {"cancel": "cancelled", "hold": "held", "release": "released", "requeue": "requeued"}
#: The GPU-hour columns of ``qm usage``, as the API names them.
USAGE_HOURS = ("gpu_hours", "billed_gpu_hours", "used_gpu_hours", "idle_gpu_hours", "unmeasured_gpu_hours")


def _gpus(job: dict[str, Any]) -> str:
    if job.get("gpu_share"):
        return f"{job['nodes']}x{job['gpu_share']:g}"
    return f"{job['nodes']}x{job['gpus_per_node']}"


def _in_line(jobs_ahead: int, gpu_hours_ahead: float) -> str:
    """A pending job's place in line, as the API gives it (``queue_jobs_ahead``)."""
    if not jobs_ahead:
        return "next (no job waits its turn ahead of it for the nodes it could run on)"
    jobs = f"{jobs_ahead} job{'s' if jobs_ahead > 1 else ''}"
    return f"{jobs} ahead, asking {gpu_hours_ahead:,.1f} GPU-hours, for the nodes it could run on"


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

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Sequence[str] = ()) -> None:
        """Rows under their column names, aligned by rich (colour on a terminal, plain
        text in a pipe, never wrapped: one row per line, as squeue prints)."""
        from rich.console import Console
        from rich.table import Table

        class PipeAware(Console):
            def on_broken_pipe(self) -> None:  # rich exits the process; main() says 141
                self.quiet = True
                raise BrokenPipeError(32, "Broken pipe")

        grid = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
        for column in columns:
            grid.add_column(column, justify="right" if column in right else "left", no_wrap=True)
        for row in rows:
            grid.add_row(*("" if cell is None else str(cell) for cell in row))
        terminal = self.out.isatty()
        PipeAware(file=self.out, width=None if terminal else 10_000, force_terminal=terminal, highlight=False).print(
            grid
        )

    def json_or(self, data: Any, args: argparse.Namespace) -> bool:
        """Print the API's JSON when ``--json`` was asked; True if it was."""
        if args.json:
            self.say(json.dumps(data, indent=2))
        return bool(args.json)

    def submit(self, args: argparse.Namespace) -> int:
        job = self.api.post("jobs/", request_body(args))
        array = job.get("array_job")
        if not self.json_or(job, args):
            if array:
                self.say(f"Submitted array job {array} ({job['name']}): {job['array_task_count']} tasks")
            else:
                self.say(f"Submitted job {job['id']} ({job['name']}): {job['state']}")
        if not args.wait:
            return 0
        return self.wait_for_array(array, args.interval) if array else self.wait_for(job["id"], args.interval)

    def sbatch(self, args: argparse.Namespace) -> int:
        """``sbatch [OPTIONS] SCRIPT [ARGS]``: the script and options sent as they are,
        for the portal to read as sbatch would; sbatch's answer ("Submitted batch job
        42", the id alone with ``--parsable``); ``-W``/``--wait`` follows it to the end."""
        try:
            call = sbatch_body(args.argv)
        except SbatchUsage as exc:
            print(f"qm sbatch: {exc}\n{SBATCH_USAGE}", file=self.err)
            return 2
        if call.help:
            self.say(SBATCH_USAGE)
            return 0
        job = self.api.post("jobs/", call.body)
        array = job.get("array_job")
        if not self.json_or(job, args):
            self.say(str(array or job["id"]) if call.parsable else f"Submitted batch job {array or job['id']}")
        if not call.wait:
            return 0
        return self.wait_for_array(array, 2.0) if array else self.wait_for(job["id"], 2.0)

    def names_array(self, job_id: int) -> bool:
        """Whether ``job_id`` is an array's id (its first task's), which ``scancel 42``
        and ``qm cancel 42`` take as the whole array."""
        return bool(self.api.get(f"jobs/{job_id}/").get("array_job") == job_id)

    def job_id(self, ref: tuple[int, int | None]) -> int:
        """The job id of ``42`` or of task ``42_7`` (looked up: a task has an id of its own)."""
        array, task = ref
        if task is None:
            return array
        found = self.api.get("jobs/", array_job=array, array_task=task)
        rows = found["results"] if isinstance(found, dict) else found
        if not rows:
            raise ApiError(404, {"detail": f"no task {task} of array {array} that you can see"})
        return int(rows[0]["id"])

    def estimate(self, args: argparse.Namespace) -> int:
        answer = self.api.post("jobs/estimate/", request_body(args), idempotent=True)  # writes nothing
        if self.json_or(answer, args):
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

    def edit(self, args: argparse.Namespace) -> int:
        body = edit_body(args)
        if not body:
            print("qm: say what to change (qm edit ID --walltime 1h --name x ...)", file=self.err)
            return 2
        job = self.api.patch(f"jobs/{self.job_id(args.id)}/", body)
        if not self.json_or(job, args):
            self.say(f"Job {job['id']} ({job['name']}): {', '.join(sorted(body))} changed")
        return 0

    def jobs(self, args: argparse.Namespace) -> int:
        page = self.api.get(
            "jobs/",
            state=args.state,
            account=args.account,
            owner=args.owner,
            page_size=args.limit,
            # An array's waiting tasks on one line, unless asked for its tasks one by one.
            collapse=None if args.array else "arrays",
            array_job=args.array,
        )
        rows = page["results"] if isinstance(page, dict) else page
        if self.json_or(rows, args):
            return 0
        self.table(
            ["ID", "STATE", "GPUS", "ACCOUNT", "OWNER", "REASON", "NAME"],
            [
                [
                    job.get("display_id", job["id"]),
                    job["state"],
                    _gpus(job),
                    job["account"],
                    job["owner"],
                    job["pending_reason"],
                    job["name"],
                ]
                for job in rows
            ],
            right=["ID"],
        )
        return 0

    def show(self, args: argparse.Namespace) -> int:
        job = self.api.get(f"jobs/{self.job_id(args.id)}/")
        if self.json_or(job, args):
            return 0
        self.say(f"Job {job.get('display_id', job['id'])}: {job['name']}  [{job['state']}]")
        if job.get("array_job"):
            array = self.api.get(f"arrays/{job['array_job']}/")
            states = ", ".join(f"{n} {state}" for state, n in array["states"].items())
            place = f"task {job['array_task_id']} of array {array['array_job']} ({array['spec']})"
            self.say(f"  job {job['id']}, {place}: {states}")
        self.say(f"  owner {job['owner']}, account {job['account']}, qos {job['qos'] or '-'}")
        self.say(f"  {_gpus(job)} {job['gpu_model'] or 'GPU'}, walltime {job['walltime_seconds']} s")
        for blocker in job.get("pending_blockers") or []:
            self.say(f"  waits: {blocker['code']}: {blocker['message']}")
        if job.get("estimated_start_at"):
            self.say(f"  estimated start (latest): {job['estimated_start_at']}")
        if job.get("estimated_start_p50_at") and job.get("estimated_start_p90_at"):
            self.say(f"  likely start: {job['estimated_start_p50_at']} (p50), {job['estimated_start_p90_at']} (p90)")
        if job["state"] == "PENDING" and job.get("queue_jobs_ahead") is not None:
            self.say(f"  in line: {_in_line(job['queue_jobs_ahead'], job.get('queue_gpu_hours_ahead') or 0.0)}")
        for alloc in job.get("allocations") or []:
            self.say(f"  on {alloc['node']} GPUs {','.join(map(str, alloc['gpu_indices']))}")
        if job.get("external_id"):
            self.say(f"  backend id {job['external_id']} on {job['cluster']}")
        if job.get("output_file"):
            self.say(f"  output to {job['output_file']}")
        if job.get("error_file") and job.get("error_file") != job.get("output_file"):
            self.say(f"  errors to {job['error_file']}")
        if job.get("exit_code") is not None:
            self.say(f"  exit code {job['exit_code']}")
        if job.get("mail_type") is not None:  # its own choice of messages (sbatch --mail-type)
            self.say(f"  mail type {','.join(job['mail_type']) or 'NONE'}")
        if job.get("efficiency"):
            self.say(_efficiency(job["efficiency"], job["walltime_seconds"]))
        return 0

    def verb(self, args: argparse.Namespace) -> int:
        """cancel, hold, release, requeue: each job in turn; 1 if any was refused. An
        array's id moves every task of it (``scancel 42``), ``42_7`` the one task."""
        status = 0
        for ref in args.ids:
            name = f"{ref[0]}" if ref[1] is None else f"{ref[0]}_{ref[1]}"
            try:
                job_id = self.job_id(ref)
                if ref[1] is None and self.names_array(job_id):
                    moved = self.api.post(f"arrays/{job_id}/{args.verb}/")
                    states = ", ".join(f"{n} {state}" for state, n in moved["array"]["states"].items())
                    self.say(f"Array {job_id}: {moved['changed']} tasks {DONE[args.verb]}; now {states}")
                    continue
                job = self.api.post(f"jobs/{job_id}/{args.verb}/")
                self.say(f"Job {job.get('display_id', job['id'])}: {job['state']}")
            except ApiError as exc:
                print(f"qm: job {name}: {exc.describe()}", file=self.err)
                status = 1
        return status

    def log(self, args: argparse.Namespace) -> int:
        """The job's output: the tail of every rank's together; with ``--rank`` or
        ``--stream``, that log whole, as far as the job has written it; ``--follow``
        goes on printing what it adds until the job ends (tail -f). Whole logs are read
        a piece at a time, each from where the last ended (the API's ``offset``), so
        nothing is printed twice or left out."""
        job_id = self.job_id(args.id)
        if not (args.follow or args.rank is not None or args.stream):
            self.out.write(self.api.get(f"jobs/{job_id}/log/", max_bytes=args.bytes)["log"])
            return 0
        offset = 0
        while True:
            part = self.api.get(
                f"jobs/{job_id}/log/", offset=offset, max_bytes=LOG_PIECE_BYTES, rank=args.rank, stream=args.stream
            )
            self.out.write(part["log"])
            self.out.flush()
            grew, full = part["next_offset"] > offset, part["next_offset"] - offset > LOG_PIECE_BYTES - 4
            offset = part["next_offset"]
            if full or (grew and part["ended"]):
                continue  # more is there already: read on at once
            if part["ended"] or not args.follow:
                return 0
            self.sleep(args.interval)

    def priority(self, args: argparse.Namespace) -> int:
        factors = self.api.get(f"jobs/{self.job_id(args.id)}/priority/")
        if not self.json_or(factors, args):
            names = ["job_id", "total", "age", "fairshare", "jobsize", "qos", "nice"]
            self.table(
                ["JOBID", "PRIORITY", "AGE", "FAIRSHARE", "JOBSIZE", "QOS", "NICE"],
                [[_number(factors[name]) for name in names]],
                right=["JOBID", "PRIORITY", "AGE", "FAIRSHARE", "JOBSIZE", "QOS", "NICE"],
            )
        return 0

    def usage(self, args: argparse.Namespace) -> int:
        """GPU-hours over a period (sreport), by ``--by``."""
        answer = self.api.get("usage/", start=args.start, end=args.end, group_by=args.by)
        if self.json_or(answer, args):
            return 0
        self.say(f"GPU-hours from {answer['start']} to {answer['end']} (UTC days, inclusive), by {answer['group_by']}:")
        hours = ["GPU-HOURS", "BILLED", "USED", "IDLE", "UNMEASURED"]
        self.table(
            [answer["group_by"].upper(), "ATTEMPTS", *hours, "EFFICIENCY"],
            [
                [
                    row["group"] or "-",
                    row["attempts"],
                    *(f"{row[name]:.2f}" for name in USAGE_HOURS),
                    "-" if row["efficiency_pct"] is None else f"{row['efficiency_pct']:.0f}%",
                ]
                for row in answer["rows"]
            ],
            right=["ATTEMPTS", *hours, "EFFICIENCY"],
        )
        return 0

    def fairshare(self, args: argparse.Namespace) -> int:
        rows = self.api.get("fairshare/")
        if not self.json_or(rows, args):
            numbers = ["RAWSHARES", "NORMSHARES", "RAWUSAGE", "EFFECTVUSAGE", "FAIRSHARE"]
            self.table(
                ["ACCOUNT", "USER", *numbers],
                [
                    [
                        " " * row["depth"] + row["account"],
                        row["user"],
                        row["raw_shares"],
                        _number(row["norm_shares"]),
                        _number(row["raw_usage"]),
                        _number(row["effective_usage"]),
                        _number(row["fairshare"]),
                    ]
                    for row in rows
                ],
                right=numbers,
            )
        return 0

    def advise(self, args: argparse.Namespace) -> int:
        """Right-sizing advice for a job's shape (``ID``) or one described (``--gpus``,
        ``--walltime``); 2 when neither or both are given."""
        if (args.id is None) == (args.gpus is None and args.walltime is None):
            print("qm: give a job ID or --gpus N --walltime T, not both", file=self.err)
            return 2
        if args.id is not None:
            answer = self.api.get(f"jobs/{self.job_id(args.id)}/advice/")
        elif args.gpus is None or args.walltime is None:
            print("qm: a shape needs both --gpus N (GPUs in all) and --walltime T", file=self.err)
            return 2
        else:
            answer = self.api.get(
                "advice/",
                gpus=args.gpus,
                walltime_seconds=args.walltime,
                gpu_model=args.gpu_model,
                cluster=args.cluster,
            )
        if self.json_or(answer, args):
            return 0
        if answer["advice"] is None:
            self.say(f"No advice: fewer than {answer['min_jobs']} of your ended jobs of this shape.")
        else:
            self.say(answer["advice"]["words"])
        return 0

    def wait(self, args: argparse.Namespace) -> int:
        job_id = self.job_id(args.id)
        if args.id[1] is None and self.names_array(job_id):
            return self.wait_for_array(job_id, args.interval)
        return self.wait_for(job_id, args.interval)

    def wait_for_array(self, array_job: int, interval: float) -> int:
        """Poll the array until every task ended, printing its task counts when they change.
        0 if every task completed, 3 otherwise."""
        last = None
        while True:
            states = self.api.get(f"arrays/{array_job}/")["states"]
            if states != last:
                self.say(f"array {array_job}: " + ", ".join(f"{n} {state}" for state, n in states.items()))
                last = states
            if set(states) <= TERMINAL:
                return 0 if set(states) == {"COMPLETED"} else 3
            self.sleep(interval)

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


def _efficiency(figures: dict[str, Any], walltime: int) -> str:
    """``seff``'s lines for a finished job. Any of its utilization and memory figures may
    be null (the API's schema: what was not measured, such as a MIG slice's utilization):
    each shows as ``-``, never fails the whole command."""
    lines = [
        f"  efficiency: {figures['gpu_hours']:.2f} GPU-hours; elapsed {figures['elapsed_seconds']} s of {walltime} s"
        f" ({100 * figures['walltime_used']:.0f}% of the walltime)"
    ]
    if not figures["samples"]:
        lines.append("  GPU utilization: unmeasured (no GPU samples were reported while it ran)")
        return "\n".join(lines)
    mean, peak = (_whole(figures[k], "%") for k in ("gpu_util_mean", "gpu_util_peak"))
    lines.append(f"  GPU utilization: mean {mean}, peak {peak}")
    mean, peak = (_whole(figures[k], " MiB") for k in ("memory_used_mean_mib", "memory_used_peak_mib"))
    total = figures["memory_total_mib"]
    lines.append(f"  GPU memory: mean {mean}, peak {peak}" + (f" of {_whole(total, ' MiB')}" if total else ""))
    return "\n".join(lines)


#: The body's fields that carry what a Slurm user wrote: a 400 on them is bad usage (2).
_SLURM_WORDS = frozenset({"sbatch_options", "script", "script_args"})


def _refused_options(exc: ApiError) -> bool:
    """Whether the API refused the Slurm options or ``#SBATCH`` lines it was given."""
    return exc.status == 400 and isinstance(exc.body, dict) and bool(_SLURM_WORDS & set(exc.body))


def _whole(value: float | None, unit: str) -> str:
    """A measured figure rounded, with its unit; ``-`` if it was not measured."""
    return "-" if value is None else f"{value:.0f}{unit}"


def _number(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _rank(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: give a rank, a whole number from 0")
    return int(text)


def _tries(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of tries, 1 or more (1: no retries)")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="qm", description="Quartermaster from the command line (REST API).")
    parser.add_argument("--url", default=os.environ.get("QM_URL", "http://127.0.0.1:8000"), help="the portal ($QM_URL)")
    parser.add_argument("--token", default=os.environ.get("QM_TOKEN", ""), help="an API token ($QM_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    parser.add_argument(
        "--tries",
        type=_tries,
        default=Retry.tries,
        help="sends of a call safe to repeat while the portal is unavailable (502/503/504, refused), within 60 s",
    )
    sub = parser.add_subparsers(dest="verb", required=True)
    submit = sub.add_parser("submit", help="submit a job (sbatch)")
    add_request_options(submit)
    submit.add_argument("--wait", action="store_true", help="follow the job until it ends")
    submit.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    # sbatch's own command line, read by qm.sbatch (argparse would take its options as qm's).
    sbatch = sub.add_parser("sbatch", help="submit a batch script as sbatch does", prefix_chars="\0", add_help=False)
    sbatch.add_argument("argv", nargs=argparse.REMAINDER)
    estimate = sub.add_parser("estimate", help="when would a job start? (nothing is submitted)")
    add_request_options(estimate)
    add_edit_options(sub.add_parser("edit", help="change a waiting job (scontrol update)"))
    jobs = sub.add_parser("jobs", help="list jobs (squeue)")
    jobs.add_argument("--state", action="append")
    jobs.add_argument("--account")
    jobs.add_argument("--owner")
    jobs.add_argument("--limit", type=int, default=50)
    jobs.add_argument("--array", type=int, help="every task of this job array, one per line")
    show = sub.add_parser("show", help="show one job")
    show.add_argument("id", type=job_ref, help="a job id, or ARRAY_TASK (42_7)")
    for verb, help_text in VERBS.items():
        moves = sub.add_parser(verb, help=help_text)
        moves.add_argument("ids", type=job_ref, nargs="+", help="job ids; an array's id: all its tasks; 42_7: one")
    log = sub.add_parser("log", aliases=["logs"], help="a job's output")
    log.add_argument("id", type=job_ref, help="a job id, or ARRAY_TASK (42_7)")
    log.add_argument("--follow", "-f", action="store_true", help="print the log whole and what it adds until it ends")
    log.add_argument("--rank", type=_rank, help="one rank's log (QM_NODE_RANK), whole")
    log.add_argument(
        "--stream",
        choices=("stdout", "stderr", "combined"),
        help="stdout or stderr where the cluster keeps them apart, else combined; whole",
    )
    log.add_argument("--bytes", type=int, default=65536, help="how much of the end to read (at most 1048576)")
    log.set_defaults(verb="log")  # the same command, whichever name it was called by
    log.add_argument("--interval", type=float, default=2.0)
    priority = sub.add_parser("priority", help="a waiting job's priority factors (sprio)")
    priority.add_argument("id", type=job_ref, help="a job id, or ARRAY_TASK (42_7)")
    sub.add_parser("fairshare", help="the fair-share tree of your accounts (sshare)")
    usage = sub.add_parser("usage", help="GPU-hours over a period (sreport): your own, your accounts' for coordinators")
    usage.add_argument("--start", help="first day, YYYY-MM-DD (default: 30 days before --end)")
    usage.add_argument("--end", help="last day, YYYY-MM-DD (default: today)")
    usage.add_argument("--by", choices=["account", "user", "gpu_model", "qos"], default="account")
    advise = sub.add_parser("advise", help="right-sizing advice from your ended jobs of a shape")
    advise.add_argument("id", type=job_ref, nargs="?", help="a job id: advice for its shape")
    advise.add_argument("--gpus", "-G", type=int, help="GPUs in all, for a shape described")
    advise.add_argument("--walltime", "-t", type=walltime_arg, help="2h, 90m, 1:30:00 or seconds")
    advise.add_argument("--gpu-model", help="a GPU model, if you name one")
    advise.add_argument("--cluster", help="a cluster's name (default: any)")
    wait = sub.add_parser("wait", help="follow a job until it ends")
    wait.add_argument("id", type=job_ref, help="a job id, or ARRAY_TASK (42_7)")
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
    cli = Cli(api or Api(args.url, args.token, retry=Retry(tries=args.tries), err=err, sleep=sleep), out, err, sleep)
    try:
        return int(getattr(cli, "verb" if args.verb in VERBS else args.verb)(args))
    except ApiError as exc:
        print(f"qm: {exc.describe()}", file=err)
        return 2 if args.verb in ("submit", "estimate", "sbatch") and _refused_options(exc) else 1
    except BrokenPipeError:
        # The reader went away (``qm jobs | head``): stop quietly, as Unix tools do, and
        # keep the interpreter's final flush of stdout from complaining too.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool ended by a closed pipe
    except (urllib.error.URLError, OSError) as exc:
        print(f"qm: cannot reach {args.url}: {exc}", file=err)
        return 1
