"""What the fake kubelet makes of a container's ``bash -c`` command.

It runs nothing. A command is split into statements at ``;``, ``&&``, ``||`` and
newlines, and each statement is understood as:

* ``sleep N``: the container runs N more seconds (fractions allowed);
* ``exit N``: the container ends now with status N;
* ``true`` or ``:``: status 0; ``false``: status 1;
* ``echo WORDS``: WORDS (quotes removed) go to the pod's log when that point is reached;
  ``>&2`` is dropped and a redirect to a file (``> f``, ``>> f``) drops the line, since
  the fake has no file system;
* blank lines and ``#`` comments (a script's shebang): nothing.

Anything else sets status 127 and logs ``fake kubelet: cannot run: <statement>``. The
container's exit code is the status of the last statement, as in bash without ``-e``.
A container asked to stop (pod deleted, deadline) ends at once with 143 (SIGTERM).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

_SPLIT = re.compile(r";|&&|\|\||\n")


@dataclass
class Program:
    #: (seconds after start, line) for every echo.
    output: list[tuple[float, str]] = field(default_factory=list)
    duration: float = 0.0
    exit_code: int = 0

    def log_at(self, elapsed: float) -> str:
        return "".join(f"{line}\n" for at, line in self.output if at <= elapsed)


def _echo(statement: str) -> str | None:
    text = statement[len("echo") :].strip()
    text = re.sub(r"\s*[12]?>&[12]\s*", " ", text).strip()
    if re.search(r"(^|\s)>>?\s*\S", text):
        return None
    try:
        return " ".join(shlex.split(text))
    except ValueError:
        return text


def interpret(command: str) -> Program:
    program = Program()
    for raw in _SPLIT.split(command):
        statement = raw.strip()
        if not statement or statement.startswith("#"):
            continue
        words = statement.split()
        if words[0] == "sleep" and len(words) == 2:
            try:
                program.duration += float(words[1])
                program.exit_code = 0
                continue
            except ValueError:
                pass
        if words[0] == "exit" and len(words) <= 2:
            program.exit_code = int(words[1]) if len(words) == 2 and words[1].isdigit() else 0
            return program
        if statement in ("true", ":"):
            program.exit_code = 0
        elif statement == "false":
            program.exit_code = 1
        elif words[0] == "echo":
            line = _echo(statement)
            if line is not None:
                program.output.append((program.duration, line))
            program.exit_code = 0
        else:
            program.output.append((program.duration, f"fake kubelet: cannot run: {statement}"))
            program.exit_code = 127
    return program
