"""Trace replay quality and speed per policy: the simulator's figures plus ``sim_wall_s``.

Usage: ``python benchmarks/replay.py TRACE.csv [simulator options]``, e.g.
``python benchmarks/replay.py /work/shared/traces/philly/window-oct-nov.csv --nodes 88
--gpus-per-node 8 --policy fifo,fifo-backfill,fairshare-backfill``.

Prints every line of ``python -m scheduler.replay`` (``sim_avg_jct_s``,
``sim_avg_wait_s``, ``sim_p99_wait_s``, ``sim_utilization``, ``sim_jain``,
``sim_makespan_s``, ``sim_preemptions``, ``sim_lost_gpu_s`` among them, with ``policy``
and ``trace``), and per policy its wall time as ``replay_wall_s`` and ``sim_wall_s``;
then one ``replay_core`` line: whether the scheduling core ran compiled
(``scheduler/core/compiled.py``), since that sets the wall times.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler.core import compiled
from scheduler.replay.cli import main as simulate


def main(argv: list[str] | None = None) -> int:
    status = simulate(argv)
    line = {"metric": "replay_core", "value": compiled.state == "compiled", "unit": "bool", "core": compiled.state}
    print(json.dumps(line))
    return status


if __name__ == "__main__":
    sys.exit(main())
