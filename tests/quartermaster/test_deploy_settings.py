"""A production install behind TLS can pass ``manage.py check --deploy`` with nothing to
say, from the environment alone; a bad HTTPS setting stops the portal at start-up,
naming the variable; and the defaults are secure outside DEBUG where that cannot lock a
plain-HTTP install out.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "quartermaster" / "settings.py"
#: The HTTPS variables, so a caller's own environment cannot leak into these tests.
HTTPS_VARIABLES = (
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
)
#: A production portal behind a TLS-terminating proxy, as ``.env.example`` describes it.
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "x9$Lq-" + "b7Tz!kP2#mW4vR8" * 4,
    "ALLOWED_HOSTS": "portal.example.org",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
}


def manage(tmp_path: Path, *argv: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGV`` in a fresh interpreter with ``environment`` over a clean one."""
    base = {key: value for key, value in os.environ.items() if key not in HTTPS_VARIABLES}
    base.pop("DATABASE_URL", None)
    # Set by the browser tests' conftest for Playwright's event loop; no deployment has it.
    base.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env = {**base, "DJANGO_SETTINGS_MODULE": "quartermaster.settings", "QM_VAR_DIR": str(tmp_path), **environment}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def test_a_production_environment_passes_the_deployment_checklist(tmp_path):
    done = manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


def test_without_the_https_settings_the_checklist_still_warns(tmp_path):
    """The test above is not vacuous: it is the environment that silences the warnings."""
    plain = {key: value for key, value in PRODUCTION.items() if key not in HTTPS_VARIABLES}
    done = manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **plain)
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008"):  # no HSTS, no redirect to HTTPS
        assert warning in done.stderr


def test_a_bad_https_setting_stops_start_up_naming_the_variable(tmp_path):
    done = manage(tmp_path, "check", **{**PRODUCTION, "SECURE_HSTS_SECONDS": "abc"})
    assert done.returncode != 0
    assert "SECURE_HSTS_SECONDS must be an integer, got 'abc'" in done.stderr


def settings_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **environment: str) -> dict[str, Any]:
    """The settings module's values for ``environment`` (read in this process, like the
    static-scan test of ``test_settings_env``)."""
    for name in HTTPS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QM_VAR_DIR", str(tmp_path))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))


@pytest.mark.parametrize(
    "variable,value,message",
    [
        ("SESSION_COOKIE_SECURE", "sure", "SESSION_COOKIE_SECURE must be one of 1/0"),
        ("CSRF_COOKIE_SECURE", "2", "CSRF_COOKIE_SECURE must be one of 1/0"),
        ("SECURE_SSL_REDIRECT", "https", "SECURE_SSL_REDIRECT must be one of 1/0"),
        ("SECURE_HSTS_SECONDS", "-1", "SECURE_HSTS_SECONDS must be >= 0"),
        ("SECURE_HSTS_SECONDS", "1y", "SECURE_HSTS_SECONDS must be an integer"),
        ("SECURE_HSTS_PRELOAD", "maybe", "SECURE_HSTS_PRELOAD must be one of 1/0"),
        ("SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto: https", "SECURE_PROXY_SSL_HEADER must look like"),
        ("SECURE_PROXY_SSL_HEADER", "X_FORWARDED_PROTO,https", "SECURE_PROXY_SSL_HEADER must look like"),
        ("SECURE_PROXY_SSL_HEADER", "HTTP_X_FORWARDED_PROTO", "SECURE_PROXY_SSL_HEADER must look like"),
        ("SECURE_PROXY_SSL_HEADER", "HTTP_X_FORWARDED_PROTO,", "SECURE_PROXY_SSL_HEADER must look like"),
    ],
)
def test_each_https_setting_refuses_what_it_cannot_read(monkeypatch, tmp_path, variable, value, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        settings_with(monkeypatch, tmp_path, DEBUG="1", **{variable: value})


def test_outside_debug_cookies_are_secure_but_nothing_locks_plain_http_out(monkeypatch, tmp_path):
    values = settings_with(monkeypatch, tmp_path, DEBUG="0", SECRET_KEY="k" * 60)
    assert values["SESSION_COOKIE_SECURE"] and values["CSRF_COOKIE_SECURE"]
    assert not values["SECURE_SSL_REDIRECT"]
    assert values["SECURE_HSTS_SECONDS"] == 0
    assert values["SECURE_PROXY_SSL_HEADER"] is None  # no client-supplied header is trusted


def test_in_debug_cookies_also_travel_over_plain_http(monkeypatch, tmp_path):
    values = settings_with(monkeypatch, tmp_path, DEBUG="1")
    assert not values["SESSION_COOKIE_SECURE"] and not values["CSRF_COOKIE_SECURE"]


def test_the_proxy_header_is_read_as_django_wants_it(monkeypatch, tmp_path):
    values = settings_with(monkeypatch, tmp_path, DEBUG="1", SECURE_PROXY_SSL_HEADER=" HTTP_X_FORWARDED_PROTO , https ")
    assert values["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
