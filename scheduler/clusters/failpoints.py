"""Failpoints: named places where a test may make this process die, to prove recovery.

``QM_FAILPOINTS=dispatch.after_submit`` (comma-separated names) makes
:func:`failpoint` kill the calling process with SIGKILL at that place, as a power cut
or an OOM kill would: no ``finally`` runs, no transaction commits. It exists so that a
test can kill a Celery worker exactly between a backend accepting a job and the
database recording it, which no outside timing can hit reliably. Unset (always, outside
tests) it costs one environment lookup.
"""

from __future__ import annotations

import os
import signal


def failpoint(name: str) -> None:
    """Die here if ``QM_FAILPOINTS`` names this place."""
    armed = os.environ.get("QM_FAILPOINTS", "")
    if armed and name in {item.strip() for item in armed.split(",")}:
        os.kill(os.getpid(), signal.SIGKILL)
