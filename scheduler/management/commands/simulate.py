"""``manage.py simulate TRACE --policy ...``: the trace replay of ``scheduler.replay``.

It only delegates: the options are the ones :func:`scheduler.replay.cli.add_arguments`
defines for ``python -m scheduler.replay``, and :func:`scheduler.replay.cli.run`
does the work. (It does not call ``main(argv)`` itself because Django has already parsed
the options, also for ``call_command``; bad options raise ``CommandError`` here where
``main`` exits with status 2.) It needs no database.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler.replay import cli


class Command(BaseCommand):
    help = "Replay a GPU job trace (Philly CSV) through the scheduler and print quality figures as JSON lines."

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cli.run(argparse.Namespace(**options), self.stdout)
        except cli.SimulationError as error:
            raise CommandError(str(error)) from None
