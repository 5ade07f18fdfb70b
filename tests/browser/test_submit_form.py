"""The submit form as a person sees it: every label above its own control, help and
errors under their field, no field over another, at a desktop width and on a phone;
and every mistake of a submission shown at once, each under its field."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from scheduler.models import Job
from tests.builders import submit

pytestmark = [pytest.mark.slow]

WIDTHS = {"desktop": 1400, "narrow": 390}
#: One mistake per field, of different kinds: the form's own check, the parser of a
#: typed field, and the API serializer's rules.
MISTAKES = {
    "nodes": "-1",
    "gpus_per_node": "abc",
    "walltime_seconds": "soon",
    "gpu_share": "2",
    "dependencies": "whenever:12",
}


def box(locator: Any) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not visible"
    return dict(found)


def inside(inner: dict[str, float], outer: dict[str, float], slack: float = 1.0) -> bool:
    return (
        inner["x"] >= outer["x"] - slack
        and inner["y"] >= outer["y"] - slack
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + slack
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + slack
    )


def overlap(a: dict[str, float], b: dict[str, float], slack: float = 1.0) -> bool:
    return (
        a["x"] + a["width"] > b["x"] + slack
        and b["x"] + b["width"] > a["x"] + slack
        and a["y"] + a["height"] > b["y"] + slack
        and b["y"] + b["height"] > a["y"] + slack
    )


def assert_fields_laid_out(page: Any, form: str = "#submit-form") -> int:
    """Each field's label, control, help and errors sit in the field's own box, the control
    under its label and in its column, and no two fields' boxes overlap."""
    fields = page.locator(f"{form} .field")
    boxes = []
    for i in range(fields.count()):
        field = fields.nth(i)
        name = field.get_attribute("id")
        outer = box(field)
        label, control = box(field.locator("legend, label").first), box(field.locator("input, select, textarea").first)
        assert inside(label, outer) and inside(control, outer), f"{name}: label or control outside its field"
        assert control["y"] >= label["y"] + label["height"] - 1, f"{name}: the control is not under its label"
        assert abs(control["x"] - label["x"]) <= 6, f"{name}: the control is not in its label's column"
        for extra in ("helptext", "errorlist"):
            for j in range(field.locator(f".{extra}").count()):
                part = box(field.locator(f".{extra}").nth(j))
                assert inside(part, outer), f"{name}: its {extra} is outside the field"
                assert part["y"] >= control["y"] + control["height"] - 1, f"{name}: its {extra} is above the control"
        boxes.append((name, outer))
    for i, (a, first) in enumerate(boxes):
        for b, second in boxes[i + 1 :]:
            assert not overlap(first, second), f"{a} and {b} overlap"
    return len(boxes)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_label_sits_over_its_own_control_and_errors_under_their_field(world, login, shot, width):
    page = login("alice")
    page.set_viewport_size({"width": WIDTHS[width], "height": 1000})
    page.goto("/jobs/new/?template=script")
    assert assert_fields_laid_out(page) >= 18
    shot(page, f"submit-form-{width}")

    for name, value in MISTAKES.items():
        page.fill(f"#id_{name}", value)
    page.click("button[value=submit]")
    page.wait_for_selector("#submit-form .has-errors")
    assert assert_fields_laid_out(page) >= 18
    shot(page, f"submit-form-{width}-errors")
    with_errors = page.eval_on_selector_all("#submit-form .has-errors", "fields => fields.map(f => f.id)")
    assert sorted(with_errors) == sorted(f"field-{name}" for name in MISTAKES)  # all at once, each its own


@pytest.mark.parametrize("width", WIDTHS)
def test_a_waiting_job_is_edited_on_its_own_page_and_a_raise_is_refused_under_its_field(world, login, shot, width):
    job = submit(world.alice, world.lab, name="to-edit", walltime_seconds=7200)
    page = login("alice")
    page.set_viewport_size({"width": WIDTHS[width], "height": 1000})
    page.goto(f"/jobs/{job.id}/")
    page.click("#edit-job")
    assert assert_fields_laid_out(page, "#edit-form") == 7
    page.fill("#id_walltime_seconds", "3h")
    page.click("#edit-form button[type=submit]")
    page.wait_for_selector("#edit-form .has-errors")
    assert "Only staff may raise" in page.locator("#field-walltime_seconds .errorlist").inner_text()
    assert assert_fields_laid_out(page, "#edit-form") == 7
    shot(page, f"job-edit-{width}-error")

    page.fill("#id_walltime_seconds", "1h")
    page.fill("#id_name", "edited")
    page.click("#edit-form button[type=submit]")
    page.wait_for_url(f"**/jobs/{job.id}/")
    assert "changed name, walltime" in page.locator(".messages").inner_text()
    job.refresh_from_db()
    assert (job.name, job.walltime_seconds) == ("edited", 3600)


def test_files_are_uploaded_with_the_form_and_a_binary_one_is_refused_under_its_field(world, login, tmp_path):
    from pathlib import Path

    from scheduler.models import Job

    train = Path(__file__).resolve().parents[2] / "examples" / "train.py"
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    page = login("alice")
    page.goto("/jobs/new/")
    page.fill("#id_name", "with-files")
    page.fill("#id_walltime_seconds", "10m")
    page.fill("#id_command", "python3 train.py")
    page.set_input_files("#id_job_files", [str(train), str(binary)])
    page.click("button[value=submit]")
    page.wait_for_selector("#field-job_files .errorlist")
    assert "weights.bin is not a text file" in page.locator("#field-job_files .errorlist").inner_text()

    page.set_input_files("#id_job_files", [str(train)])
    page.click("button[value=submit]")
    page.wait_for_url("**/jobs/*/")
    assert Job.objects.get(name="with-files").files == {"train.py": train.read_text()}


def test_text_too_big_for_one_request_is_said_under_its_field_and_nothing_typed_is_lost(world, login, shot):
    """Over DATA_UPLOAD_MAX_MEMORY_SIZE the server could only refuse the whole body (413)
    and the form's contents would be gone: the page says so first, under the field."""
    page = login("alice")
    page.goto("/jobs/new/")
    page.fill("#id_name", "big")
    page.fill("#id_walltime_seconds", "1h")
    script = "#!/bin/bash\n" + "echo " + "x" * 80 + "\n" * 1 + ("# " + "y" * 98 + "\n") * 30_000  # ~3 MB
    page.eval_on_selector("#id_script", "(e, text) => { e.value = text; }", script)  # pasted
    page.click("button[value=submit]")
    expect(page.locator("#field-script .errorlist.too-large")).to_contain_text("at most 2.6 MB")
    assert page.url.endswith("/jobs/new/")
    assert page.eval_on_selector("#id_script", "e => e.value.length") == len(script)
    shot(page, "submit-form-too-big")
    assert not Job.objects.filter(name="big").exists()
