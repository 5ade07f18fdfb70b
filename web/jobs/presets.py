"""The submit page's templates: the built-in ones (each runs an example program the
project ships in ``examples/``, attached to the job as its files) and the site's own,
which admins save from the submit form itself (``people.models.SiteTemplate``).

A template that runs a program the nodes may lack (``jupyter``) names it in ``requires``;
the page says before submit when a local cluster's nodes do not have it
(``scheduler.clusters.software``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

EXAMPLES = Path(settings.BASE_DIR) / "examples"


@dataclass(frozen=True)
class Preset:
    """A built-in starting point for the submit form."""

    slug: str
    title: str
    description: str
    fields: dict[str, str] = field(default_factory=dict)
    #: Example programs (names in ``examples/``) put in the job's working directory.
    files: tuple[str, ...] = ()
    #: Programs the command runs that a node may not have.
    requires: tuple[str, ...] = ()

    def bundled_files(self) -> dict[str, str]:
        """The example files as the API's ``files`` (name -> text), read when submitted."""
        return {name: (EXAMPLES / name).read_text(encoding="utf-8") for name in self.files}


PRESETS = (
    Preset(
        "ddp",
        "Data-parallel training (DDP)",
        "Two nodes train one model: each rank fits its shard and the ranks average their gradients "
        "every step through rank 0 (torch.distributed when the nodes have PyTorch, else plain TCP).",
        {
            "name": "ddp-train",
            "nodes": "2",
            "gpus_per_node": "1",
            "cpus_per_node": "4",
            "memory_mib_per_node": "8192",
            "walltime_seconds": "30m",
            # The ranks meet at $QM_MASTER_ADDR:$QM_MASTER_PORT (scheduler/backends/job_env.py).
            "command": "python3 ddp_train.py --steps 60",
            "env": "OMP_NUM_THREADS=4",
        },
        files=("ddp_train.py",),
    ),
    Preset(
        "batch-inference",
        "Batch inference",
        "One GPU scores a file of inputs in batches and writes a prediction per input; "
        "as an array, each task takes its share.",
        {
            "name": "batch-infer",
            "gpus_per_node": "1",
            "cpus_per_node": "4",
            "memory_mib_per_node": "8192",
            "walltime_seconds": "30m",
            "command": "python3 batch_infer.py --input reviews.jsonl --output predictions --batch-size 64",
        },
        files=("batch_infer.py", "reviews.jsonl"),
    ),
    Preset(
        "interactive",
        "Interactive session (Jupyter)",
        "JupyterLab as a plain batch job, reached only from its node; for a notebook in your browser "
        "(a Connect button through the portal), launch JupyterLab from Interactive apps instead.",
        {
            "name": "jupyter",
            "gpus_per_node": "1",
            "cpus_per_node": "4",
            "memory_mib_per_node": "16384",
            "walltime_seconds": "8h",
            "command": "jupyter lab --no-browser --ip=0.0.0.0 --port=8888",
        },
        requires=("jupyter",),
    ),
    Preset(
        "script",
        "Plain script",
        "A shell script on one GPU: says where it runs and what it was given.",
        {
            "name": "script",
            "gpus_per_node": "1",
            "walltime_seconds": "10m",
            "script": (
                "#!/bin/bash\nset -euo pipefail\n"
                'echo "job $QM_JOB_KEY on $QM_NODELIST with GPUs ${CUDA_VISIBLE_DEVICES:-none}"\n'
                'echo "working directory: $PWD"\n'
            ),
        },
    ),
)
PRESETS_BY_SLUG = {p.slug: p for p in PRESETS}
