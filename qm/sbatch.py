"""``qm sbatch [OPTIONS] SCRIPT [ARGS...]``: sbatch's command line, split as sbatch splits
it, into the API's body. The options are not read here: they go to the portal as written
(``sbatch_options``), which reads them and the script's ``#SBATCH`` lines with one parser
(``scheduler.jobs.sbatch`` on the server; qm imports nothing of the portal).

What qm must know of them is only where they end: an option takes the next word as its
value unless it is a flag (:data:`FLAGS`, the server's ``flag_names()``, which a test
holds equal), or its value is attached (``--time=60``, ``-t60``). The first other word is
the script; the words after it are its arguments. ``-W``/``--wait`` and ``--parsable``
are sbatch's ways of answering, which qm does itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: sbatch's options that never take the next word (flags, and those whose value comes
#: only after ``=``), as the portal reads them (``scheduler.jobs.sbatch.flag_names``).
FLAGS = frozenset({"-H", "--hold", "--nice", "--exclusive", "--requeue", "--no-requeue"})
#: sbatch's options about how it answers, which qm handles itself.
WAIT, PARSABLE, HELP = frozenset({"-W", "--wait"}), frozenset({"--parsable"}), frozenset({"-h", "--help"})

SBATCH_USAGE = """usage: qm sbatch [OPTIONS] SCRIPT [ARGS...]
       qm sbatch [OPTIONS] --wrap 'COMMAND LINE'

Submits SCRIPT as sbatch does: its #SBATCH lines (up to its first command) and OPTIONS,
OPTIONS winning, read by the portal: -J -A -q -t -N --gres --gpus --gpus-per-node -c --mem
-a -d --nice --reservation -C -D -o -e -H --wrap. An option the portal does not apply is
refused by name (exit 2). ARGS reach the script as $1 $2 ...
  -W, --wait     follow the job until it ends (exit 3 if it did not complete)
  --parsable     print only the job id"""


class SbatchUsage(ValueError):
    """The command line cannot be a submission: what is wrong, in words."""


@dataclass(frozen=True, slots=True)
class SbatchCall:
    """One ``qm sbatch``: the API's body, and how to answer."""

    body: dict[str, Any]
    wait: bool = False
    parsable: bool = False
    help: bool = False


def split_words(words: list[str]) -> tuple[list[str], list[str]]:
    """``OPTIONS SCRIPT ARGS`` -> (the options' words, ``[SCRIPT, *ARGS]``)."""
    at = 0
    while at < len(words) and words[at].startswith("-") and words[at] != "-":
        word = words[at]
        at += 1
        attached = "=" in word if word.startswith("--") else len(word) > 2
        if not attached and word not in FLAGS | WAIT | PARSABLE | HELP and at < len(words):
            at += 1  # its value
    return words[:at], words[at:]


def sbatch_body(words: list[str]) -> SbatchCall:
    """The body of ``qm sbatch`` ``words``: the script's text, its arguments and the
    options as written. Raises :class:`SbatchUsage` when there is no script (nor
    ``--wrap``) or the script cannot be read."""
    options, rest = split_words(list(words))
    if HELP & set(options):
        return SbatchCall({}, help=True)
    sent = [word for word in options if word not in WAIT | PARSABLE]
    body: dict[str, Any] = {"sbatch_options": sent} if sent else {}
    call = {"wait": bool(WAIT & set(options)), "parsable": bool(PARSABLE & set(options))}
    if not rest:
        if not any(word == "--wrap" or word.startswith("--wrap=") for word in sent):
            raise SbatchUsage("give a script to run (or --wrap 'command line')")
        return SbatchCall(body, **call)
    path, arguments = rest[0], rest[1:]
    try:
        with open(path, encoding="utf-8") as handle:
            body["script"] = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SbatchUsage(f"cannot read the script {path}: {exc}") from None
    body["script_name"] = os.path.basename(path)  # the job's name unless -J gives one, as sbatch names it
    if arguments:
        body["script_args"] = arguments
    return SbatchCall(body, **call)
