"""Trace replay quality and speed per policy: the simulator's figures plus ``sim_wall_s``.

Usage: ``python benchmarks/replay.py TRACE.csv [simulator options]``, e.g.
``python benchmarks/replay.py /work/shared/traces/philly/window-oct-nov.csv --nodes 88
--gpus-per-node 8 --policy fifo,fifo-backfill,fairshare-backfill``.

Prints every line of ``python -m scheduler.core.simulate`` (``sim_avg_jct_s``,
``sim_avg_wait_s``, ``sim_p99_wait_s``, ``sim_utilization``, ``sim_jain``,
``sim_makespan_s``, ``sim_preemptions``, ``sim_lost_gpu_s`` among them, with ``policy``
and ``trace``) and, after each ``replay_wall_s``, the same value as ``sim_wall_s``. The
simulator itself leaves the wall time out of its ``sim_*`` lines so that one replay
always prints the same figures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduler.core.simulate import main as simulate


class _WithWallTime:
    """Passes lines through; after a ``replay_wall_s`` line, writes it again as ``sim_wall_s``."""

    def write(self, text: str, /) -> int:
        sys.stdout.write(text)
        for line in text.splitlines():
            figure = json.loads(line)
            if figure["metric"] == "replay_wall_s":
                sys.stdout.write(json.dumps({**figure, "metric": "sim_wall_s"}) + "\n")
        sys.stdout.flush()
        return len(text)


def main(argv: list[str] | None = None) -> int:
    return simulate(argv, _WithWallTime())


if __name__ == "__main__":
    sys.exit(main())
