"""An app's form fields: what staff may define (:func:`definition_problems`) and what a
launch may give them (:func:`clean_values`).

The one home of the rules of ``InteractiveApp.form_fields``, asked by the staff's page,
the staff's API and every launch, so that an app that saved is an app that launches:

- a field is ``{"name", "label", "kind", "default", "choices", "help"}``; its ``name``
  is a placeholder of the command (``[a-z_][a-z0-9_]*``) and none of the launch form's
  own fields (:data:`RESERVED`);
- ``kind`` is ``text`` (one line), ``integer``, ``choice`` (one of ``choices``) or
  ``path`` (an absolute path of the user's own, under ``JOB_WORKDIR_ROOTS``);
- the command names no ``{placeholder}`` but ``{port}``, ``{base_url}`` and the fields.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from scheduler.backends.user_paths import inside
from scheduler.jobs.identity import cluster_username
from scheduler.jobs.workdir import workdir_bounds
from scheduler.sessions.script import UnknownPlaceholder, fill_command

#: The kinds of field an app may ask for.
KINDS = ("text", "integer", "choice", "path")
#: Names a field may not take: the command's own placeholders and the launch form's fields.
RESERVED = frozenset(
    {"port", "base_url", "app", "account", "qos", "gpus", "cpus", "memory_mib", "walltime", "walltime_seconds"}
)
#: The longest value a text or path field takes.
MAX_VALUE = 4096
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
_KEYS = frozenset({"name", "label", "kind", "default", "choices", "help", "required"})

#: Field name -> the problems found with it.
Problems = dict[str, list[str]]


def definition_problems(command: str, form_fields: object) -> Problems:
    """What is wrong with an app's ``form_fields`` and ``command`` (``{}``: nothing), by
    the app's field it concerns (``form_fields`` or ``command``)."""
    problems: Problems = {}
    fields_said = _fields_problems(form_fields)
    if fields_said:
        problems["form_fields"] = fields_said
        return problems
    assert isinstance(form_fields, list)
    names = {str(field["name"]): "" for field in form_fields}
    try:
        fill_command(command, names, port="1", base_url="/")
    except UnknownPlaceholder as exc:
        problems["command"] = [f"{str(exc)[0].upper()}{str(exc)[1:]} (known: {_known(names)})."]
    return problems


def _known(names: Mapping[str, str]) -> str:
    return ", ".join("{" + name + "}" for name in ("port", "base_url", *names))


def _fields_problems(form_fields: object) -> list[str]:
    if not isinstance(form_fields, list):
        return ["Give a list of fields."]
    found: list[str] = []
    seen: set[str] = set()
    for number, field in enumerate(form_fields, 1):
        if not isinstance(field, dict):
            found.append(f"Field {number}: give an object with a name, a label and a kind.")
            continue
        name = field.get("name")
        where = f"Field {number} ({name})" if isinstance(name, str) and name else f"Field {number}"
        found.extend(f"{where}: {problem}" for problem in _field_problems(field, seen))
        if isinstance(name, str):
            seen.add(name)
    return found


def _field_problems(field: dict[str, Any], seen: set[str]) -> list[str]:
    found = []
    name, kind = field.get("name"), field.get("kind", "text")
    if unknown := sorted(set(field) - _KEYS):
        found.append(f"unknown keys {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})")
    if not isinstance(name, str) or not _NAME.match(name):
        found.append("name must be lower-case letters, digits and _, starting with a letter or _")
    elif name in RESERVED:
        found.append(f"{name!r} is taken by the launch form (reserved: {', '.join(sorted(RESERVED))})")
    elif name in seen:
        found.append(f"{name!r} is named twice")
    if kind not in KINDS:
        found.append(f"kind must be one of {', '.join(KINDS)}")
    choices = field.get("choices")
    texts = isinstance(choices, list) and bool(choices) and all(isinstance(c, str) for c in choices)
    if kind == "choice" and not texts:
        found.append("a choice field needs choices: a list of texts")
    if not isinstance(field.get("label", ""), str) or not isinstance(field.get("help", ""), str):
        found.append("label and help are texts")
    default = field.get("default")
    if kind in KINDS and default not in ("", None) and (problem := _value_problem(field, default, None)):
        found.append(f"the default: {problem}")
    return found


def clean_values(
    form_fields: Sequence[Mapping[str, Any]], given: Mapping[str, Any], owner: Any
) -> tuple[dict[str, str], Problems]:
    """The values a launch gives the app's fields (an omitted or empty one: its default),
    as text for the command, and the problems by field name (``{}``: none). A name that
    is no field of the app is a problem of its own."""
    values: dict[str, str] = {}
    problems: Problems = {}
    names = {str(field["name"]) for field in form_fields}
    for name in sorted(set(given) - names):
        problems[str(name)] = [f"The app has no field {name!r}."]
    for field in form_fields:
        name = str(field["name"])
        raw = given.get(name)
        if raw in (None, ""):
            raw = field.get("default")
        if raw in (None, ""):
            if field.get("required", True):
                problems[name] = ["This field is required."]
            else:
                values[name] = ""
            continue
        if problem := _value_problem(field, raw, owner):
            problems[name] = [problem]
        else:
            values[name] = str(raw).strip()
    return values, problems


def _value_problem(field: Mapping[str, Any], raw: object, owner: Any) -> str:
    """Why ``raw`` is no value of ``field`` ('' when it is). ``owner``: whose path it is
    (None: only the path's shape is checked, as for a default)."""
    kind = field.get("kind", "text")
    checks: dict[str, Callable[[str], str]] = {
        "text": _text_problem,
        "integer": _integer_problem,
        "choice": lambda text: "" if text in (field.get("choices") or []) else _choice_words(field),
        "path": lambda text: _path_problem(text, owner),
    }
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return "Give a text."
    text = str(raw).strip()
    if len(text) > MAX_VALUE:
        return f"At most {MAX_VALUE} characters."
    if any(ord(c) < 32 and c != "\t" for c in text):
        return "One line of text, without control characters."
    return checks[kind](text)


def _text_problem(text: str) -> str:
    return ""


def _integer_problem(text: str) -> str:
    return "" if re.fullmatch(r"-?\d{1,18}", text) else "Give a whole number."


def _choice_words(field: Mapping[str, Any]) -> str:
    return f"Choose one of {', '.join(field.get('choices') or [])}."


def _path_problem(path: str, owner: Any) -> str:
    """A directory of the owner's: absolute, plain, under their roots, outside the
    portal's own files (the rules of a job's working directory)."""
    if not path.startswith("/") or posixpath.normpath(path) != path:
        return "Give an absolute path without '..', '.' or '//' parts, for example /home/alice/runs."
    if owner is None:
        return ""
    bounds = workdir_bounds(cluster_username(owner))
    for tree in bounds.refused:
        own = str(Path(tree).resolve())
        if inside(path, own) or inside(own, path):
            return f"{path} holds or lies in the portal's own files."
    if not any(inside(path, root) for root in bounds.roots):
        return f"Give a path under {', '.join(bounds.roots) or 'none of the roots (the site allows none)'}."
    return ""
