"""Charts as a person sees them: on a cluster of many nodes the heatmap names every node
down its side, one row each, never one name over another."""

from __future__ import annotations

import pytest

from scheduler.models import Gpu, Node

pytestmark = [pytest.mark.slow]


def boxes_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] + a["width"] > b["x"] + 0.5
        and b["x"] + b["width"] > a["x"] + 0.5
        and a["y"] + a["height"] > b["y"] + 0.5
        and b["y"] + b["height"] > a["y"] + 0.5
    )


def test_the_heatmap_node_names_do_not_overlap_on_a_cluster_of_many_nodes(transactional_db, world, login, shot):
    for i in range(1, 25):
        node = Node.objects.create(cluster=world.cluster, name=f"gpu-node-{i:02d}", cpus=64, memory_mib=512_000)
        Gpu.objects.bulk_create(
            Gpu(node=node, index=g, uuid=f"GPU-{i}-{g}", model="A100-80GB", memory_mib=81920) for g in range(8)
        )
    page = login("admin")
    page.goto("/manage/cluster/")
    page.wait_for_function("() => document.querySelector('#chart-gpu-heatmap')?.data?.length > 0")
    page.locator("#chart-gpu-heatmap").scroll_into_view_if_needed()
    shot(page, "cluster-heatmap-27-nodes")
    labels = page.locator("#chart-gpu-heatmap .ytick text")
    boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
    assert len(boxes) == 27  # every node is named
    for i, first in enumerate(boxes):
        for second in boxes[i + 1 :]:
            assert not boxes_overlap(first, second)
    title = page.locator("#chart-gpu-heatmap .gtitle").bounding_box()
    texts = page.locator("#chart-gpu-heatmap .xtick text, #chart-gpu-heatmap .xtitle, #chart-gpu-heatmap .ytitle")
    assert not any(boxes_overlap(title, texts.nth(i).bounding_box()) for i in range(texts.count()))
    plot = page.locator("#chart-gpu-heatmap .nsewdrag").first.bounding_box()
    assert all(box["x"] + box["width"] <= plot["x"] + 1 for box in boxes)  # beside the plot, not on it


def test_the_queue_charts_legend_stays_off_the_data(transactional_db, world, login, shot):
    from datetime import timedelta

    from django.utils import timezone

    from monitoring.queue import record_queue
    from tests.builders import make_account, submit

    for name in ("vision", "speech", "robotics", "genomics"):
        account = make_account(name)
        submit(world.alice if name == "vision" else world.bob, account, nodes=3, gpus_per_node=8)
    submit(world.alice, world.lab, nodes=3, gpus_per_node=8)
    now = timezone.now()
    for minutes in range(0, 180, 10):
        record_queue(now - timedelta(minutes=minutes))
    page = login("admin")
    for width in (1400, 1000, 700):  # two charts a row, then one
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto("/manage/cluster/")
        page.wait_for_function("() => document.querySelector('#chart-queue')?.data?.length > 0")
        page.locator("#chart-queue").scroll_into_view_if_needed()
        shot(page, f"cluster-queue-legend-{width}")
        legend = page.locator("#chart-queue .legend").bounding_box()
        plots = page.locator("#chart-queue .nsewdrag")
        assert plots.count() == 2
        ticks = page.locator("#chart-queue .xtick text")
        below = [plots.nth(i).bounding_box() for i in range(plots.count())]
        below += [ticks.nth(i).bounding_box() for i in range(ticks.count())]
        for box in below:  # under the plots and their time axis, over none of them
            assert legend["y"] >= box["y"] + box["height"] - 0.5, (width, legend, box)
        chart = page.locator("#chart-queue").bounding_box()
        assert legend["y"] + legend["height"] <= chart["y"] + chart["height"] + 0.5  # and not cut off


def test_mig_slices_do_not_stretch_the_heatmaps_gpu_axis(transactional_db, world, login, shot):
    node = Node.objects.create(cluster=world.cluster, name="a100-mig", cpus=64, memory_mib=512_000)
    for i in range(8):
        gpu = Gpu.objects.create(node=node, index=i, uuid=f"GPU-m{i}", model="A100-40GB", memory_mib=40960)
        Gpu.objects.bulk_create(
            Gpu(
                node=node,
                index=8 + 2 * i + j,
                uuid=f"MIG-{i}-{j}",
                model="A100-40GB",
                memory_mib=20480,
                mig_profile="3g.20gb",
                parent=gpu,
            )
            for j in range(2)
        )
    page = login("admin")
    page.goto("/manage/cluster/")
    page.wait_for_function("() => document.querySelector('#chart-gpu-heatmap')?.data?.length > 1")
    page.locator("#chart-gpu-heatmap").scroll_into_view_if_needed()
    shot(page, "cluster-heatmap-mig")
    ticks = page.evaluate(
        "() => [...document.querySelectorAll('#chart-gpu-heatmap .ytick text')].map(t => t.textContent)"
    )
    assert sorted(ticks, key=int) == [str(i) for i in range(8)]  # GPUs 0-7 on every node, slices within them


def test_an_empty_queue_chart_says_so_and_leaves_no_blank_band(transactional_db, world, login, shot):
    page = login("admin")
    page.goto("/manage/cluster/")
    page.wait_for_function("() => document.querySelector('#chart-queue .annotation-text')")
    page.locator("#chart-queue").scroll_into_view_if_needed()
    shot(page, "cluster-empty-queue")
    assert page.locator("#chart-queue .annotation-text").text_content() == "No job waited or ran in this range."
    # The words sit inside the plots' area, and under the running plot's time axis comes
    # only the figure's own margin: no room kept for a legend that has no entries.
    note = page.locator("#chart-queue .annotation-text").bounding_box()
    plots = page.locator("#chart-queue .nsewdrag")
    top, bottom = plots.nth(0).bounding_box(), plots.nth(plots.count() - 1).bounding_box()
    assert min(top["y"], bottom["y"]) <= note["y"] <= max(top["y"] + top["height"], bottom["y"] + bottom["height"])
    chart = page.locator("#chart-queue").bounding_box()
    lowest = max(box["y"] + box["height"] for box in (top, bottom))
    assert chart["y"] + chart["height"] - lowest <= 60, (chart, lowest)
