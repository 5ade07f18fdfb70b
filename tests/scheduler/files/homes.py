"""alice's and bob's homes for the Files tests, and the portal set up to reach them.

Under a folder every user may pass (as /home is), ``home/alice`` (hers alone, 0700) and
``home/bob`` (world-readable, 0755: so only the portal's own checks, not the modes, keep
alice out of it). When the tests run as root (CI), the homes belong to uids 20001 and
20002 and the files agent really runs as those uids; as an ordinary user, everything is
that user's, alice acts as them and bob has no distinct uid (his tests skip).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.builders import give_identity

AS_ROOT = os.geteuid() == 0
ALICE_UID, BOB_UID = (20001, 20002) if AS_ROOT else (os.geteuid(), None)


@dataclass
class Homes:
    base: Path
    alice: Path
    bob: Path

    def put(self, path: Path, content: bytes | str = b"", *, uid: int | None = None, mode: int = 0o644) -> Path:
        """A file at ``path`` owned by ``uid`` (its home's owner by default, when root)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        self.own(path, uid)
        path.chmod(mode)
        return path

    def folder(self, path: Path, *, uid: int | None = None, mode: int = 0o755) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        self.own(path, uid)
        path.chmod(mode)
        return path

    def link(self, path: Path, target: Path, *, uid: int | None = None) -> Path:
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target)
        self.own(path, uid)
        return path

    def own(self, path: Path, uid: int | None = None) -> None:
        if AS_ROOT:
            owner = uid if uid is not None else (BOB_UID if self.bob in path.parents or path == self.bob else ALICE_UID)
            os.lchown(path, owner or 0, owner or 0)


def make_homes(base: Path) -> Homes:
    (base / "home").mkdir(mode=0o755)
    homes = Homes(base, base / "home" / "alice", base / "home" / "bob")
    homes.folder(homes.alice, uid=ALICE_UID, mode=0o700)
    homes.folder(homes.bob, uid=BOB_UID, mode=0o755)
    return homes


def reach_homes(settings: Any, homes: Homes) -> None:
    """The portal's roots are these homes (``JOB_WORKDIR_ROOTS``)."""
    settings.JOB_WORKDIR_ROOTS = [f"{homes.base}/home/{{user}}"]


def give_identities(world: Any) -> None:
    """alice (and bob, where a distinct uid exists) get cluster identities of their names."""
    give_identity(world.alice, ALICE_UID)
    if BOB_UID is not None:
        give_identity(world.bob, BOB_UID)


def homes_the_portal_reaches(base: Path, settings: Any, world: Any) -> Homes:
    """What the Files API, page and browser tests start from: the homes under ``base``,
    the portal's roots set to them and alice's (and bob's) cluster identities."""
    homes = make_homes(base)
    reach_homes(settings, homes)
    give_identities(world)
    return homes


def needs_bob() -> None:
    if BOB_UID is None:
        pytest.skip("bob needs a uid of his own: only root can act as two users (CI runs these as root)")
