"""The environment every backend gives a job: one contract, so that a script written for
one cluster runs unchanged on another, multi-node training included.

Every job gets::

    QM_JOB_KEY        the attempt's key
    QM_NODELIST       its nodes, comma-separated
    QM_GPUS           node:gpu,gpu;... as placed
    QM_NNODES         how many nodes (= processes started: one per node)
    QM_NODE_RANK      this node's rank, 0 .. QM_NNODES-1
    QM_GPUS_PER_NODE  GPUs on each node (0: a CPU-only job)
    QM_MASTER_ADDR    where rank 0 runs, reachable from every rank
    QM_MASTER_PORT    a TCP port for rank 0's rendezvous

and a task of a job array also::

    QM_ARRAY_JOB_ID     the array's id (its first task's job id)
    QM_ARRAY_TASK_ID    this task's index (``--array=0-999``: 0 .. 999)
    QM_ARRAY_TASK_COUNT how many tasks the array has

(on Slurm also under Slurm's names, ``SLURM_ARRAY_JOB_ID``, ``SLURM_ARRAY_TASK_ID``
and ``SLURM_ARRAY_TASK_COUNT``, so a script written for ``sbatch --array`` runs as is)

and the names torchrun and PyTorch Lightning read: ``MASTER_ADDR``, ``MASTER_PORT``,
``NODE_RANK`` and ``WORLD_SIZE`` (processes in all: one per GPU, ``QM_NNODES *
max(1, QM_GPUS_PER_NODE)``, as DDP runs them). A typical multi-node command::

    torchrun --nnodes "$QM_NNODES" --node-rank "$QM_NODE_RANK" \\
        --nproc-per-node "$QM_GPUS_PER_NODE" \\
        --master-addr "$QM_MASTER_ADDR" --master-port "$QM_MASTER_PORT" train.py

How each backend starts one process per node and finds the master: the local backend
starts each rank itself on this machine (master 127.0.0.1, a free port); Slurm's batch
script starts one task per node with ``srun`` and takes the rank from ``SLURM_NODEID``
and the master from ``SLURM_LAUNCH_NODE_IPADDR`` (the batch host, where rank 0 runs);
Kubernetes runs an Indexed Job (the completion index is the rank) with a headless
Service, so rank 0's pod has a DNS name. These names are the portal's: a job's own
``env`` may not set them (the API says so with a 400).
"""

from __future__ import annotations

from scheduler.backends.base import JobSpec

#: The port rank 0 listens on where every node has its own address (Kubernetes pods);
#: torchrun's own default.
DEFAULT_MASTER_PORT = 29500
#: Names a job's own env may not set: the contract's, and the prefixes workload managers
#: keep for themselves.
RESERVED_NAMES = frozenset({"MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES"})
RESERVED_PREFIXES = ("QM_", "SLURM_", "SBATCH_")
#: An interactive session's secret (``scheduler.sessions``): the portal puts it in its
#: job's ``JobSpec.env`` at dispatch, never stored with the job. A name the portal alone
#: sets in a spec's env (a job's own env may not: the API refuses it as reserved).
SESSION_SECRET_ENV = "QM_SESSION_SECRET"
#: The reserved names the portal itself may put in ``JobSpec.env``.
PORTAL_ENV = frozenset({SESSION_SECRET_ENV})


#: Why, in the words the API and every backend use.
RESERVED_WORDS = (
    f"{', '.join(sorted(RESERVED_NAMES))} and names starting {', '.join(RESERVED_PREFIXES)} are set by the cluster"
)


def is_reserved(name: str) -> bool:
    return name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES)


def gpus_per_node(spec: JobSpec) -> int:
    return len(spec.placements[0].gpu_indices) if spec.placements else 0


def job_env(spec: JobSpec) -> dict[str, str]:
    """What every rank of ``spec`` gets alike (the rank and master come from
    :func:`rank_env` and :func:`master_env`, or the backend's equivalents)."""
    nodes, gpus = len(spec.placements), gpus_per_node(spec)
    return {
        "QM_JOB_KEY": spec.key,
        "QM_NODELIST": ",".join(p.node for p in spec.placements),
        "QM_GPUS": ";".join(f"{p.node}:{','.join(str(i) for i in p.gpu_indices)}" for p in spec.placements),
        "QM_NNODES": str(nodes),
        "QM_GPUS_PER_NODE": str(gpus),
        "WORLD_SIZE": str(nodes * max(1, gpus)),
        **array_env(spec, "QM_"),
    }


def array_env(spec: JobSpec, prefix: str) -> dict[str, str]:
    """A task's place in its array under ``prefix`` (``QM_``, or ``SLURM_`` on Slurm);
    nothing for a plain job."""
    if spec.array is None:
        return {}
    return {
        f"{prefix}ARRAY_JOB_ID": str(spec.array.array_job),
        f"{prefix}ARRAY_TASK_ID": str(spec.array.task_id),
        f"{prefix}ARRAY_TASK_COUNT": str(spec.array.task_count),
    }


def rank_env(rank: str) -> dict[str, str]:
    """``rank`` is a number, or a shell expression a backend's script expands."""
    return {"QM_NODE_RANK": rank, "NODE_RANK": rank}


def master_env(addr: str, port: str) -> dict[str, str]:
    return {"QM_MASTER_ADDR": addr, "QM_MASTER_PORT": port, "MASTER_ADDR": addr, "MASTER_PORT": port}
