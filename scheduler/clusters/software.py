"""Whether a cluster's nodes have the programs a job template runs (``jupyter``, ``torchrun``),
so the submit page can say so before a job fails with "command not found".

Only a local cluster can be asked: its jobs run on this host with the ``PATH`` they inherit
(``scheduler.backends.local_runner.INHERITED_ENV``), so ``which`` answers for them. The nodes
of a Slurm or Kubernetes cluster cannot be looked at from here, so nothing is claimed for
them (the page then says what the template needs, without a verdict).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable

from scheduler.choices import BackendKind
from scheduler.models import Cluster


def missing_commands(commands: Iterable[str]) -> dict[str, list[str]]:
    """Per enabled local cluster, the ``commands`` its jobs would not find (empty: none missing)."""
    wanted = list(commands)
    if not wanted:
        return {}
    path = os.environ.get("PATH", os.defpath)
    missing = [command for command in wanted if shutil.which(command, path=path) is None]
    clusters = Cluster.objects.filter(enabled=True, kind=BackendKind.LOCAL).values_list("name", flat=True)
    return {name: missing for name in clusters if missing}
