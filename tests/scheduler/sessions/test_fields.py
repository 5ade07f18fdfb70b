"""An app's definition (its form fields and the placeholders of its command) and the
values a launch gives its fields."""

from __future__ import annotations

import pytest

from scheduler.models import InteractiveApp
from scheduler.sessions.fields import clean_values, definition_problems

TEXT = {"name": "command", "label": "Command", "kind": "text"}


@pytest.mark.django_db
def test_every_built_in_app_is_well_defined():
    apps = {app.slug: app for app in InteractiveApp.objects.all()}

    assert set(apps) >= {"jupyterlab", "tensorboard", "web-server"}
    for app in apps.values():
        assert definition_problems(app.command, app.form_fields) == {}, app.slug


@pytest.mark.parametrize(
    ("command", "form_fields", "field", "words"),
    [
        pytest.param("serve {port} {dir}", [], "command", "{dir}", id="a placeholder that is no field"),
        pytest.param("serve {port}", [{"name": "port", "kind": "text"}], "form_fields", "taken", id="a reserved name"),
        pytest.param("x", [TEXT, TEXT], "form_fields", "named twice", id="a name twice"),
        pytest.param("x", [{"name": "Bad-Name"}], "form_fields", "lower-case", id="a name that is no placeholder"),
        pytest.param("x", [{"name": "c", "kind": "choice"}], "form_fields", "needs choices", id="a choice of nothing"),
        pytest.param("x", [{"name": "c", "kind": "date"}], "form_fields", "kind must be", id="an unknown kind"),
        pytest.param(
            "x", [{"name": "n", "kind": "integer", "default": "many"}], "form_fields", "default", id="a bad default"
        ),
        pytest.param("x", [{"name": "n", "colour": "red"}], "form_fields", "unknown keys", id="an unknown key"),
        pytest.param("x", {"name": "n"}, "form_fields", "list", id="fields that are no list"),
    ],
)
def test_a_misdefined_app_is_refused_by_its_field(command, form_fields, field, words):
    problems = definition_problems(command, form_fields)

    assert list(problems) == [field]
    assert words in problems[field][0]


def test_bash_s_own_braces_and_the_built_in_placeholders_are_fine():
    assert definition_problems('serve --port {port} --base {base_url} --x "${HOME}" {command}', [TEXT]) == {}


@pytest.mark.parametrize(
    ("field", "given", "value", "problem"),
    [
        pytest.param({"name": "n", "kind": "integer"}, "12", "12", None, id="a whole number"),
        pytest.param({"name": "n", "kind": "integer"}, "1.5", None, "whole number", id="not a whole number"),
        pytest.param({"name": "c", "kind": "choice", "choices": ["a", "b"]}, "b", "b", None, id="a choice"),
        pytest.param({"name": "c", "kind": "choice", "choices": ["a", "b"]}, "z", None, "one of a, b", id="no choice"),
        pytest.param({"name": "t", "default": "d"}, "", "d", None, id="empty takes the default"),
        pytest.param({"name": "t", "required": False}, "", "", None, id="an optional field left empty"),
        pytest.param({"name": "t"}, "a\nb", None, "One line", id="a second line"),
    ],
)
def test_a_launch_s_values(field, given, value, problem):
    values, problems = clean_values([field], {field["name"]: given}, owner=None)

    assert values.get(field["name"]) == value
    said = problems.get(field["name"], [""])[0]
    assert (problem or "") in said and bool(said) == bool(problem)
