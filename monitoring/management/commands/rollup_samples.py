"""Roll GPU samples up into minute and hour aggregates, and prune past retention."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from monitoring import services
from monitoring.models import Resolution


class Command(BaseCommand):
    help = (
        "Recompute GPU sample rollups (idempotent). Default: the recent window, as beat does. "
        "--since recomputes from that time, e.g. after an agent sent a long-buffered backlog."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", help="ISO time to recompute from (default: the lookback window).")
        parser.add_argument("--until", help="ISO time to recompute up to (default: now).")
        parser.add_argument("--prune", action="store_true", help="Also delete what is past its retention.")

    def handle(self, *args: Any, **options: Any) -> None:
        until = _parse(options["until"]) if options["until"] else timezone.now()
        if options["since"]:
            since = _parse(options["since"])
            minutes = services.rollup(Resolution.MINUTE, since, until)
            hours = services.rollup(Resolution.HOUR, since, until + timedelta(hours=1))
            counts = {"minutes": minutes, "hours": hours}
        else:
            counts = services.rollup_recent(until)
        self.stdout.write(f"rollups written: {counts['minutes']} minute, {counts['hours']} hour")
        if options["prune"]:
            pruned = services.prune(until)
            self.stdout.write(f"pruned: {pruned['raw']} raw, {pruned['minutes']} minute, {pruned['hours']} hour")


def _parse(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"not an ISO time: {text!r}") from None
    return value if value.tzinfo else timezone.make_aware(value)
