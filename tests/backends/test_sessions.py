"""Which job is a session and what it sees of the apps' environment, alike on every backend
(``scheduler.backends.sessions``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.backends.base import BackendError, JobSpec, Placement
from scheduler.backends.sessions import apps_env_from_config, apps_env_paths, is_session, session_path
from scheduler.backends.spec_check import spec_problem
from scheduler.sessions.script import SECRET_ENV


def spec(**env: str) -> JobSpec:
    return JobSpec(
        key="k.1",
        name="s",
        owner="alice",
        account="lab",
        command="true",
        script="",
        walltime_seconds=60,
        placements=(Placement("n-01", ()),),
        env=env,
    )


def bad(message: str) -> BackendError:
    return BackendError(message, permanent=True)


def test_a_job_is_a_session_by_its_secret_and_no_backend_refuses_the_secret() -> None:
    assert is_session(spec(**{SECRET_ENV: "s3cret"}))
    assert not is_session(spec(DATA="x"))
    assert spec_problem(spec(**{SECRET_ENV: "s3cret"})) is None
    # Every other name of the portal's stays refused in a spec's env.
    assert "may not set QM_JOB_KEY" in (spec_problem(spec(QM_JOB_KEY="x")) or "")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ""), ("", ""), ("/opt/qm/apps-env", "/opt/qm/apps-env")],
    ids=["unset", "empty", "absolute"],
)
def test_apps_env_config_takes_an_absolute_path_or_nothing(value: object, expected: str) -> None:
    assert apps_env_from_config(value, bad) == expected


@pytest.mark.parametrize(
    "value", ["var/apps-env", "/opt/../etc", "/opt/apps/", 7], ids=["relative", "dots", "slash", "int"]
)
def test_apps_env_config_refuses_anything_else_naming_the_key(value: object) -> None:
    with pytest.raises(BackendError, match="apps_env must be an absolute, normalised path"):
        apps_env_from_config(value, bad)


def test_the_apps_bin_goes_first_on_a_sessions_path_only_where_configured() -> None:
    assert session_path("/opt/apps", "/usr/bin:/bin") == "/opt/apps/bin:/usr/bin:/bin"
    assert session_path("", "/usr/bin:/bin") == "/usr/bin:/bin"


def venv(tmp_path: Path, home: str) -> str:
    env = tmp_path / "apps-env"
    (env / "bin").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\nversion = 3.11.2\n")
    return str(env)


@pytest.mark.parametrize(
    ("home", "extra"),
    [("/usr/bin", ()), ("/root/.pyenv/versions/3.11.7/bin", ("/root/.pyenv/versions/3.11.7",))],
    ids=["debian-python-is-the-systems", "a-pyenv-python-is-bound-too"],
)
def test_a_job_sees_the_env_and_the_python_it_was_made_from(tmp_path: Path, home: str, extra: tuple[str, ...]) -> None:
    env = venv(tmp_path, home)
    assert apps_env_paths(env) == (env, *extra)


def test_an_env_without_pyvenv_cfg_is_seen_alone(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    assert apps_env_paths(str(tmp_path)) == (str(tmp_path),)
