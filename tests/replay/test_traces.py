"""The synthetic trace generator of tests/traces.py: deterministic, Philly-shaped, loadable."""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from tests.traces import COLUMNS, synthetic_trace, write_trace


def test_the_same_seed_gives_the_same_trace() -> None:
    assert synthetic_trace(7, 500) == synthetic_trace(7, 500)
    assert synthetic_trace(7, 500) != synthetic_trace(8, 500)
    # a longer trace of the same seed starts with the shorter one
    assert synthetic_trace(7, 800)[:500] == synthetic_trace(7, 500)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_trace_has_the_shape_of_philly(seed: int) -> None:
    rows = synthetic_trace(seed, 2000)
    ids = [r.job_id for r in rows]
    submits = [r.submit_s for r in rows]
    assert ids == list(range(1, 2001))
    assert submits[0] == 0 and submits == sorted(submits)
    assert 2 * 86400 < submits[-1] < 4 * 86400, "2,000 jobs over about three days"
    assert any(a == b for a, b in pairwise(submits)), "some jobs are submitted together"

    gpus = Counter(r.num_gpus for r in rows)
    assert set(gpus) <= set(range(1, 65)) and max(gpus) == 64
    assert gpus[1] / len(rows) > 0.7
    powers = sum(n for g, n in gpus.items() if g & (g - 1) == 0)
    assert 0.95 < powers / len(rows) < 1, "powers of two dominate, a few gangs are not"

    durations = sorted(r.duration_s for r in rows)
    assert min(durations) >= 1
    assert statistics.median(durations) < 3600, "most jobs run seconds to minutes"
    assert sum(d > 12 * 3600 for d in durations) >= 10, "a few run many hours"

    accounts = Counter(r.vc for r in rows)
    assert len(accounts) == 10
    assert all(len(vc) == 6 and int(vc, 16) >= 0 for vc in accounts)
    assert accounts.most_common(1)[0][1] > len(rows) / 4, "one team submits much of the trace"


def test_knobs() -> None:
    rows = synthetic_trace(4, 1000, accounts=3, mean_interarrival_s=10, max_gpus=8, first_job_id=100)
    assert rows[0].job_id == 100 and rows[-1].job_id == 1099
    assert len({r.vc for r in rows}) == 3
    assert max(r.num_gpus for r in rows) <= 8
    assert rows[-1].submit_s < synthetic_trace(4, 1000)[-1].submit_s
    with pytest.raises(ValueError):
        synthetic_trace(1, 10, accounts=0)


def test_the_csv_has_the_philly_columns(tmp_path: Path) -> None:
    rows = synthetic_trace(1, 20)
    path = write_trace(tmp_path / "t.csv", rows)
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        assert next(reader) == list(COLUMNS) == ["job_id", "submit_s", "duration_s", "num_gpus", "vc"]
        assert [tuple(line) for line in reader] == [tuple(str(v) for v in r) for r in rows]
