"""``python -m scheduler.replay``: the replay's command line (``scheduler.replay.cli``)."""

from __future__ import annotations

from scheduler.replay.cli import main

raise SystemExit(main())
