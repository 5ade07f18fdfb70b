"""A job's own output files (``sbatch -o/-e``) are opened by the local runner, which may be
root, so they are opened as the job's owner, within their roots, by descriptor: no path
a researcher names can make the portal write where they may not.

Attacked as a researcher would: ``-o`` naming another user's file, the portal's database,
a link their own earlier job planted (to the portal's files, to another user's), a
directory on the way swapped for a link, a FIFO that would hold the runner up. On the
sandboxed and the unsandboxed local backend, with the portal as root (CI) and, rerun in a
child process, as an ordinary user. No Django: the "portal" is a var/ tree.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from scheduler.backends.base import JobOutput, PollResult, RemoteState, WorkdirBounds
from tests.backends.attacked_site import ALICE, BOB, DATABASE, REPO, Site, make_site, rerun_as_ordinary_user


@pytest.fixture(params=["bwrap", "none"])
def site(request: pytest.FixtureRequest, passable_tmp: Path) -> Site:
    site = make_site(request.param, passable_tmp)
    notes = site.bob_home / "notes.txt"
    notes.write_text("bob's notes\n")
    notes.chmod(0o666 if os.geteuid() != 0 else 0o644)  # as root: only bob may write it
    if os.geteuid() == 0:
        os.chown(notes, BOB.uid or 0, BOB.gid or 0)
    return site


def output_to(site: Site, path: Path | str) -> PollResult:
    """A job that says something, its output to ``path``."""
    return run(site, "echo written by the job", JobOutput(stdout=str(path), stderr=str(path)))


def run(
    site: Site, command: str, output: JobOutput | None = None, bounds: WorkdirBounds | None = None, *, key: str = ""
) -> PollResult:
    """``command`` run as alice in her home (none, given a ``key``), its end (:meth:`Site.run`)."""
    return site.run(command, output, bounds, key=key)[0]


def refused(result: PollResult, words: str) -> None:
    assert result.state is RemoteState.FAILED, result
    assert result.reason.startswith("output file refused: ") and words in result.reason, result.reason


def test_the_owner_s_own_file_is_written_as_the_owner(site: Site) -> None:
    result = output_to(site, site.alice_home / "out.txt")

    assert result.state is RemoteState.COMPLETED, result
    assert (site.alice_home / "out.txt").read_text() == "written by the job\n"
    assert (site.alice_home / "out.txt").stat().st_uid == (ALICE.uid if os.geteuid() == 0 else os.geteuid())


def test_a_file_name_without_a_workdir_lands_in_the_job_s_own_directory(site: Site) -> None:
    key = f"{uuid.uuid4()}.1"

    result = run(site, "echo in my own directory", JobOutput(stdout="slurm-42.out", stderr="slurm-42.out"), key=key)

    assert result.state is RemoteState.COMPLETED, result
    # Its own directory: in the job's state directory, or in homes_dir when it runs unsandboxed as another uid.
    found = [*site.var.glob(f"work/local-backend/demo/jobs/{key}/work/slurm-42.out"), *site.job_homes.glob("*/*.out")]
    assert [path.read_text() for path in found] == ["in my own directory\n"]
    assert found[0].stat().st_uid == (ALICE.uid if os.geteuid() == 0 else os.geteuid())


def test_another_user_s_file_is_refused(site: Site) -> None:
    refused(output_to(site, site.bob_home / "notes.txt"), "lies outside")

    assert (site.bob_home / "notes.txt").read_text() == "bob's notes\n"


def test_another_user_s_file_in_the_owner_s_roots_is_not_written_as_root(site: Site) -> None:
    """Even where the roots hold bob's home, the file is opened as alice: root's right to
    write it is never used."""
    if os.geteuid() != 0:
        pytest.skip("only root can run a job as another user; here jobs run as the portal's user")
    roots = WorkdirBounds(roots=(str(site.alice_home.parent),), refused=(str(site.var), str(REPO)))

    result = run(site, "echo written", JobOutput(stdout=str(site.bob_home / "notes.txt")), bounds=roots)

    refused(result, "Permission denied")
    assert (site.bob_home / "notes.txt").read_text() == "bob's notes\n"


def test_the_portal_s_database_is_refused_whatever_the_roots_allow(site: Site) -> None:
    roots = WorkdirBounds(roots=("/",), refused=(str(site.var), str(REPO)))

    result = run(site, "echo written", JobOutput(stdout=str(site.var / "quartermaster.sqlite3")), bounds=roots)

    refused(result, "lies in the portal's own files")
    assert (site.var / "quartermaster.sqlite3").read_text() == DATABASE


@pytest.mark.parametrize("target", ["database", "bob"], ids=["to the portal's database", "to another user's file"])
def test_a_link_the_job_planted_is_not_followed(site: Site, target: str) -> None:
    victim = site.var / "quartermaster.sqlite3" if target == "database" else site.bob_home / "notes.txt"
    before = victim.read_text()
    planted = run(site, f"ln -s {victim} out.txt")  # alice's own job, in her home
    assert planted.state is RemoteState.COMPLETED, planted

    refused(output_to(site, site.alice_home / "out.txt"), "symbolic link, which is not followed")
    assert victim.read_text() == before


def test_a_directory_on_the_way_linked_into_the_portal_is_refused(site: Site) -> None:
    planted = run(site, f"ln -s {site.var} logs")
    assert planted.state is RemoteState.COMPLETED, planted

    refused(output_to(site, site.alice_home / "logs" / "quartermaster.sqlite3"), f"(really {site.var})")
    assert (site.var / "quartermaster.sqlite3").read_text() == DATABASE


def test_a_fifo_does_not_hold_the_runner_up(site: Site) -> None:
    made = run(site, "mkfifo out.fifo")
    assert made.state is RemoteState.COMPLETED, made

    result = output_to(site, site.alice_home / "out.fifo")

    refused(result, "out.fifo")


def test_the_attacks_fail_with_the_portal_as_an_ordinary_user(passable_tmp: Path) -> None:
    """The same attacks, the backend run by an ordinary user (the embedded demo's case):
    this module again in a child pytest under another uid."""
    rerun_as_ordinary_user(__file__, passable_tmp)
