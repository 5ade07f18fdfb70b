"""The rendezvous program (tests/backends/rendezvous.py) as a job's batch script."""

from pathlib import Path

PROGRAM = (Path(__file__).parent / "rendezvous.py").read_text()


def rendezvous_script() -> str:
    """A bash script that runs the rendezvous with the machine's python3 (fed on stdin,
    so nothing has to be copied to the nodes)."""
    return f"#!/bin/bash\nset -euo pipefail\npython3 - <<'QM_RENDEZVOUS'\n{PROGRAM}\nQM_RENDEZVOUS\n"
