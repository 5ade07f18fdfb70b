"""Who runs a GPU process: its owner's uid and user name and its command name, read from
``/proc/<pid>/status`` and ``/proc/<pid>/comm``, for the portal's GPU process audit
(``monitoring.process_audit``) to tell whose process it is.

NVML reports the PIDs of the host's PID namespace: an agent in a container sees them
only with the host's ``/proc`` (``hostPID``). A process that ended between NVML's list
and the read, or that this agent may not see, reads as unknown (``None``, ``""``),
never as someone's.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def user_name(uid: int) -> str:
    """The name the password database gives ``uid``; ``""`` if it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return ""


@dataclass(frozen=True, slots=True)
class Owner:
    uid: int | None = None
    user: str = ""
    command: str = ""


@dataclass(frozen=True, slots=True)
class ProcReader:
    """Reads owners under ``root`` (``/proc``; a directory of the same shape in tests),
    naming uids with ``names`` (the password database)."""

    root: Path = Path("/proc")
    names: Callable[[int], str] = user_name

    def owner(self, pid: int) -> Owner:
        """The owner of ``pid``; fields it cannot read are left unknown."""
        uid = self._real_uid(pid)
        return Owner(uid=uid, user=self.names(uid) if uid is not None else "", command=self._command(pid))

    def _real_uid(self, pid: int) -> int | None:
        """The real uid: the first of the four on the ``Uid:`` line of ``status``."""
        try:
            text = (self.root / str(pid) / "status").read_text(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("Uid:"):
                fields = line.split()
                return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
        return None

    def _command(self, pid: int) -> str:
        try:
            return (self.root / str(pid) / "comm").read_text(errors="replace").strip()[:64]
        except OSError:
            return ""
