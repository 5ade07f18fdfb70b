"""The files agent on its own (no Django): the protocol, and what it refuses whoever asks.

Run as the portal runs it, a separate process fed a request line; as root (CI) it drops
to the homes' owner uid first, as an ordinary user it is that user already."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from scheduler.files.acting import AGENT_PATH
from scheduler.files.agent import FRAME
from tests.scheduler.files.homes import ALICE_UID, AS_ROOT, Homes, make_homes


@pytest.fixture
def homes(passable_tmp: Path) -> Homes:
    return make_homes(passable_tmp)


def agent(homes: Homes, op: str, path: Path, stdin: bytes = b"", **fields: Any) -> tuple[dict[str, Any], bytes, int]:
    """Run the agent as alice on ``op``: its head line, the raw rest, its exit status."""
    request = {
        "op": op,
        "path": str(path),
        "roots": [str(homes.alice)],
        "refused": [str(homes.alice / "portal")],
        "uid": ALICE_UID,
        "gid": ALICE_UID,
        **fields,
    }
    done = subprocess.run(
        [sys.executable, "-I", "-S", AGENT_PATH],
        input=json.dumps(request).encode() + b"\n" + stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )
    head, _, rest = done.stdout.partition(b"\n")
    return json.loads(head), rest, done.returncode


def test_a_malformed_request_is_refused(homes):
    head, _, status = agent(homes, "list", Path("relative/path"))
    assert status == 1 and head["status"] == 400 and "absolute" in head["error"]
    head, _, status = agent(homes, "chmod", homes.alice)
    assert status == 1 and "unknown op" in head["error"]


def test_the_agent_never_acts_as_root(homes):
    head, _, status = agent(homes, "list", homes.alice, uid=0, gid=0)
    assert status == 1 and head["status"] == 403 and "never acts as root" in head["error"]


def test_the_agent_refuses_to_act_as_anyone_but_itself_when_not_root(homes):
    if AS_ROOT:
        pytest.skip("root may become anyone: the agent drops to the uid it is given")
    head, _, _ = agent(homes, "list", homes.alice, uid=os.geteuid() + 1, gid=os.geteuid() + 1)
    assert head["status"] == 403 and "not as the user's uid" in head["error"]


def test_a_listing_is_one_json_array_then_the_end(homes):
    homes.put(homes.alice / "a.txt", "abc")
    head, rest, status = agent(homes, "list", homes.alice)
    rows, end = (json.loads(line) for line in rest.splitlines())
    assert status == 0 and head["ok"] and end == {"end": True, "truncated": False, "skipped": 0}
    assert [(name, size) for name, _mode, size, _mtime in rows] == [("a.txt", 3)]


def test_a_listing_stops_at_its_limit(homes):
    for name in "abc":
        homes.put(homes.alice / name)
    _, rest, _ = agent(homes, "list", homes.alice, max_entries=2)
    rows, end = (json.loads(line) for line in rest.splitlines())
    assert len(rows) == 2 and end["truncated"] is True


def test_the_portals_own_tree_inside_a_root_is_refused_and_left_out(homes):
    """A root that holds the portal's files (a single-user demo in a home): they are not
    listed into, archived, nor deleted with the folder that holds them."""
    homes.put(homes.alice / "portal" / "db.sqlite3", "portal-secret")
    homes.put(homes.alice / "notes.txt", "mine")
    head, _, _ = agent(homes, "list", homes.alice / "portal")
    assert head["status"] == 403 and "portal's own files" in head["error"]
    head, tar, _ = agent(homes, "get", homes.alice, max_bytes=1 << 20, max_entries=100)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        assert archive.getnames() == ["alice/notes.txt"]
    head, _, _ = agent(homes, "delete", homes.alice / "portal", recursive=True)
    assert head["status"] == 403 and (homes.alice / "portal" / "db.sqlite3").exists()


def frames(data: bytes) -> bytes:
    return FRAME.pack(len(data)) + data + FRAME.pack(0)


def test_an_upload_appears_only_once_committed(homes):
    _, rest, status = agent(homes, "put", homes.alice, frames(b"hello") + b"C", name="h.txt", max_bytes=100)
    staged, placed = (json.loads(line) for line in rest.splitlines())
    assert status == 0 and staged == {"ok": True, "staged": True, "size": 5} and placed["name"] == "h.txt"
    assert (homes.alice / "h.txt").read_bytes() == b"hello"
    if AS_ROOT:
        assert os.stat(homes.alice / "h.txt").st_uid == ALICE_UID


def test_an_upload_never_committed_or_cut_short_leaves_nothing(homes):
    agent(homes, "put", homes.alice, frames(b"hello"), name="h.txt", max_bytes=100)  # no "C": the portal refused it
    _, rest, status = agent(homes, "put", homes.alice, FRAME.pack(10) + b"abc", name="h.txt", max_bytes=100)
    assert status == 1 and "cut short" in rest.decode()
    _, rest, status = agent(homes, "put", homes.alice, frames(b"x" * 101) + b"C", name="h.txt", max_bytes=100)
    assert status == 1 and '"status": 413' in rest.decode()
    assert os.listdir(homes.alice) == []


def test_an_upload_name_must_be_plain(homes):
    for name in ("../x", "a/b", "..", ""):
        head, _, status = agent(homes, "put", homes.alice, frames(b"x") + b"C", name=name, max_bytes=100)
        assert status == 1 and head["status"] == 400, name
    assert os.listdir(homes.alice) == []


def test_a_name_that_is_not_utf8_is_left_out_and_counted(homes):
    homes.put(homes.alice / "fine.txt")
    bad = os.path.join(os.fsencode(homes.alice), b"latin-\xe9.txt")
    with open(bad, "wb"):
        pass
    if AS_ROOT:
        os.chown(bad, ALICE_UID, ALICE_UID)
    _, rest, _ = agent(homes, "list", homes.alice)
    rows, end = (json.loads(line) for line in rest.splitlines())
    assert [row[0] for row in rows] == ["fine.txt"] and end["skipped"] == 1


def test_an_agent_already_running_as_the_user_acts_as_itself(homes):
    """sudo's case and the single-user demo's: the agent starts as the user (here through
    setpriv, with the system's python3, as sudo would run it) and changes no identity."""
    python = Path("/usr/bin/python3")
    if not AS_ROOT or not python.exists() or not shutil.which("setpriv"):
        pytest.skip("needs root, setpriv and the system's python3 to start the agent as another uid")
    homes.put(homes.alice / "a.txt", "a")
    request = {"op": "mkdir", "path": str(homes.alice), "roots": [str(homes.alice)], "refused": [], "name": "made"}
    become = ["setpriv", f"--reuid={ALICE_UID}", f"--regid={ALICE_UID}", "--clear-groups"]
    for uid, answer in ((ALICE_UID, '{"ok": true, "name": "made"}'), (ALICE_UID + 1, "not as the user's uid")):
        done = subprocess.run(
            [*become, str(python), "-I", "-S", AGENT_PATH],
            input=json.dumps({**request, "uid": uid, "gid": uid}).encode() + b"\n",
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert answer in done.stdout.decode(), done.stdout + done.stderr
    assert os.stat(homes.alice / "made").st_uid == ALICE_UID
