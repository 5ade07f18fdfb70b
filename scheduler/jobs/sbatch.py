"""sbatch's options, on a command line or in a script's ``#SBATCH`` lines, as a job
request's fields: one parser, which the API (and so ``qm`` and the submit form, which
send the options raw) applies. Pure: the standard library only.

Read as sbatch reads them:

1. A script's directives are its lines that begin ``#SBATCH`` (at the very start of the
   line), up to its first line that is neither blank nor a comment: sbatch stops there,
   so ``#SBATCH`` lines after the first command are comments (:func:`script_directives`).
2. Options come as ``--time=60``, ``--time 60``, ``-t 60`` or ``-t60``; a long option may
   be shortened to a unique prefix (``--job=x``), as getopt lets sbatch; an option whose
   value is optional (``--nice``) takes one only after ``=``.
3. Command-line options win over the script's directives (:func:`merge`); within one
   place, the last of an option wins. The API puts its explicit JSON fields above both.

Every option that maps to a field is applied (:data:`OPTIONS`); every other one is
refused by name, with what to do instead (:data:`REFUSED`, else "not an option the portal
applies"): nothing a Slurm user writes is dropped silently. Values are turned into the
API's shapes (``--time=1-00`` -> ``walltime_seconds`` 86400, ``--mem=16G`` ->
``memory_mib_per_node`` 16384); their limits are then the API's fields' own
(``-o out-%j.txt`` is ``output_path``, its patterns checked by
``scheduler.jobs.output_paths``).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: How an option takes its value: always (the next word when not after ``=``), only
#: after ``=`` (getopt's optional argument), or never (a flag).
Takes = Literal["value", "optional", "none"]


class SbatchError(ValueError):
    """The options' problems, each naming the option as written: those of the script's
    directives (with their line) and those of the command line's options, apart, as
    the two come from different places."""

    def __init__(self, script: Sequence[str], command_line: Sequence[str]) -> None:
        super().__init__("; ".join([*script, *command_line]))
        self.script = list(script)
        self.command_line = list(command_line)


@dataclass(frozen=True, slots=True)
class Given:
    """One option as given: its :class:`Option`, its value (``None``: none given), and
    where, in words (``--time=60``, ``-t 60 (#SBATCH line 3)``)."""

    option: Option
    value: str | None
    where: str
    in_script: bool = False


@dataclass(frozen=True, slots=True)
class Option:
    """An option that maps to request fields: its spellings (the first long one is its
    key; options sharing a ``group`` replace one another, as ``--gres`` and ``--gpus``
    both say how many GPUs), how it takes a value, and what it makes of the value:
    field -> value, or raises ``ValueError`` with the reason."""

    names: tuple[str, ...]
    takes: Takes
    fields: Callable[[str | None], dict[str, Any]]
    group: str = ""

    @property
    def key(self) -> str:
        return self.group or next(n for n in self.names if n.startswith("--"))


# --- values ---------------------------------------------------------------------------

_TIME_UNIT = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str) -> int:
    """``--time`` in seconds, in every format sbatch takes: ``minutes``,
    ``minutes:seconds``, ``hours:minutes:seconds``, ``days-hours``,
    ``days-hours:minutes``, ``days-hours:minutes:seconds``; and, as ``qm`` has always
    taken them, ``90m``, ``2h``, ``1d``, ``30s``. No limit (``0``, ``UNLIMITED``) is
    refused: every job here has one. Raises ``ValueError``."""
    text = text.strip().lower()
    if unit := _TIME_UNIT.match(text):
        seconds = int(unit[1]) * _SECONDS[unit[2]]
    else:
        days, dash, clock = text.rpartition("-") if "-" in text else ("0", "", text)
        parts = clock.split(":")
        if not _all_digits([days, *parts]) or len(parts) > 3:
            raise ValueError(
                f"{text!r} is not a time: give minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (or 2h, 90m)"
            )
        numbers = [int(p) for p in parts]
        if dash:  # days-hours[:minutes[:seconds]]
            hours, minutes, secs = [*numbers, 0, 0][:3]
        else:  # minutes, minutes:seconds, hours:minutes:seconds
            hours, minutes, secs = {1: [0, *numbers, 0], 2: [0, *numbers], 3: numbers}[len(numbers)]
        seconds = int(days) * 86400 + hours * 3600 + minutes * 60 + secs
    if seconds <= 0:
        raise ValueError("every job here has a time limit: give one above 0")
    return seconds


def _all_digits(parts: Iterable[str]) -> bool:
    return all(p.isascii() and p.isdigit() for p in parts)


_MEMORY = re.compile(r"^(\d+)([kmgt]?)b?$")
_MIB_PER = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def parse_memory_mib(text: str) -> int:
    """``--mem`` in MiB: a number with an optional unit K, M, G or T (MiB without one),
    as sbatch takes it; kibibytes round up to whole MiB. ``0`` (in Slurm: all of a
    node's memory) is refused: ask for an amount. Raises ``ValueError``."""
    found = _MEMORY.match(text.strip().lower())
    if found is None:
        raise ValueError(f"{text!r} is not an amount of memory: give 16G, 16384M, 512K or MiB")
    mib = math.ceil(int(found[1]) * _MIB_PER[found[2] or "m"])
    if mib <= 0:
        raise ValueError("0 asks Slurm for all of a node's memory; here ask for an amount (16G)")
    return mib


def _count(text: str, what: str) -> int:
    if not _all_digits([text]):
        raise ValueError(f"{text!r} is not a number of {what}")
    return int(text)


def _nodes(text: str) -> dict[str, Any]:
    """``-N 2``, or a range whose ends agree (``2-2``): jobs here run on an exact count."""
    low, dash, high = text.partition("-")
    count = _count(low, "nodes")
    if dash and _count(high, "nodes") != count:
        raise ValueError("a range of node counts is not supported: give one count (-N 2)")
    return {"nodes": count}


def _gpu_count(text: str) -> tuple[str, int]:
    """``[type:]N`` -> (type, N), the shape of ``--gpus`` and ``--gpus-per-node``."""
    model, _, count = text.rpartition(":")
    return model, _count(count, "GPUs")


def _gpus_per_node(text: str) -> dict[str, Any]:
    model, count = _gpu_count(text)
    return {"gpus_per_node": count, **({"gpu_model": model} if model else {})}


def _gpus_total(text: str) -> dict[str, Any]:
    """``--gpus`` counts the job's GPUs; which share per node is known once the node
    count is (see :func:`fields_of`)."""
    model, count = _gpu_count(text)
    return {_TOTAL_GPUS: count, **({"gpu_model": model} if model else {})}


#: A request's GPUs in all, before they are shared out over its nodes.
_TOTAL_GPUS = "gpus in all"


def _gres(text: str) -> dict[str, Any]:
    """``--gres=gpu[:type][:N]``; a GRES other than GPUs is refused."""
    fields: dict[str, Any] = {}
    for item in text.split(","):
        name, *rest = item.strip().split(":")
        if name.removeprefix("gres/") != "gpu":
            raise ValueError(f"only GPUs are a GRES here (gpu[:type]:N), not {name!r}")
        if len(rest) > 2 or (len(rest) == 2 and not rest[0]):
            raise ValueError(f"{item!r} is not gpu[:type][:N]")
        if rest and not _all_digits([rest[-1]]) and len(rest) == 1:
            rest = [rest[0], "1"]  # gpu:a100 is one GPU of that type
        fields = _gpus_per_node(":".join(rest) if rest else "1")
    return fields


def _tasks_per_node(text: str) -> dict[str, Any]:
    if _count(text, "tasks") != 1:
        raise ValueError("jobs here start one task per node: ask for its CPUs with --cpus-per-task")
    return {}


def _dependencies(text: str) -> dict[str, Any]:
    """``afterok:12:13,afterany:14``; any-of (``?``), ``singleton`` and delays (``+10``)
    are refused. The types are the API's to check."""
    if "?" in text:
        raise ValueError("any-of dependencies ('?') are not supported: every one listed must hold (',')")
    found: list[dict[str, Any]] = []
    for item in filter(None, text.split(",")):
        kind, *ids = item.split(":")
        if not ids or not _all_digits(ids):
            raise ValueError(
                f"{item!r} is not type:job_id[:job_id...] (afterok:12); singleton and +delay are not supported"
            )
        found += [{"type": kind, "job": int(job)} for job in ids]
    return {"dependencies": found}


_LABEL_SPLIT = re.compile(r"[&,]")


def _constraint(text: str) -> dict[str, Any]:
    """Node labels, ``label=value`` joined by ``&`` (or ``,``); Slurm's alternatives,
    counts and bare feature names are refused, as labels here have values."""
    labels: dict[str, str] = {}
    for item in _LABEL_SPLIT.split(text):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key or not value or re.search(r"[|*\[\]()]", item):
            raise ValueError(
                f"{item!r}: node labels here are label=value, all required (--constraint='rack=r1&net=ib')"
            )
        labels[key] = value
    return {"node_labels": labels}


def _nice(text: str | None) -> dict[str, Any]:
    """``--nice`` alone is sbatch's 100."""
    if text is None:
        return {"nice": 100}
    if not re.fullmatch(r"[-+]?\d+", text.strip()):
        raise ValueError(f"{text!r} is not a whole number")
    return {"nice": int(text)}


def _as(field: str) -> Callable[[str | None], dict[str, Any]]:
    """The value as it is, for a field the API checks itself."""
    return lambda text: {field: text}


def _check_ntasks(text: str | None) -> dict[str, Any]:
    return {_TASKS: _count(text or "", "tasks")}


#: ``--ntasks``, checked against the node count once that is known (see :func:`fields_of`).
_TASKS = "tasks in all"


#: Every option that maps to a field.
OPTIONS: tuple[Option, ...] = (
    Option(("-J", "--job-name"), "value", _as("name")),
    Option(("-A", "--account"), "value", _as("account")),
    Option(("-q", "--qos"), "value", _as("qos")),
    Option(("-t", "--time"), "value", lambda v: {"walltime_seconds": parse_time(v or "")}),
    Option(("-N", "--nodes"), "value", lambda v: _nodes(v or "")),
    Option(("--gres",), "value", lambda v: _gres(v or ""), group="gpus"),
    Option(("-G", "--gpus"), "value", lambda v: _gpus_total(v or ""), group="gpus"),
    Option(("--gpus-per-node",), "value", lambda v: _gpus_per_node(v or ""), group="gpus"),
    Option(("--gpus-per-task",), "value", lambda v: _gpus_per_node(v or ""), group="gpus"),
    Option(("-c", "--cpus-per-task"), "value", _as("cpus_per_node")),
    Option(("--ntasks-per-node",), "value", lambda v: _tasks_per_node(v or "")),
    Option(("-n", "--ntasks"), "value", _check_ntasks),
    Option(("--mem",), "value", lambda v: {"memory_mib_per_node": parse_memory_mib(v or "")}),
    Option(("-a", "--array"), "value", _as("array")),
    Option(("-d", "--dependency"), "value", lambda v: _dependencies(v or "")),
    Option(("--nice",), "optional", _nice),
    Option(("--reservation",), "value", _as("reservation")),
    Option(("-C", "--constraint"), "value", lambda v: _constraint(v or "")),
    Option(("-D", "--chdir"), "value", _as("workdir")),
    Option(("-o", "--output"), "value", _as("output_path")),
    Option(("-e", "--error"), "value", _as("error_path")),
    Option(("-H", "--hold"), "none", lambda _: {"hold": True}),
    Option(("--wrap",), "value", _as("command")),
    Option(("--mail-type",), "value", _as("mail_type")),
    Option(("--mail-user",), "value", _as("mail_user")),
)

_PLACEMENT = "the scheduler chooses the nodes: ask for hardware with --gres/--gpus and --constraint (node labels)"

#: sbatch options the portal does not apply, each with what to do instead.
REFUSED: dict[str, tuple[Takes, str]] = {
    "--partition": ("value", "there are no partitions here; " + _PLACEMENT),
    "-p": ("value", "there are no partitions here; " + _PLACEMENT),
    "--nodelist": ("value", _PLACEMENT),
    "-w": ("value", _PLACEMENT),
    "--exclude": ("value", _PLACEMENT),
    "-x": ("value", _PLACEMENT),
    "--exclusive": ("optional", "not supported: jobs share nodes; ask for the GPUs, CPUs and memory the job needs"),
    "--begin": ("value", "not supported: a deferred start; submit it when it should start, or --hold and release it"),
    "--mem-per-cpu": ("value", "give the memory per node with --mem (jobs here run one task per node)"),
    "--mem-per-gpu": ("value", "give the memory per node with --mem (jobs here run one task per node)"),
    "--export": ("value", "the job gets the portal's environment contract; set variables with the API's env"),
    "--ntasks-per-gpu": ("value", "jobs here start one task per node: use --gpus-per-node and --cpus-per-task"),
    "--requeue": ("none", "not supported: the scheduler requeues a job only after a node failure or preemption"),
    "--no-requeue": ("none", "not supported: the scheduler requeues a job only after a node failure or preemption"),
}

_BY_NAME: dict[str, Option] = {name: option for option in OPTIONS for name in option.names}
_LONG_NAMES: tuple[str, ...] = tuple(
    sorted({*(n for n in _BY_NAME if n.startswith("--")), *(n for n in REFUSED if n.startswith("--"))})
)


def flag_names() -> frozenset[str]:
    """The options that never take the next word as their value (flags, and those whose
    value comes only after ``=``): what a command line needs to find where its options
    end and the script begins (``qm sbatch``)."""
    applied = {name for option in OPTIONS if option.takes != "value" for name in option.names}
    return frozenset(applied | {name for name, (takes, _) in REFUSED.items() if takes != "value"})


# --- reading options ------------------------------------------------------------------


def _long_name(written: str) -> str:
    """A long option's full name: itself, or the one known name it is a prefix of."""
    if written in _BY_NAME or written in REFUSED:
        return written
    matches = [name for name in _LONG_NAMES if name.startswith(written)]
    return matches[0] if len(matches) == 1 else written


def _takes(name: str) -> Takes | None:
    if name in _BY_NAME:
        return _BY_NAME[name].takes
    return REFUSED[name][0] if name in REFUSED else None


def read_options(words: Sequence[str], place: str = "") -> tuple[list[Given], list[str]]:
    """sbatch's options in ``words`` (a command line's, or one ``#SBATCH`` line's) as
    :class:`Given` in order, and the problems, each naming the option as written and
    ``place`` (`` (line 3)``). A refused or unknown option is a problem; so is a word
    that is not an option."""
    given: list[Given] = []
    problems: list[str] = []
    at = 0
    while at < len(words):
        word = words[at]
        at += 1
        if word.startswith("--") and len(word) > 2:
            written, eq, attached = word.partition("=")
            name, value = _long_name(written), attached if eq else None
        elif word.startswith("-") and len(word) > 1 and not word.startswith("--"):
            name, value = word[:2], (word[2:] or None)
            eq = "=" if value is not None else ""
        else:
            problems.append(f"{word!r}{place} is not an option (options start with - or --)")
            continue
        takes = _takes(name)
        if takes is None and value is None and at < len(words) and not words[at].startswith("-"):
            takes = "value"  # an option we do not know: its value is most likely the next word
        if takes == "value" and value is None:
            if at >= len(words):
                problems.append(f"{word}{place} needs a value")
                continue
            value = words[at]
            word = f"{word} {value}"
            at += 1
        elif takes == "none" and eq:
            problems.append(f"{word}{place}: {name} takes no value")
            continue
        problem = _refusal(name, word, place)
        if problem:
            problems.append(problem)
            continue
        given.append(Given(_BY_NAME[name], value, f"{word}{place}", in_script=bool(place)))
    return given, problems


def _refusal(name: str, word: str, place: str) -> str:
    """Why ``name`` is not applied (empty when it is)."""
    if name in _BY_NAME:
        return ""
    if name in REFUSED:
        return f"{word}{place} is not supported: {REFUSED[name][1]}"
    return f"{word}{place} is not an sbatch option the portal applies; remove it (or say it with the API's fields)"


def script_directives(script: str) -> tuple[list[Given], list[str]]:
    """The options of ``script``'s ``#SBATCH`` lines, up to its first line that is
    neither blank nor a comment (as sbatch reads them), and their problems, each
    naming the directive and its line. Words are split as a shell would (quotes;
    ``#`` after a space starts a comment)."""
    given: list[Given] = []
    problems: list[str] = []
    for number, line in enumerate(script.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break  # the first command: sbatch reads no directive after it
        if not line.startswith("#SBATCH"):
            continue
        rest = line[len("#SBATCH") :]
        if rest and not rest[0].isspace():
            continue  # "#SBATCHX" is a comment to sbatch too
        place = f" (#SBATCH line {number})"
        try:
            words = shlex.split(rest, comments=True)
        except ValueError as exc:
            problems.append(f"#SBATCH line {number} cannot be read: {exc}")
            continue
        found, wrong = read_options(words, place)
        given += found
        problems += wrong
    return given, problems


def directive_block_end(script: str) -> int:
    """Where in ``script`` (a character offset) its first command line starts, the end
    of its directives; its length when it has no command."""
    offset = 0
    for line in script.splitlines(keepends=True):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return offset
        offset += len(line)
    return offset


def with_arguments(script: str, arguments: Sequence[str]) -> str:
    """``script`` run with ``arguments`` as ``$1 $2 ...`` (``sbatch script.sh ARGS``): a
    ``set --`` line put where its directives end, so they stay directives, in bash, the
    shell every backend runs a script with."""
    if not arguments:
        return script
    at = directive_block_end(script)
    head = script[:at] if not at or script[:at].endswith("\n") else script[:at] + "\n"
    return f"{head}set -- {shlex.join(arguments)}\n{script[at:]}"


# --- fields ---------------------------------------------------------------------------


def merge(script: Iterable[Given], command_line: Iterable[Given]) -> dict[str, Given]:
    """Each option's winning :class:`Given`: the command line's over the script's, the
    last over earlier ones in one place (sbatch's precedence)."""
    return {given.option.key: given for given in [*script, *command_line]}


@dataclass(frozen=True, slots=True)
class Request:
    """The fields the options make (the API's names and shapes) and, for each, the
    option it came from, so a value the API refuses can be named as it was written."""

    fields: dict[str, Any]
    sources: dict[str, Given]


def fields_of(options: Mapping[str, Given], *, given: Mapping[str, Any]) -> Request:
    """The request fields ``options`` (from :func:`merge`) make. ``given`` holds fields
    said elsewhere that they are read beside (the API's explicit ``nodes``, which
    shares out ``--gpus``). Raises :class:`SbatchError` naming each option whose value
    is wrong."""
    fields: dict[str, Any] = {}
    sources: dict[str, Given] = {}
    problems: list[tuple[Given, str]] = []
    for said in options.values():
        try:
            made = said.option.fields(said.value)
        except ValueError as exc:
            problems.append((said, f"{said.where}: {exc}"))
            continue
        fields.update(made)
        sources.update(dict.fromkeys(made, said))
    nodes = str(given.get("nodes", fields.get("nodes", 1)))
    problems += _share_out(fields, sources, int(nodes) if _all_digits([nodes]) and int(nodes) > 0 else 1)
    if problems:
        raise SbatchError(
            [text for said, text in problems if said.in_script], [text for said, text in problems if not said.in_script]
        )
    return Request(fields, sources)


def _share_out(fields: dict[str, Any], sources: dict[str, Given], nodes: int) -> list[tuple[Given, str]]:
    """Turn the counts said for the whole job into per-node ones (in place): ``--gpus``
    into GPUs per node, ``--ntasks`` checked as one per node. Returns the problems."""
    problems = []
    total = fields.pop(_TOTAL_GPUS, None)
    if total is not None:
        said = sources.pop(_TOTAL_GPUS)
        if total % nodes:
            problems.append((said, f"{said.where}: {total} GPUs do not share out evenly over {nodes} nodes"))
        else:
            fields["gpus_per_node"] = total // nodes
            sources["gpus_per_node"] = said
    tasks = fields.pop(_TASKS, None)
    if tasks is not None:
        said = sources.pop(_TASKS)
        if tasks != nodes:
            problems.append(
                (said, f"{said.where}: jobs here start one task per node ({nodes}); ask for CPUs with --cpus-per-task")
            )
    return problems
