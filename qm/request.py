"""What ``qm submit``, ``qm estimate`` and ``qm edit`` say about a job: their options and
the API body they make, in the shapes a Slurm user types (``2h``, ``afterok:12``,
``rack=r1``)."""

from __future__ import annotations

import argparse
import os
import re
import shlex
from typing import Any

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_CLOCK = re.compile(r"^(?:(?P<d>\d+)-)?(?P<h>\d+):(?P<m>\d{1,2})(?::(?P<s>\d{1,2}))?$")


def parse_walltime(text: str) -> int:
    """``3600``, ``90m``, ``2h``, ``1d``, ``h:mm[:ss]`` or Slurm's ``d-hh:mm:ss`` -> seconds."""
    text = text.strip().lower()
    if text[-1:] in _UNITS and text[:-1].isdigit():
        return int(text[:-1]) * _UNITS[text[-1]]
    if clock := _CLOCK.match(text):
        return int(clock["d"] or 0) * 86400 + int(clock["h"]) * 3600 + int(clock["m"]) * 60 + int(clock["s"] or 0)
    if text.isascii() and text.isdigit():
        return int(text)
    raise ValueError(text)


def walltime_arg(text: str) -> int:
    """An argparse type: a walltime as :func:`parse_walltime` reads it, or a usage error."""
    try:
        return parse_walltime(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad walltime {text!r}: use 2h, 90m, 1:30:00 or seconds") from None


def _pair(what: str, example: str) -> Any:
    def parse(text: str) -> tuple[str, str]:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"bad {what} {text!r}: use {example}")
        return key, value

    return parse


def _dependencies(text: str) -> list[dict[str, Any]]:
    """``afterok:12,afterany:13`` (sbatch's --dependency, ``:`` between several ids too)."""
    found: list[dict[str, Any]] = []
    for item in filter(None, re.split(r"[,\s]+", text.strip())):
        kind, *ids = item.split(":")
        if not ids or not all(i.isascii() and i.isdigit() for i in ids):
            raise argparse.ArgumentTypeError(f"bad dependency {item!r}: use afterok:12 (or afterok:12:13)")
        found += [{"type": kind, "job": int(i)} for i in ids]
    return found


def _job_file(text: str) -> tuple[str, str]:
    """``PATH`` or ``NAME=PATH``: the file's name in the job's directory and its text."""
    name, sep, path = text.partition("=")
    if not sep:
        name, path = os.path.basename(text), text
    try:
        with open(path, encoding="utf-8") as handle:
            return name, handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"cannot bring {path}: {exc}") from None


