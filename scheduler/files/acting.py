"""Who the files agent runs as, and how it becomes them: the one home for that question.

A portal user's files are touched only as their cluster identity (``ClusterIdentity``):
the POSIX user their jobs run as. The agent (:mod:`scheduler.files.agent`) becomes that
user one of three ways, picked by who the portal's process is, as the backends do:

- the portal is root (the local backend's case, CI): the agent is started as root and
  drops to the user's uid/gid, no other groups, before it reads any request field but
  those two (``setresuid``), as the local runner does;
- the portal is an unprivileged service user: ``sudo -n -u <user>`` runs the agent under
  the rule in ``deploy/sudoers.d/quartermaster`` (the Slurm backend's way: members of one
  group only, this exact command, no arguments);
- the user *is* the portal's own uid (a single-user demo): the agent runs directly.

A user without an identity, a name that is no plain POSIX name, a user this host does not
know, root or a system account (below ``QM_MIN_JOB_UID``) is refused with a sentence
saying which, never served as the portal.
"""

from __future__ import annotations

import os
import pwd
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from people.models import ClusterIdentity
from scheduler.backends.slurm_owner import POSIX_NAME
from scheduler.files import agent

#: The agent as a file (``sudo`` runs a command by path; the sudoers rule names it).
AGENT_PATH = str(Path(agent.__file__).resolve())


class FilesError(Exception):
    """What the Files page and API answer instead of doing it: an HTTP ``status``, a
    sentence for the user, and the request ``field`` it is about."""

    def __init__(self, status: int, message: str, field: str = "path") -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


@dataclass(frozen=True, slots=True)
class Actor:
    """A portal user as the POSIX user the agent acts as."""

    user: str
    uid: int
    gid: int


def actor_for(user: object) -> Actor:
    """``user``'s cluster identity, checked on this host. Raises :class:`FilesError` (403)."""
    try:
        identity = getattr(user, "cluster_identity", None)
    except ClusterIdentity.DoesNotExist:
        identity = None
    if identity is None:
        raise FilesError(
            403,
            "You have no cluster identity: the portal opens files only as your user on the cluster, "
            "and none is set for you. Ask the cluster's staff to set one.",
        )
    name = str(identity.username)
    if not POSIX_NAME.fullmatch(name):
        raise FilesError(403, f"Your cluster user {name!r} is not a POSIX user name.")
    # As the local backend: a uid given is used with its gid (else the uid as the gid);
    # without one, the host's user database says both.
    uid, gid = identity.uid, identity.gid
    if uid is None:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise FilesError(403, f"Your cluster user {name!r} does not exist on the portal's host.") from None
        uid, gid = entry.pw_uid, entry.pw_gid if gid is None else gid
    gid = uid if gid is None else gid
    if uid == 0 or gid == 0 or (uid < settings.QM_MIN_JOB_UID and uid != os.geteuid()):
        raise FilesError(403, f"Your cluster user {name!r} has uid {uid}: a system account, never acted as.")
    return Actor(name, uid, gid)


def agent_argv(actor: Actor) -> list[str]:
    """The command that runs the agent as ``actor`` (see the module docstring)."""
    if os.geteuid() in (0, actor.uid):
        return [sys.executable, "-I", "-S", AGENT_PATH]
    return [settings.FILES_SUDO, "-n", "-u", actor.user, "--", settings.FILES_AGENT_PYTHON, "-I", "-S", AGENT_PATH]
