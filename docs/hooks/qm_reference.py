"""An MkDocs hook: the ``qm`` reference written from ``qm``'s own argparse parser at build
time, so that the documented verbs and options are always the ones ``qm`` accepts.

A page asks for it with the line ``<!-- qm-reference -->``; :func:`reference` is the text
that replaces it (also used by ``tests/docs/test_qm_reference.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- qm-reference -->"


def _parser() -> argparse.ArgumentParser:
    """``qm``'s parser."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from qm.cli import build_parser

    return build_parser()


def _builders_environment() -> Any:
    """The environment the reference is written in: without this machine's own
    ``QM_URL``/``QM_TOKEN`` (the defaults would show them) and at a fixed width."""
    clean = {k: v for k, v in os.environ.items() if k not in ("QM_URL", "QM_TOKEN")}
    return mock.patch.dict(os.environ, {**clean, "COLUMNS": "100"}, clear=True)


def _verbs(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Each verb with its one-line help, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _notes(action: argparse.Action) -> list[str]:
    """What the table says beside the help: the default, required, repeatable."""
    notes = []
    shown = action.default not in (None, False, "", argparse.SUPPRESS, []) and action.nargs != 0
    if shown and not action.required:
        notes.append(f"default `{action.default}`")
    if action.required and action.option_strings:
        notes.append("required")
    if isinstance(action, argparse._AppendAction) and "repeatable" not in (action.help or ""):
        notes.append("repeatable")
    return notes


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | meaning |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            names = ", ".join(f"`{flag}{metavar}`" for flag in action.option_strings)
        else:
            names = f"`{action.metavar or action.dest}`"
        text = parser._get_formatter()._expand_help(action) if action.help else ""
        rows.append(f"| {names} | {_cell('; '.join(filter(None, [text, *_notes(action)])))} |")
    return rows if len(rows) > 2 else []


def _exit_status() -> str:
    """The exit statuses, as ``qm``'s module documentation states them."""
    from qm import cli

    found = re.search(r"^Exit status:.*?(?=\n\n|\Z)", cli.__doc__ or "", re.S | re.M)
    return " ".join(found.group(0).split()).replace("``", "`") if found else ""


def reference() -> str:
    """The whole reference as Markdown: global options, then each verb."""
    with _builders_environment():
        return _reference(_parser())


def _reference(parser: argparse.ArgumentParser) -> str:
    lines = ["### Global options", "", "```text", parser.format_usage().strip(), "```", ""]
    lines += _options_table(parser)
    lines += ["", _exit_status(), ""]
    for name, help_text, sub in _verbs(parser):
        lines += [f"### qm {name}", "", help_text[:1].upper() + help_text[1:] + ".", ""]
        lines += ["```text", sub.format_usage().strip(), "```", ""]
        lines += [*_options_table(sub), ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """Replace the marker with the reference (MkDocs' ``on_page_markdown`` event)."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
