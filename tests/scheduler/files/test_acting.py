"""Whom the files agent runs as, and how: dropped to the uid as root, ``sudo -n -u`` as a
service user (the sudoers rule's exact command), directly as oneself; never as root, a
system account, or anyone without a cluster identity."""

from __future__ import annotations

import os
import pwd
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from people.models import ClusterIdentity
from scheduler.files import acting
from scheduler.files.acting import AGENT_PATH, Actor, FilesError, actor_for, agent_argv
from scheduler.files.operations import list_folder
from tests.scheduler.files.homes import ALICE_UID, AS_ROOT, make_homes, reach_homes

pytestmark = pytest.mark.django_db


def identity(user: Any, username: str, uid: int | None, gid: int | None = None) -> None:
    ClusterIdentity.objects.create(user=user, username=username, uid=uid, gid=gid)
    user.refresh_from_db()


def test_a_user_without_a_cluster_identity_is_refused(world):
    with pytest.raises(FilesError, match="no cluster identity") as refused:
        actor_for(world.alice)
    assert refused.value.status == 403


@pytest.mark.parametrize(
    ("username", "uid", "words"),
    [
        ("root", 0, "system account"),
        ("daemon", 1, "system account"),
        ("nobody-here-qm", None, "does not exist on the portal's host"),
    ],
    ids=["root", "a system account", "a user this host does not know"],
)
def test_identities_that_are_never_acted_as(world, username, uid, words):
    identity(world.alice, username, uid)
    with pytest.raises(FilesError, match=words):
        actor_for(world.alice)


def test_a_uid_without_a_gid_is_its_own_group_as_the_local_backend_has_it(world):
    identity(world.alice, "alice", 20001)
    assert actor_for(world.alice) == Actor("alice", 20001, 20001)


def test_without_a_uid_the_hosts_user_database_says_who(world):
    me = pwd.getpwuid(os.geteuid())
    identity(world.alice, me.pw_name, None)
    if me.pw_uid < 1000 and me.pw_uid != os.geteuid():
        pytest.skip("this process runs as a system account")
    if me.pw_uid == 0:
        with pytest.raises(FilesError, match="system account"):
            actor_for(world.alice)
    else:
        assert actor_for(world.alice) == Actor(me.pw_name, me.pw_uid, me.pw_gid)


def test_the_agent_runs_directly_as_root_or_as_oneself(monkeypatch):
    monkeypatch.setattr(acting.os, "geteuid", lambda: 0)
    assert agent_argv(Actor("alice", 20001, 20001)) == [sys.executable, "-I", "-S", AGENT_PATH]
    monkeypatch.setattr(acting.os, "geteuid", lambda: 4242)
    assert agent_argv(Actor("me", 4242, 4242)) == [sys.executable, "-I", "-S", AGENT_PATH]


def test_a_service_user_runs_the_agent_through_sudo_with_the_rules_exact_command(monkeypatch, settings):
    monkeypatch.setattr(acting.os, "geteuid", lambda: 999)
    settings.FILES_SUDO, settings.FILES_AGENT_PYTHON = "/usr/bin/sudo", "/usr/bin/python3"
    assert agent_argv(Actor("alice", 20001, 20001)) == [
        *("/usr/bin/sudo", "-n", "-u", "alice", "--"),
        *("/usr/bin/python3", "-I", "-S", AGENT_PATH),
    ]


def test_through_a_stand_in_sudo_the_listing_works(world, monkeypatch, settings, passable_tmp, tmp_path):
    """sudo itself is the site's; a stand-in records its arguments and runs the command
    (as this process: root then drops to alice's uid in the agent, as it would)."""
    homes = make_homes(passable_tmp)
    reach_homes(settings, homes)
    homes.put(homes.alice / "a.txt", "a")
    identity(world.alice, "alice", ALICE_UID, ALICE_UID)
    calls = tmp_path / "sudo-calls"
    sudo = tmp_path / "sudo"
    skip_to_command = 'while [ "$1" != "--" ]; do shift; done; shift'
    sudo.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\n{skip_to_command}\nexec "$@"\n')
    sudo.chmod(0o755)
    settings.FILES_SUDO, settings.FILES_AGENT_PYTHON = str(sudo), sys.executable
    real_euid = os.geteuid()
    monkeypatch.setattr(acting.os, "geteuid", lambda: real_euid + 7 if real_euid else 999)
    if not AS_ROOT:  # the agent checks it runs as the uid it acts for: the stand-in cannot change it
        pytest.skip("only root can stand in for sudo's change of user")
    listing = list_folder(world.alice, str(homes.alice))
    assert [e.name for e in listing.entries] == ["a.txt"]
    assert calls.read_text().split() == ["-n", "-u", "alice", "--", sys.executable, "-I", "-S", AGENT_PATH]


def test_through_the_real_sudo_as_a_real_user(world, monkeypatch, settings, passable_tmp):
    """Where this host has the dev cluster's users (scripts/slurm-dev-users.sh makes
    alice) and this process may sudo to her: the agent really runs as her uid."""
    try:
        entry = pwd.getpwnam("alice")
    except KeyError:
        pytest.skip("no user alice on this host (scripts/slurm-dev-users.sh makes one)")
    if not AS_ROOT or not shutil.which("sudo") or not Path("/usr/bin/python3").exists():
        pytest.skip("needs root, sudo and the system's python3 (the venv's may be root's alone)")
    homes = make_homes(passable_tmp)
    reach_homes(settings, homes)
    os.chown(homes.alice, entry.pw_uid, entry.pw_gid)
    mine = homes.put(homes.alice / "mine.txt", "x", uid=entry.pw_uid)
    os.chown(mine, entry.pw_uid, entry.pw_gid)
    identity(world.alice, "alice", None)
    monkeypatch.setattr(acting.os, "geteuid", lambda: 999)  # as the portal's service user would
    settings.FILES_AGENT_PYTHON = "/usr/bin/python3"
    listing = list_folder(world.alice, str(homes.alice))
    assert [e.name for e in listing.entries] == ["mine.txt"]


def test_the_sudoers_rule_allows_exactly_the_command_the_portal_runs(monkeypatch, settings):
    """deploy/sudoers.d/quartermaster and :func:`agent_argv` say the same command: the
    default python3, ``-I -S``, the agent at its place in the install, no other argument."""
    rule = (Path(__file__).resolve().parents[3] / "deploy/sudoers.d/quartermaster").read_text()
    line = next(line for line in rule.splitlines() if line.startswith("Cmnd_Alias QM_FILES_AGENT"))
    allowed = line.partition("=")[2].split()
    assert "QM_FILES_AGENT" in next(line for line in rule.splitlines() if line.startswith("qmportal ALL"))
    monkeypatch.setattr(acting.os, "geteuid", lambda: 999)
    settings.FILES_SUDO, settings.FILES_AGENT_PYTHON = "/usr/bin/sudo", "/usr/bin/python3"
    command = agent_argv(Actor("alice", 20001, 20001))
    ran = command[command.index("--") + 1 :]
    assert ran[:3] == allowed[:3] == ["/usr/bin/python3", "-I", "-S"] and len(allowed) == len(ran) == 4
    assert allowed[3] == "/app/" + os.path.relpath(AGENT_PATH, Path(__file__).resolve().parents[3])
