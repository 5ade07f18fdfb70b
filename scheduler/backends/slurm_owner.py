"""Slurm's commands run as the job's owner, the way Open OnDemand does it.

The portal runs as an unprivileged service user; ``sbatch``, ``scancel``, ``scontrol``
and the commands that make and read the job's output directory run as the owner through
``sudo -n -u <user>``, under a sudoers rule that allows exactly those commands for
members of one group (``deploy/sudoers.d/quartermaster``; docs/admin/slurm.md).
Slurm then records the owner as the job's user (``sacct -o User``), the job's processes
and files are the owner's, and another user's job cannot read them.

Why sudo: Debian's Slurm 22.05 has no ``auth/jwt``, so ``slurmrestd`` cannot act for a
user here; munge credentials carry the uid of the process that asks, so a process of
that uid is what Slurm trusts.

Only names that pass :data:`POSIX_NAME`, exist on this host and have a uid of at least
``min_uid`` are used: never root or a system account, whatever the database says.
"""

from __future__ import annotations

import pwd
import re
from dataclasses import dataclass
from pathlib import Path

from scheduler.backends.base import RunAs

#: A portable POSIX user name (the portal's ``ClusterIdentity.username`` rule).
POSIX_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
#: Variables sudo keeps for the commands it runs (besides its own HOME, USER, PATH...):
#: the client's slurm.conf. The sudoers rule lists the same in ``env_keep``.
KEPT_ENV = ("SLURM_CONF",)


@dataclass(frozen=True, slots=True)
class Owner:
    """A job owner as this host knows them."""

    user: str
    uid: int
    home: Path


class OwnerError(ValueError):
    """The identity cannot be used here (bad name, no such user, a system account)."""


class OwnerCommands:
    """Builds the command lines that run as an owner and says where their output goes.

    ``output_dir`` is a template with ``{user}`` and ``{home}`` (default
    ``{home}/.quartermaster/slurm``): it must be a path the owner can write on every
    compute node (a home or scratch file system shared with them).
    """

    def __init__(self, *, sudo: str, min_uid: int, output_dir: str) -> None:
        self.sudo = sudo
        self.min_uid = min_uid
        self.output_template = output_dir
        self._ready: set[Path] = set()

    def owner(self, run_as: RunAs | None) -> Owner:
        """The owner ``run_as`` names, checked against this host's user database.

        Raises :class:`OwnerError` naming what is wrong: no identity, a name that is not
        a plain POSIX name, a user this host does not know, or a uid below ``min_uid``.
        """
        if run_as is None:
            raise OwnerError("its owner has no cluster identity, and this cluster runs every job as its owner")
        return self.named(run_as.user)

    def named(self, user: str) -> Owner:
        """:meth:`owner` for a bare user name (a job's user as Slurm reports it)."""
        if not POSIX_NAME.fullmatch(user):
            raise OwnerError(f"cluster user {user!r} is not a POSIX user name")
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise OwnerError(f"cluster user {user!r} does not exist on the portal's host") from None
        if entry.pw_uid < self.min_uid:
            raise OwnerError(f"cluster user {user!r} has uid {entry.pw_uid}, below {self.min_uid}: a system account")
        return Owner(user, entry.pw_uid, Path(entry.pw_dir))

    def argv(self, owner: Owner, command: list[str], *, keep_env: bool) -> list[str]:
        """``command`` run as ``owner``: ``sudo -n`` (never a password prompt) with the
        client's environment (:data:`KEPT_ENV`) when ``keep_env``."""
        kept = [f"--preserve-env={','.join(KEPT_ENV)}"] if keep_env else []
        return [self.sudo, "-n", *kept, "-u", owner.user, "--", *command]

    def output_dir(self, owner: Owner) -> Path:
        """Where the owner's job outputs go (the template filled in)."""
        return Path(self.output_template.format(user=owner.user, home=owner.home))

    def needs_output_dir(self, owner: Owner) -> bool:
        """Whether this process has not made sure of the owner's output directory yet."""
        return self.output_dir(owner) not in self._ready

    def output_dir_made(self, owner: Owner) -> None:
        self._ready.add(self.output_dir(owner))
