"""What every benchmark shares: a throwaway database, Django set-up, and output.

Contract of a benchmark command: each figure is one JSON object on one line of stdout,
``{"metric": ..., "value": ..., "unit": ..., **context}``; progress and diagnostics go to
stderr only, so ``python benchmarks/x.py > figures.jsonl`` keeps a clean record.

A benchmark never touches the user's real data. :func:`throwaway_database` reads the
``DATABASE_URL`` the user gave only to learn *which server* to use, then:

- SQLite (or no ``DATABASE_URL``): a fresh file in a temporary directory;
- PostgreSQL: ``CREATE DATABASE qm_bench_<pid>`` on the given server (connecting to the
  database named in the URL, which is only read from), dropped at the end.

``QM_VAR_DIR`` points at the temporary directory too, so nothing is written under the
checkout's ``var/``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO_ROOT = Path(__file__).resolve().parent.parent
_POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}


# --- Output ---------------------------------------------------------------------------


def emit(metric: str, value: float, unit: str, **context: Any) -> None:
    """Print one figure as one JSON line on stdout (floats rounded to 3 decimals)."""
    if isinstance(value, float):
        value = round(value, 3)
    record = {"metric": metric, "value": value, "unit": unit}
    record.update({k: round(v, 3) if isinstance(v, float) else v for k, v in context.items()})
    print(json.dumps(record), flush=True)


def log(message: str) -> None:
    """Progress for humans, on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(pct / 100 * len(ordered))))
    return ordered[rank - 1]


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples)


# --- The throwaway database -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Database:
    """The benchmark's own database, already migrated and set up in Django."""

    url: str  # a DATABASE_URL for subprocesses (gunicorn)
    vendor: str  # "sqlite" or "postgresql", as ``connection.vendor`` says
    var_dir: Path  # temporary QM_VAR_DIR, removed at the end


def _postgres_url(source: str, name: str | None = None) -> str:
    """``source`` as a libpq URI, its database replaced by ``name`` when given."""
    parts = urlsplit(source)
    return urlunsplit(("postgresql", parts.netloc, f"/{name}" if name else parts.path, parts.query, ""))


def _create_postgres(admin_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(_postgres_url(admin_url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _drop_postgres(admin_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(_postgres_url(admin_url), autocommit=True) as conn:
        try:
            # FORCE (PostgreSQL 13+) also ends connections a killed server left behind.
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        except psycopg.errors.SyntaxError:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def _raise_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # so ``finally`` blocks clean up on ``kill``


@contextmanager
def throwaway_database() -> Iterator[Database]:
    """Create, migrate and set up Django on a private database; drop it afterwards.

    Steps:
    1. Point ``QM_VAR_DIR`` at a new temporary directory.
    2. Create the database: a SQLite file there, or ``qm_bench_<pid>`` on the PostgreSQL
       server of the given ``DATABASE_URL``; point ``DATABASE_URL`` at it.
    3. ``django.setup()`` and ``migrate``.
    4. On exit (also on an error, Ctrl-C or SIGTERM): close Django's connections, drop
       the database, remove the directory.

    The benchmark process runs with ``DEBUG=0`` whatever the caller set, because with
    ``DEBUG=1`` Django keeps every query in memory and the timings would include that.
    Raises ``SystemExit`` for a ``DATABASE_URL`` of another vendor.
    """
    given = os.environ.get("DATABASE_URL", "").strip()
    scheme = urlsplit(given).scheme.lower() if given else "sqlite"
    if scheme not in _POSTGRES_SCHEMES and scheme != "sqlite":
        raise SystemExit(f"benchmarks support SQLite and PostgreSQL, not {scheme!r}")

    previous_handler = signal.signal(signal.SIGTERM, _raise_on_sigterm)
    var_dir = Path(tempfile.mkdtemp(prefix="qm_bench_"))
    pg_name = f"qm_bench_{os.getpid()}" if scheme in _POSTGRES_SCHEMES else ""
    django_ready = False
    try:
        if pg_name:
            _create_postgres(given, pg_name)
            url = _postgres_url(given, pg_name)
            log(f"created PostgreSQL database {pg_name} on {urlsplit(given).hostname}")
        else:
            url = f"sqlite:///{var_dir / 'bench.sqlite3'}"
            log(f"using SQLite database {var_dir / 'bench.sqlite3'}")
        os.environ.update(
            DATABASE_URL=url,
            QM_VAR_DIR=str(var_dir),
            DEBUG="0",
            DJANGO_SETTINGS_MODULE="quartermaster.settings",
        )
        os.environ.setdefault("SECRET_KEY", "benchmark-only-not-secret")
        os.environ.setdefault("LOG_LEVEL", "WARNING")

        import django
        from django.core.management import call_command
        from django.db import connection

        django.setup()
        django_ready = True
        began = time.perf_counter()
        call_command("migrate", verbosity=0, interactive=False)
        log(f"migrated in {time.perf_counter() - began:.1f}s")
        yield Database(url=url, vendor=connection.vendor, var_dir=var_dir)
    finally:
        if django_ready:
            from django.db import connections

            connections.close_all()
        if pg_name:
            try:
                _drop_postgres(given, pg_name)
                log(f"dropped PostgreSQL database {pg_name}")
            except Exception as exc:  # report, never mask the benchmark's own error
                log(f"could not drop database {pg_name}: {exc}; drop it by hand")
        shutil.rmtree(var_dir, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous_handler)


def vacuum_analyze() -> None:
    """PostgreSQL: reclaim dead rows and refresh planner statistics, as autovacuum would
    between a bulk load (or a bulk reset) and the next measurement. No-op on SQLite.

    Without it, each bulk reset of the benchmark leaves a table-ful of dead row versions
    behind, and later runs measure the bloat rather than the code.
    """
    from django.db import connection

    if connection.vendor == "postgresql" and connection.get_autocommit():
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
