"""A job's ``workdir`` is opened when the job starts, as its owner, and used by descriptor:
a symlink cannot take a job anywhere its owner's roots do not hold.

Attacked as a researcher would: their own earlier job (or their shell) makes ``~/w`` a
link to the host's ``/proc``, to the portal's tree or to another user's home, then submits
a job with ``workdir: ~/w``; or swaps the link while jobs start. On the sandboxed and the
unsandboxed local backend, with the portal as root (CI) and, rerun in a child process, as
an ordinary user. No Django: the "portal" is a var/ tree laid out as the demo's.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from scheduler.backends.base import PollResult, RemoteState
from scheduler.backends.user_paths import UnsafePath, open_user_dir, trusted_real
from tests.backends.attacked_site import ALICE, REPO, Site, make_site, owned, rerun_as_ordinary_user

#: What a job prints of where it started: every name in it, one a line.
LOOK = "ls -a1"


@pytest.fixture(params=["bwrap", "none"])
def site(request: pytest.FixtureRequest, passable_tmp: Path) -> Site:
    site = make_site(request.param, passable_tmp)  # the homes' parent, as /home is: passable by everyone
    (site.bob_home / "secret.txt").write_text("bob's secret")
    (owned(site.alice_home / "project", ALICE, 0o700) / "mine.txt").write_text("alice's data")
    return site


def run(site: Site, workdir: Path) -> tuple[PollResult, str]:
    return site.run(LOOK, workdir=workdir)


def _refused(result: PollResult, log: str, words: str) -> None:
    assert result.state is RemoteState.FAILED, (result, log)
    assert "workdir refused" in result.reason and words in result.reason, result.reason
    assert log == "", log  # nothing ran


def test_a_workdir_linked_to_the_hosts_proc_is_refused(site: Site) -> None:
    result, log = run(site, site.link(Path("/proc")))
    _refused(result, log, "(really /proc) lies outside")


def test_a_workdir_linked_into_the_portals_tree_is_refused(site: Site) -> None:
    for target in (site.var, REPO / "scheduler"):
        result, log = run(site, site.link(target))
        _refused(result, log, "")
        assert "portal's own files" in result.reason or "lies outside" in result.reason


def test_a_workdir_linked_to_another_users_home_is_refused(site: Site) -> None:
    result, log = run(site, site.link(site.bob_home))
    _refused(result, log, "")
    assert "bob's secret" not in log and "secret.txt" not in log


def test_a_link_inside_the_owners_own_tree_is_followed(site: Site) -> None:
    result, log = run(site, site.link(site.alice_home / "project"))
    assert result.state is RemoteState.COMPLETED, (result, log)
    assert "mine.txt" in log.splitlines()


def test_a_link_swapped_while_jobs_start_never_reaches_proc(site: Site) -> None:
    """A racing thread flips ``~/w`` between alice's project and ``/proc`` as fast as it
    can while jobs start there: each job either ran in her project or was refused."""
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            site.link(site.alice_home / "project", "w.new")
            os.replace(site.alice_home / "w.new", site.alice_home / "w")
            site.link(Path("/proc"), "w.new")
            os.replace(site.alice_home / "w.new", site.alice_home / "w")

    site.link(site.alice_home / "project")
    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        outcomes = [run(site, site.alice_home / "w") for _ in range(8)]
    finally:
        stop.set()
        flipper.join()
    for result, log in outcomes:
        names = log.splitlines()
        assert "self" not in names and "cmdline" not in names, log
        if result.state is RemoteState.COMPLETED:
            assert "mine.txt" in names, log
        else:
            _refused(result, log, "")


def test_the_attacks_fail_with_the_portal_as_an_ordinary_user(passable_tmp: Path) -> None:
    """The same attacks, the backend run by an ordinary user (the embedded demo's case):
    this module again in a child pytest under another uid."""
    rerun_as_ordinary_user(__file__, passable_tmp)


# -- the helper itself ------------------------------------------------------------------


def test_a_missing_workdir_is_refused_in_the_owners_words(tmp_path: Path) -> None:
    with pytest.raises(UnsafePath, match="cannot be opened as the job's user"):
        open_user_dir(str(tmp_path / "nowhere"), roots=[str(tmp_path)])


def test_a_root_reached_through_someone_elses_link_is_taken_as_written(tmp_path: Path) -> None:
    """``/scratch/alice`` made by alice as a link to ``/etc`` does not make ``/etc`` hers;
    a link root owns (``/home -> /data/home``) does move the root."""
    (tmp_path / "data" / "home").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "data" / "home")
    followed = tmp_path / ("data/home" if os.geteuid() == 0 else "home")  # only root's links move a root
    assert trusted_real(str(tmp_path / "home" / "alice")) == str(followed / "alice")
    if os.geteuid() == 0:
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        (scratch / "alice").symlink_to("/etc")
        os.lchown(scratch / "alice", ALICE.uid or 0, ALICE.gid or 0)
        assert trusted_real(str(scratch / "alice")) == str(scratch / "alice")
        with pytest.raises(UnsafePath, match="lies outside"):
            open_user_dir(str(scratch / "alice"), roots=[str(scratch / "alice")])
