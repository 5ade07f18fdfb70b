"""Settings helpers fail loudly on bad values instead of guessing."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_choice, env_float, env_int, env_list, env_rate, env_secret, env_weights


@pytest.mark.parametrize("raw,expected", [("1", True), ("yes", True), ("ON", True), ("0", False), ("off", False)])
def test_env_bool_reads_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("X", raw)
    assert env_bool("X") is expected


@pytest.mark.parametrize(
    "reader,raw",
    [(env_bool, "maybe"), (env_int, "ten"), (env_int, "1.5"), (env_float, "fast")],
)
def test_bad_values_raise_naming_the_variable(monkeypatch, reader, raw):
    monkeypatch.setenv("QM_SETTING", raw)
    with pytest.raises(ImproperlyConfigured, match="QM_SETTING"):
        reader("QM_SETTING", 0) if reader is not env_bool else reader("QM_SETTING")


def test_minimums_are_enforced(monkeypatch):
    monkeypatch.setenv("TICK", "0")
    with pytest.raises(ImproperlyConfigured, match=r">= 0\.1"):
        env_float("TICK", 5.0, minimum=0.1)
    monkeypatch.setenv("N", "-1")
    with pytest.raises(ImproperlyConfigured, match=">= 1"):
        env_int("N", 5, minimum=1)


def test_unset_or_empty_gives_the_default(monkeypatch):
    monkeypatch.delenv("UNSET", raising=False)
    monkeypatch.setenv("EMPTY", "")
    assert env_int("UNSET", 7) == 7 and env_int("EMPTY", 7) == 7
    assert env_list("UNSET", ["a"]) == ["a"]


def test_list_trims_and_drops_empty_items(monkeypatch):
    monkeypatch.setenv("HOSTS", " a.example, ,b.example ")
    assert env_list("HOSTS", []) == ["a.example", "b.example"]


def test_secret_is_required_outside_debug(monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY must be set"):
        env_secret("SECRET_KEY", debug=False, debug_default="x")
    assert env_secret("SECRET_KEY", debug=True, debug_default="dev") == "dev"


def test_choice_names_the_allowed_values(monkeypatch):
    monkeypatch.setenv("MODE", "fast")
    with pytest.raises(ImproperlyConfigured, match="MODE must be one of a, b"):
        env_choice("MODE", "a", ["a", "b"])
    monkeypatch.setenv("MODE", "b")
    assert env_choice("MODE", "a", ["a", "b"]) == "b"


def test_weights_parse_names_and_refuse_bad_entries(monkeypatch):
    monkeypatch.setenv("W", " H100-80GB=2, L4=0.5 ")
    assert env_weights("W") == {"H100-80GB": 2.0, "L4": 0.5}
    for bad in ("H100", "=2", "H100=-1", "H100=fast", "H100=inf", "H100=nan"):
        monkeypatch.setenv("W", bad)
        with pytest.raises(ImproperlyConfigured, match="W must look like"):
            env_weights("W")


@pytest.mark.parametrize("raw", ["30/minute", "5/s", "1000/day", "30/min"])
def test_a_rate_is_a_positive_count_per_period(monkeypatch, raw):
    monkeypatch.setenv("RATE", raw)
    assert env_rate("RATE", "1/minute") == raw


@pytest.mark.parametrize("raw", ["30", "0/minute", "-1/minute", "ten/minute", "30/fortnight"])
def test_a_rate_drf_could_not_read_stops_start_up(monkeypatch, raw):
    monkeypatch.setenv("RATE", raw)
    with pytest.raises(ImproperlyConfigured, match="RATE must look like 30/minute"):
        env_rate("RATE", "1/minute")