class _AsSbatch(argparse.Action):
    """A Slurm spelling, sent as written in the body's ``sbatch_options``: the portal
    reads it as sbatch would (``-t 60`` is 60 minutes), or refuses it by name."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        given = [str(option_string)] + ([values] if isinstance(values, str) else [])
        namespace.sbatch_options = [*(getattr(namespace, "sbatch_options", None) or []), *given]


#: sbatch's spellings ``qm submit`` and ``qm estimate`` take as sbatch does, beside
#: qm's own options: each with its help. Options qm already spelt the same way
#: (``-A``, ``-q``, ``-N``, ``-a``, ``-d``, ``-D``, ``--nice``, ``--reservation``) keep
#: theirs; qm's ``-e`` stays ``--env`` and its ``-G/--gpus`` GPUs per node.
SLURM_SPELLINGS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("-J", "--job-name"), "the job's name (sbatch's)"),
    (("-t", "--time"), "time limit as sbatch takes it: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]; or 2h, 90m"),
    (("--gres",), "gpu[:type][:N], GPUs per node"),
    (("--gpus-per-node",), "[type:]N"),
    (("--mem",), "memory per node with a unit: 16G, 512M (MiB without one)"),
    (("-c", "--cpus-per-task"), "CPUs per node (jobs run one task per node)"),
    (("-C", "--constraint"), "node labels every node must carry: 'rack=r1&net=ib'"),
    (("-n", "--ntasks"), "tasks in all: one per node"),
    (("--ntasks-per-node",), "1: jobs run one task per node"),
    (("-p", "--partition"), "refused by the portal, which says what to use instead"),
    (("-o", "--output"), "a file its output is also written to (%%j id, %%x name, %%A_%%a task); 'qm log ID' too"),
    (("--error",), "a file its stderr is written to instead (sbatch's -e; qm's -e is --env)"),
    (("--mail-type",), "this job's messages: BEGIN,END,FAIL,REQUEUE,TIME_LIMIT,ALL,ARRAY_TASKS or NONE"),
    (("--mail-user",), "only your own address: messages go to the e-mail on your profile"),
)


def _add_slurm_spellings(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(sbatch_options=[])
    for names, help_text in SLURM_SPELLINGS:
        dest = "slurm_" + names[-1].lstrip("-").replace("-", "_")  # apart from qm's own options
        parser.add_argument(*names, action=_AsSbatch, dest=dest, metavar="VALUE", help=help_text)
    parser.add_argument(
        "-H", "--hold", action=_AsSbatch, nargs=0, dest="slurm_hold", help="submit it held, until 'qm release ID'"
    )


def _add_shared_options(parser: argparse.ArgumentParser, *, walltime: tuple[str, ...]) -> None:
    """Options a job's request and an edit have alike (``walltime``: the spellings of
    qm's own walltime option)."""
    parser.add_argument("--name", help="job name (default: the script's -J, else the command's first word)")
    parser.add_argument("--qos", "-q")
    parser.add_argument(*walltime, type=walltime_arg, dest="walltime", help="2h, 90m, 1:30:00 or seconds")
    parser.add_argument("--gpu-model", help="e.g. H100-80GB, or A100-40GB/3g.20gb for MIG slices")
    parser.add_argument("--nice", type=int, help="lower the job's priority by this much")
    parser.add_argument("--dependency", "-d", type=_dependencies, help="afterok:12,afterany:13 (sbatch's --dependency)")
    parser.add_argument(
        "--node-label",
        type=_pair("node label", "rack=r1"),
        action="append",
        dest="node_labels",
        help="label=value every node must carry (repeatable; Slurm's --constraint)",
    )


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """The options of a submission (``qm submit``, ``qm estimate``): qm's own and
    sbatch's spellings (:data:`SLURM_SPELLINGS`)."""
    _add_shared_options(parser, walltime=("--walltime",))
    _add_slurm_spellings(parser)
    parser.add_argument("--account", "-A", help="default: your default account (GET /api/v1/me/)")
    parser.add_argument(
        "--array", "-a", help="a job array, one job per index (sbatch --array): 0-999, 1,3,5-7, 0-15:4, 0-999%%50"
    )
    parser.add_argument("--nodes", "-N", type=int)
    parser.add_argument("--gpus", "-G", type=int, dest="gpus_per_node", help="GPUs per node")
    parser.add_argument("--gpu-share", type=float, help="a fraction of one shared GPU (0 < share < 1)")
    parser.add_argument("--gpu-share-memory", type=int, dest="gpu_memory_mib_share", help="MiB of the shared GPU")
    parser.add_argument("--min-gpu-memory", type=int, dest="min_gpu_memory_mib", help="MiB")
    parser.add_argument("--min-compute-capability")
    parser.add_argument(
        "--cpus", dest="cpus_per_node", help="CPUs per node: 8, or part of one (0.5, 500m) on Kubernetes"
    )
    parser.add_argument("--memory", type=int, dest="memory_mib_per_node", help="MiB per node")
    parser.add_argument("--image")
    parser.add_argument("--reservation", help="run in this reservation (sbatch --reservation)")
    parser.add_argument("--env", "-e", type=_pair("--env", "KEY=value"), action="append", default=[], help="KEY=value")
    parser.add_argument("--script", type=argparse.FileType("r"), help="a script file to run instead of a command")
    parser.add_argument("--workdir", "--chdir", "-D", help="where it starts on the cluster (sbatch --chdir)")
    parser.add_argument(
        "--file",
        "-f",
        type=_job_file,
        action="append",
        dest="files",
        default=[],
        help="a text file to bring, put in its working directory (repeatable; NAME=PATH to rename)",
    )
    parser.add_argument(
        "--wrap",
        help="a shell command line run as written, as sbatch --wrap: 'cd data && python train.py $QM_NODE_RANK'",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command and its arguments, each quoted")


_JOB_REF = re.compile(r"^(\d+)(?:_(\d+))?$")


def job_ref(text: str) -> tuple[int, int | None]:
    """A job as ``squeue`` names it: ``42`` (a job, or a whole array), ``42_7`` (task 7 of
    array 42) -> ``(42, None)``, ``(42, 7)``."""
    match = _JOB_REF.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (42) or an array task (42_7)")
    return int(match.group(1)), int(match.group(2)) if match.group(2) is not None else None


def add_edit_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``qm edit`` (what ``PATCH /api/v1/jobs/{id}/`` may change)."""
    parser.add_argument("id", type=job_ref, help="a job id, or ARRAY_TASK (42_7)")
    _add_shared_options(parser, walltime=("--walltime", "-t"))


#: Options sent as they are, under the API's name for them.
_PLAIN = (
    "account",
    "qos",
    "nodes",
    "gpus_per_node",
    "gpu_model",
    "gpu_share",
    "gpu_memory_mib_share",
    "min_gpu_memory_mib",
    "min_compute_capability",
    "cpus_per_node",
    "memory_mib_per_node",
    "image",
    "nice",
    "reservation",
)


def _shared_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {name: getattr(args, name) for name in _PLAIN if getattr(args, name, None) is not None}
    if args.walltime is not None:
        body["walltime_seconds"] = args.walltime
    if args.dependency is not None:
        body["dependencies"] = args.dependency
    if args.node_labels:
        body["node_labels"] = dict(args.node_labels)
    if args.name:
        body["name"] = args.name
    return body


def request_body(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /api/v1/jobs/`` body of a submission's options."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    body = _shared_body(args)
    if args.env:
        body["env"] = dict(args.env)
    if args.workdir:
        body["workdir"] = args.workdir
    if args.array:
        body["array"] = args.array
    if args.files:
        body["files"] = dict(args.files)
    if args.script is not None:
        body["script"] = args.script.read()
    options = list(args.sbatch_options)
    if args.wrap is not None:
        options += ["--wrap", args.wrap]  # as sbatch --wrap: the portal names it "wrap" unless told otherwise
    elif command:  # words, as a shell would have split them: quoted again, run as they are
        body["command"] = " ".join(shlex.quote(c) for c in command)
    if options:
        body["sbatch_options"] = options
    # No name: the portal's default is the script's -J, else the command's program.
    return body


def edit_body(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PATCH /api/v1/jobs/{id}/`` body of ``qm edit``'s options."""
    return _shared_body(args)
