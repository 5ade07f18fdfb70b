"""Kubernetes label selectors, as the API server parses them from ``?labelSelector=``.

Supports the whole string syntax: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``,
``k in (a,b)``, ``k notin (a,b)``, joined by commas (AND).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

Labels = Mapping[str, str]
Requirement = Callable[[Labels], bool]

_SET = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*")
_EQ = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s,()]*)\s*")
_EXISTS = re.compile(r"^\s*(!?)([^\s!=(),]+)\s*")


def _one(text: str) -> tuple[Requirement, str]:
    if match := _SET.match(text):
        key, op, raw = match.groups()
        values = {v.strip() for v in raw.split(",") if v.strip()}
        if op == "in":
            return (lambda labels: labels.get(key) in values), text[match.end() :]
        return (lambda labels: labels.get(key) not in values), text[match.end() :]
    if match := _EQ.match(text):
        key, op, value = match.groups()
        if op == "!=":
            return (lambda labels: labels.get(key) != value), text[match.end() :]
        return (lambda labels: labels.get(key) == value), text[match.end() :]
    if match := _EXISTS.match(text):
        negate, key = match.groups()
        if negate:
            return (lambda labels: key not in labels), text[match.end() :]
        return (lambda labels: key in labels), text[match.end() :]
    raise ValueError(f"unable to parse requirement: {text!r}")


def parse(selector: str) -> Requirement:
    """A predicate over labels; raises ValueError for a malformed selector."""
    requirements: list[Requirement] = []
    rest = selector.strip()
    while rest:
        requirement, rest = _one(rest)
        requirements.append(requirement)
        rest = rest.strip()
        if rest:
            if not rest.startswith(","):
                raise ValueError(f"unable to parse requirement: expected ',' at {rest!r}")
            rest = rest[1:]
    return lambda labels: all(r(labels) for r in requirements)
