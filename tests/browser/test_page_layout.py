"""Tables as a person sees them at a desktop width (1400 px): every column on the screen,
one line per row where a value is short (a date), measured from the boxes Chromium lays out."""

from __future__ import annotations

import pytest

from scheduler.tick import estimates
from tests.builders import submit

pytestmark = [pytest.mark.slow]


def test_the_admins_job_list_fits_the_window(transactional_db, world, login, shot):
    from scheduler.tick.run import run_tick

    world.admin.__class__.objects.create_superuser("root", "root@example.org", "pw-root")
    for n in range(3):
        submit(world.alice, world.lab, name=f"a-rather-long-job-name-for-training-run-{n}", gpus_per_node=8, nodes=4)
    run_tick()  # they wait, each with its pending reason
    page = login("root")
    page.goto("/admin/scheduler/job/")
    shot(page, "admin-job-list")
    # The admin scrolls a wide table inside its own box: every column shows only when
    # the table is no wider than that box (and the box within the window).
    table = page.locator("#result_list").bounding_box()
    frame = page.locator("#changelist .results").bounding_box()
    assert table["x"] + table["width"] <= frame["x"] + frame["width"] + 0.5, (table, frame)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400


#: How many lines each cell of a column takes, by the distinct tops of its text's boxes.
LINES_PER_CELL = """(column) => [...document.querySelectorAll('#jobs tbody tr')].map(row => {
    const cell = row.children[column];
    const range = document.createRange();
    range.selectNodeContents(cell);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
})"""


def test_the_job_lists_dates_stay_on_one_line_at_a_desktop_width(transactional_db, world, login, shot):
    from scheduler.tick.run import run_tick

    world.cluster.config = {**world.cluster.config, "simulate": 60}
    world.cluster.save()
    # Rows as wide as the demo's: long names, a GPU model, a reason with its estimate.
    for n in range(2):
        submit(world.alice, world.lab, name=f"llama-finetune-lr3e-4-warmup-sweep-{n}", gpus_per_node=8)
    run_tick()
    for n in range(2):
        submit(
            world.alice, world.lab, name=f"resnet50-imagenet-baseline-seed-{n}", gpus_per_node=8, gpu_model="H100-80GB"
        )
    run_tick()
    estimates.refresh_estimates()
    page = login("alice")
    page.goto("/jobs/")
    shot(page, "job-list-1400")
    headers = page.locator("#jobs thead th").all_inner_texts()
    for title in ("Submitted", "Started", "Ended"):
        lines = page.evaluate(LINES_PER_CELL, headers.index(title))
        assert lines and max(lines) <= 1, (title, lines)


#: Whether a row's items lie on one line: each one's box spans the first one's middle
#: (a smaller label sits a pixel or two lower on the same baseline; a wrapped item is a line below).
ONE_LINE = """(selector) => {
    const boxes = [...document.querySelectorAll(selector)].map(item => item.getBoundingClientRect());
    const middle = boxes[0].top + boxes[0].height / 2;
    return boxes.length > 1 && boxes.every(box => box.top <= middle && middle <= box.bottom);
}"""


@pytest.mark.parametrize("who", ["admin", "alice"])
def test_the_header_is_one_line_of_links_and_the_staffs_pages_one_more(transactional_db, world, login, shot, who):
    page = login(who)
    page.goto("/")
    shot(page, f"header-{who}")
    assert page.evaluate(ONE_LINE, "header > .brand, header > nav:not(.manage) > *")
    header = page.locator("header").bounding_box()
    if who == "alice":
        assert page.locator("header nav.manage").count() == 0
        return
    assert page.evaluate(ONE_LINE, "header nav.manage > *")
    first = page.locator("header > nav:not(.manage)").bounding_box()
    manage = page.locator("header nav.manage").bounding_box()
    assert manage["y"] >= first["y"] + first["height"]  # under the first row, over nothing of it
    assert manage["y"] + manage["height"] <= header["y"] + header["height"] + 0.5


def test_the_nodes_page_with_a_gpu_process_finding_fits_the_window(transactional_db, world, login, shot):
    from datetime import UTC, datetime

    from monitoring.audit import audit_processes
    from tests.builders import gpu_process, report_processes

    now = datetime.now(UTC)
    report_processes("h100-02", 6, [gpu_process(4321, uid=4000, user="mallory", command="xmrig", mib=2048)], now)
    audit_processes(now)
    page = login("admin")
    page.goto("/manage/nodes/")
    shot(page, "manage-nodes-gpu-process")
    finding = page.locator("#node-h100-02 .finding")
    assert "GPU 6: foreign process" in finding.inner_text()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
