"""Field names in words: what a page or a message shows for ``max_gpus`` (``max GPUs``),
``walltime_seconds`` (``walltime``), ``best_node_free_gpus`` (``free GPUs on the best
node``). One home, so an edit message, a job event, the audit log and the evidence under
"why it waits" name a field the same way, and never by its name in the code."""

from __future__ import annotations

#: Names that read wrong word by word.
LABELS = {
    "walltime_seconds": "walltime",
    "max_walltime_seconds": "max walltime (s)",
    "best_node_free_gpus": "free GPUs on the best node",
    "best_node": "best node",
    "memory_mib_per_node": "memory per node (MiB)",
    "max_memory_mib": "max memory (MiB)",
    "node_labels": "node labels",
    "gpu_model": "GPU model",
}

#: Words spelled otherwise in prose.
WORDS = {"gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "cpus": "CPUs", "qos": "QOS", "mib": "(MiB)", "uid": "uid"}


def field_label(name: str) -> str:
    """``max_running_jobs`` -> ``max running jobs``: a field's name as people read it."""
    return LABELS.get(name) or " ".join(WORDS.get(word, word) for word in str(name).split("_"))


def field_labels(names: list[str] | tuple[str, ...]) -> str:
    """``name, walltime``: several fields in words, in the given order."""
    return ", ".join(field_label(name) for name in names)
