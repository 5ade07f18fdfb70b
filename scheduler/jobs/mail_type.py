"""sbatch's ``--mail-type``: which messages one job makes, over its owner's choice of
events (``notifications.wanted`` applies it; where they go stays the owner's). Pure: the
standard library only.

A job's ``mail_events`` holds the types as given, in Slurm's order, or ``None`` when the
job chose nothing (its owner's notification settings decide), ``[]`` for ``NONE``.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The types the portal applies, in Slurm's order (what each makes is
#: ``notifications.wanted``'s; a test checks each has its entry there).
APPLIED: tuple[str, ...] = ("BEGIN", "END", "FAIL", "REQUEUE", "ALL", "TIME_LIMIT", "ARRAY_TASKS")

_NO_WARNING = (
    "not supported: the portal sends no warning before a job's time limit (TIME_LIMIT tells when it is "
    "reached, as the job ends TIMEOUT)"
)

#: Slurm's types that have no message here, each with why: refused by name, never dropped.
REFUSED: dict[str, str] = {
    "TIME_LIMIT_50": _NO_WARNING,
    "TIME_LIMIT_80": _NO_WARNING,
    "TIME_LIMIT_90": _NO_WARNING,
    "INVALID_DEPEND": (
        "not supported: a job whose dependency can never be met waits, with the reason DependencyNeverSatisfied "
        "on its page ('qm show ID'), and no message is sent"
    ),
    "STAGE_OUT": "not supported: there are no burst buffers here, so nothing is staged out",
}

#: A job's own choice to send nothing about it (Slurm ignores every other type given with it).
NONE = "NONE"

#: The types as text (``BEGIN,END``), for the API's field and the pages.
SEPARATOR = ","


def parse_mail_type(value: str | Sequence[str]) -> list[str]:
    """``value`` (``"END,FAIL"`` as sbatch takes it, or a list of types) as a job's
    ``mail_events``: the types in Slurm's order, each once, upper case (sbatch takes any
    case); ``[]`` when ``NONE`` is among them, as Slurm ignores the others then. Raises
    ``ValueError`` naming every value that is not applied here, with why."""
    words = value.split(SEPARATOR) if isinstance(value, str) else list(value)
    given = [word.strip().upper() for word in words]
    problems = ["a type between commas is empty"] if len(given) > 1 and not all(given) else []
    for word in dict.fromkeys(w for w in given if w):
        if word in REFUSED:
            problems.append(f"{word} is {REFUSED[word]}")
        elif word not in APPLIED and word != NONE:
            problems.append(f"{word!r} is not a mail type: give {', '.join((NONE, *APPLIED))}, comma-separated")
    if problems:
        raise ValueError("; ".join(problems))
    if NONE in given:
        return []
    if not any(given):
        raise ValueError(f"give one or more of {', '.join((NONE, *APPLIED))}, comma-separated")
    return [kind for kind in APPLIED if kind in given]


def mail_type_text(mail_events: Sequence[str] | None) -> str:
    """A job's ``mail_events`` as sbatch's value (``END,FAIL``; ``NONE``); empty for
    ``None`` (the owner's settings decide)."""
    if mail_events is None:
        return ""
    return SEPARATOR.join(mail_events) or NONE
