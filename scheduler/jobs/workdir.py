"""Where a job may start (``workdir``): the owner's trees and the portal's own, one home.

The allowlist is ``JOB_WORKDIR_ROOTS`` with ``{user}`` as the owner's cluster user name
(their home and scratch by default), as Open OnDemand limits the directories its apps may
use; whatever it lists, the portal's own tree (its code, ``var/``, the local backend's job
directories) is refused, since the local backend makes a job's workdir visible inside its
sandbox. The API checks the path as text when a job is submitted (a clear 400 early); the
backend that opens the directory checks the same bounds again where it really is, when the
job starts (:mod:`scheduler.backends.user_paths`), since a symlink may have moved it since.
"""

from __future__ import annotations

from django.conf import settings

from scheduler.backends.base import WorkdirBounds


def portal_trees() -> tuple[str, ...]:
    """The portal's own files: its code, its var/ tree and its job directories."""
    return tuple(str(settings_path) for settings_path in (settings.BASE_DIR, settings.VAR_DIR, settings.QM_WORK_DIR))


def workdir_bounds(cluster_user: str) -> WorkdirBounds:
    """The trees ``cluster_user`` may start a job in, and the portal's, which they may not."""
    roots = tuple(root.replace("{user}", cluster_user).rstrip("/") or "/" for root in settings.JOB_WORKDIR_ROOTS)
    return WorkdirBounds(roots=roots, refused=portal_trees())
