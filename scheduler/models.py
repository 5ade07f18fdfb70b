"""Clusters, nodes, GPUs, jobs and their audit trail.

Job state moves only through ``scheduler.jobs.transitions`` (conditional updates that
report whether they won); the other rows are written by ``scheduler.jobs``,
``scheduler.tick`` and ``scheduler.clusters``. The models carry no state-changing
methods.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from scheduler.choices import BackendKind, EventKind, JobState, NodeState
from scheduler.core.hours import job_gpus


class Cluster(models.Model):
    """One workload manager we dispatch to, with its adapter's configuration."""

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=BackendKind.choices, default=BackendKind.LOCAL)
    config = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: Whether the last poll reached the workload manager; while it does not, nothing is
    #: placed on the cluster's nodes and waiting jobs say why.
    reachable = models.BooleanField(default=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_contact_at = models.DateTimeField(null=True, blank=True)
    #: Backend jobs with our key that no active job holds, as of the last poll.
    orphans = models.JSONField(default=list, blank=True)
    #: This portal's name on the workload manager, so that two portals sharing one
    #: cluster (staging and production, say) each see and sweep only their own jobs.
    #: Random per row, kept by backups: a restored portal still knows its jobs.
    instance = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A host with GPUs. Names are unique across clusters, as hostnames are."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=128, unique=True)
    state = models.CharField(max_length=8, choices=NodeState.choices, default=NodeState.UP)
    reason = models.CharField(max_length=200, blank=True)
    cpus = models.PositiveIntegerField(default=1)
    memory_mib = models.PositiveBigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    #: When the node was last found down (by the backend or for a missing heartbeat);
    #: its jobs are requeued only once it stays down past a grace period.
    down_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster__name", "name"]

    def __str__(self) -> str:
        return self.name


class Gpu(models.Model):
    """A physical GPU, or a MIG slice of one when ``parent`` is set."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveIntegerField()
    uuid = models.CharField(max_length=64, blank=True)
    model = models.CharField(max_length=64)
    memory_mib = models.PositiveIntegerField()
    compute_capability = models.CharField(max_length=8)
    mig_profile = models.CharField(max_length=32, blank=True)
    sharing = models.CharField(
        max_length=16,
        blank=True,
        choices=[("time-slicing", "time-slicing"), ("mps", "MPS")],
        help_text="Sharing mode (time-slicing or MPS): fractional jobs (gpu_share) may share it; empty: none.",
    )
    exclusive = models.BooleanField(
        default=True,
        help_text="A job may hold it whole, alone (false: the workload manager only hands out replicas of it).",
    )
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="slices")

    class Meta:
        ordering = ["node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_node_index")]

    def __str__(self) -> str:
        label = f"{self.node.name}:{self.index} {self.model}"
        return f"{label} ({self.mig_profile})" if self.mig_profile else label

    @property
    def shared(self) -> bool:
        """Whether fractional jobs may share it (it is in a sharing mode)."""
        return bool(self.sharing)


class JobFiles(models.Model):
    """The small text files one submission brought, stored once for every job that runs
    them: a job, or all the tasks of an array (each task's ``file_set``).

    Why a row of their own: stored with each task, one 1 MB request for a 100-task array
    became 100 MB in the database. Counted per owner (``size_bytes``) against
    ``JOB_FILES_MAX_BYTES_PER_USER`` until they expire: ``JOB_FILES_RETENTION_DAYS``
    after every job that runs them ended, the content is dropped (``files`` becomes
    ``{}``, ``expired_at`` says when) and the names stay, so a job's page can say what it
    brought and that it is gone (``scheduler.jobs.files``)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="job_files")
    #: name -> text, as submitted; ``{}`` once expired.
    files = models.JSONField(default=dict, blank=True)
    names = models.JSONField(default=list, blank=True)
    #: The content's size (UTF-8 bytes), as the limits count it.
    size_bytes = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField()
    expired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "job files"
        indexes = [models.Index(fields=["owner", "expired_at"], name="jobfiles_owner_expired")]

    def __str__(self) -> str:
        return f"{len(self.names)} files of {self.owner_id} ({self.size_bytes} bytes)"


class Job(models.Model):
    """A request for GPUs plus what to run, and where it stands.

    Per-node requests (``gpus_per_node``, ``cpus_per_node``, ``memory_mib_per_node``)
    apply on each of ``nodes`` nodes, started together (gang). ``allocations`` holds
    what the scheduler assigned: ``[{"node", "gpu_indices", "cpus", "memory_mib"}]``.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No index of their own: the (owner, state) and (account, state) indexes lead with
    # them, and each index more is one more write for every job submitted.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs", db_index=False)
    account = models.ForeignKey("portal.Account", on_delete=models.PROTECT, related_name="jobs", db_index=False)
    qos = models.ForeignKey("portal.Qos", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(max_length=128)
    command = models.TextField(blank=True)
    script = models.TextField(blank=True)
    image = models.CharField(max_length=256, blank=True)
    env = models.JSONField(default=dict, blank=True)
    #: Where the job starts (``sbatch --chdir``); empty: a directory of its own.
    workdir = models.CharField(max_length=1024, blank=True)
    #: Files its output is also written to, as given (``sbatch -o``/``-e``: patterns such
    #: as ``%j`` are filled in when it is handed to its cluster, see
    #: ``scheduler.jobs.output_paths``); empty: none, the portal's log alone.
    output_path = models.CharField(max_length=1024, blank=True, default="")
    error_path = models.CharField(max_length=1024, blank=True, default="")
    #: Small text files sent with the job, written into its working directory before it
    #: starts (``scheduler.backends.job_files``): the tasks of an array share one row.
    #: No database constraint, as ``array_job``: an array's tasks copy the reference in
    #: one ``INSERT ... SELECT`` (``scheduler.jobs.submit``); rows are never deleted
    #: while a job refers to them (``scheduler.jobs.files``).
    file_set = models.ForeignKey(
        JobFiles,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="jobs",
        editable=False,
        db_constraint=False,
        db_index=False,
    )

    nodes = models.PositiveIntegerField(default=1)
    gpus_per_node = models.PositiveIntegerField(default=1)
    gpu_model = models.CharField(max_length=256, blank=True, help_text="A model, or acceptable models as A|B.")
    min_gpu_memory_mib = models.PositiveIntegerField(default=0)
    min_compute_capability = models.CharField(max_length=8, blank=True)
    gpu_share = models.FloatField(
        default=0.0, help_text="A fraction of one shared GPU per node (0 < share < 1); 0 means whole GPUs."
    )
    gpu_memory_mib_share = models.PositiveIntegerField(default=0, help_text="GPU memory the share reserves.")
    node_labels = models.JSONField(
        default=dict, blank=True, help_text='Labels every node of the job must carry, e.g. {"rack": "r1"}.'
    )
    #: CPUs per node, in thousandths where the cluster hands out part of a CPU
    #: (Kubernetes' millicores: ``0.5``); Slurm takes whole ones (see
    #: ``scheduler.backends.FRACTIONAL_CPU_KINDS``).
    cpus_per_node = models.DecimalField(
        max_digits=9,
        decimal_places=3,
        default=1,
        validators=[MinValueValidator(Decimal("0.001"))],
        help_text="CPUs per node; part of a CPU (0.5, Kubernetes' 500m) where the cluster allows it.",
    )
    memory_mib_per_node = models.PositiveIntegerField(default=0)
    walltime_seconds = models.PositiveIntegerField()
    nice = models.IntegerField(default=0, help_text="Lowers the job's priority by this much (sbatch --nice).")
    dependencies = models.JSONField(
        default=list, blank=True, help_text='[{"type": "afterok"|"afternotok"|"afterany", "job": <id>}]'
    )
    reservation = models.CharField(
        max_length=64, blank=True, help_text="The reservation it runs in (sbatch --reservation); empty: none."
    )
    #: Which messages this job makes, over its owner's choice of events (``sbatch
    #: --mail-type``, ``scheduler.jobs.mail_type``; applied by ``notifications.wanted``).
    mail_events = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text='sbatch --mail-type\'s types, e.g. ["END", "FAIL"]; [] for NONE; null: the owner\'s settings decide.',
    )

    #: A task of a job array (``sbatch --array``): the array is addressed by its first
    #: task's id (``array_job``, that task's own id for itself), the task by its index.
    #: Every task is a job of its own for scheduling, quotas, accounting and states.
    #: No database constraint: the tasks are written with their first task in one
    #: transaction, and PostgreSQL's check of 10,000 references to a row written in that
    #: same transaction took seconds at commit (Django deletes tasks with their array).
    #: Indexed by (array_job, array_task_id), which leads with it.
    array_job = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="array_tasks",
        editable=False,
        db_constraint=False,
        db_index=False,
    )
    array_task_id = models.PositiveIntegerField(null=True, blank=True, editable=False)
    array_task_count = models.PositiveIntegerField(default=0, editable=False)
    #: How many tasks of the array may run at once (``%50``); 0: no limit.
    array_throttle = models.PositiveIntegerField(default=0)
    #: The indices as submitted (``0-999:2%50``), for people.
    array_spec = models.CharField(max_length=1024, blank=True, editable=False)

    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    pending_reason = models.CharField(max_length=64, blank=True)
    #: Every blocker of a waiting job: ``[{"code", "message", "evidence"}]``, the
    #: ``pending_reason`` first (see ``scheduler.core.reasons``).
    pending_blockers = models.JSONField(default=list, blank=True)
    #: Runs on GPUs beyond its account's guarantee, so it is reclaimed first.
    borrowed = models.BooleanField(default=False)
    estimated_start_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Latest expected start while pending (squeue --start), from the periodic estimate pass.",
    )
    #: Predicted starts if every job runs its median / 90th percentile of what its kind
    #: of job runs of its walltime (``scheduler.core.estimate.calibrated_starts``).
    estimated_start_p50_at = models.DateTimeField(
        null=True, blank=True, help_text="Predicted start while pending: half of jobs start by then (the p50)."
    )
    estimated_start_p90_at = models.DateTimeField(
        null=True, blank=True, help_text="Predicted start while pending: 9 in 10 jobs start by then (the p90)."
    )
    state_reason = models.CharField(max_length=500, blank=True)
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    allocations = models.JSONField(default=list, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    #: How many times this attempt was handed to a backend (``scheduler.clusters.dispatch``):
    #: counted before each hand-off, so 1 when read back proves that no one handed it
    #: over before and the backend need not look for an earlier submission.
    handoffs = models.PositiveIntegerField(default=0)
    external_id = models.CharField(max_length=128, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)

    submitted_at = models.DateTimeField()
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["state", "submitted_at"], name="job_state_submitted"),
            models.Index(fields=["owner", "state"], name="job_owner_state"),
            models.Index(fields=["account", "state"], name="job_account_state"),
            models.Index(fields=["array_job", "array_task_id"], name="job_array_task"),
            # Only jobs that brought files pay for it (the expiry pass looks them up).
            models.Index(fields=["file_set"], name="job_file_set", condition=models.Q(file_set__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.name}"

    @property
    def files(self) -> dict[str, str]:
        """The files it brought (name -> text), shared with the other tasks of its array;
        ``{}`` when it brought none or they expired (see :attr:`files_expired_at`). Reads
        the row unless loaded with it (``select_related``/``prefetch_related("file_set")``)."""
        return dict(self.file_set.files) if self.file_set_id is not None and self.file_set else {}

    @property
    def files_expired_at(self) -> Any:
        """When its files were dropped (``JOB_FILES_RETENTION_DAYS`` after it ended), or None."""
        return self.file_set.expired_at if self.file_set_id is not None and self.file_set else None

    @property
    def total_gpus(self) -> float:
        """GPUs it holds (or asks for): ``nodes x gpus_per_node``, or ``nodes x gpu_share``
        for a share of one GPU per node (``scheduler.core.hours.job_gpus``; in SQL
        ``common.db.dbfunctions.job_gpus``)."""
        return job_gpus(self.nodes, self.gpus_per_node, self.gpu_share)

    @property
    def backend_key(self) -> str:
        """Identity of the current attempt at the backend (submit is idempotent on it)."""
        return f"{self.uuid}.{self.attempt}"


#: The stored start estimates of a pending job (the periodic estimate pass writes them).
ESTIMATE_FIELDS = ("estimated_start_at", "estimated_start_p50_at", "estimated_start_p90_at")


def no_estimates() -> dict[str, None]:
    """The update that clears a job's estimates: it started, ended, was held or edited."""
    return dict.fromkeys(ESTIMATE_FIELDS)


class JobEvent(models.Model):
    """Append-only audit trail of one job: what happened, when, and with what data."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events", db_index=False)  # (job, at) leads
    at = models.DateTimeField()
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    message = models.CharField(max_length=500)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        # The order events were written in: ``at`` ties (a tick stamps all its events
        # with its one ``now``) and cannot tell which of two came first.
        ordering = ["id"]
        indexes = [models.Index(fields=["job", "at"], name="jobevent_job_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind}: {self.message}"


class Usage(models.Model):
    """Decayed, billing-weighted GPU-seconds of one user in one account, as of ``as_of``.

    Written only by the tick, in the same transaction that advances
    ``TickState.usage_as_of``, so every span of every job is charged exactly once.
    """

    account = models.ForeignKey("portal.Account", on_delete=models.CASCADE, related_name="usage")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage")
    gpu_seconds = models.FloatField(default=0.0)
    as_of = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "user"], name="usage_unique_account_user")]
        verbose_name_plural = "usage"

    def __str__(self) -> str:
        return f"{self.user} in {self.account}: {self.gpu_seconds:.0f} GPU-s"


class TickState(models.Model):
    """One row recording the last scheduling tick (also the SQLite tick lock)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    usage_as_of = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(default=0)
    started_jobs = models.PositiveIntegerField(default=0)
    pending_jobs = models.PositiveIntegerField(default=0)
    #: After a tick: ``{"waiting": n, "models": {model: [free GPUs, GPUs no waiting
    #: request could use where they are]}}`` (``scheduler.tick.stranded``), and when.
    stranded = models.JSONField(default=dict, blank=True)
    stranded_at = models.DateTimeField(null=True, blank=True)
    #: After a tick: every waiting job's place in line, packed (``scheduler.tick.positions``).
    queue_positions = models.BinaryField(default=bytes, blank=True)

    def __str__(self) -> str:
        return f"last tick at {self.finished_at}"


class AccountHour(models.Model):
    """What one account's job attempts added up to in one UTC hour (``hour``, its start):
    the rollup the cluster overview sums, so its reads do not grow with the jobs.

    Written as each attempt gives its GPUs back (ends, or is requeued), in the
    transaction of that conditional state change (``scheduler.jobs.hours.record_attempt``):
    an attempt is added exactly once, or not at all if the change rolls back. Running
    attempts are not in it yet; readers add them live. See ``scheduler.core.hours`` for
    the counters; ``waited_<i>`` counts the attempts that started in the hour after a
    wait in bin ``i`` of ``scheduler.core.hours.WAIT_BINS``.
    """

    account = models.ForeignKey("portal.Account", on_delete=models.CASCADE, related_name="hours")
    hour = models.DateTimeField()
    gpu_seconds = models.FloatField(default=0.0)
    carried = models.PositiveIntegerField(default=0, help_text="Attempts running at the hour's start.")
    started = models.PositiveIntegerField(default=0, help_text="Attempts that started in the hour and ran.")
    waited_0 = models.PositiveIntegerField(default=0)
    waited_1 = models.PositiveIntegerField(default=0)
    waited_2 = models.PositiveIntegerField(default=0)
    waited_3 = models.PositiveIntegerField(default=0)
    waited_4 = models.PositiveIntegerField(default=0)
    waited_5 = models.PositiveIntegerField(default=0)
    waited_6 = models.PositiveIntegerField(default=0)
    waited_7 = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour", "account"], name="accounthour_unique_hour_account")]

    def __str__(self) -> str:
        return f"{self.account_id} at {self.hour:%Y-%m-%d %H:00}: {self.gpu_seconds / 3600:.1f} GPU-h"


class JobAttempt(models.Model):
    """One attempt of a job that held GPUs and gave them back (it ended, or was requeued or
    preempted): who ran what, where and for how long, the accounting's unit (``sreport``).

    Written once per attempt in the transaction of the state change that ended it
    (``scheduler.jobs.attempts``), so an attempt is recorded exactly once; a running
    attempt is read live from its job. The model is the label of its GPUs (MIG slices as
    ``model/profile``), "" for a CPU-only attempt.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    attempt = models.PositiveIntegerField()
    account = models.ForeignKey("portal.Account", on_delete=models.CASCADE, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    qos = models.CharField(max_length=32, blank=True)
    gpu_model = models.CharField(max_length=96, blank=True)
    gpus = models.FloatField(help_text="GPUs held (a share counts as its fraction).")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "attempt"], name="job_attempt_once")]
        indexes = [models.Index(fields=["ended_at"], name="jobattempt_ended")]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt}"


class Reservation(models.Model):
    """Nodes set aside for a span (``scontrol create reservation``): for **maintenance**
    (no job runs there then) or for some accounts and users, whose jobs ask for it by
    name. The scheduler keeps everyone else's jobs off those nodes whenever their
    walltime would reach into the span (``scheduler.core.windows``); on Slurm the
    reservation is made in Slurm too (``scheduler.clusters.reservations``)."""

    class Kind(models.TextChoices):
        MAINTENANCE = "maintenance", "maintenance"
        ACCOUNTS = "accounts", "for accounts and users"

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    start_at = models.DateTimeField()
    end_at = models.DateTimeField()
    nodes = models.ManyToManyField(Node, related_name="reservations")
    #: Asked as "N GPUs of a model" (``scontrol create reservation TRES=gres/gpu:N``)
    #: rather than named nodes: the nodes were chosen when it was made; 0 / "" otherwise.
    gpus = models.PositiveIntegerField(default=0)
    gpu_model = models.CharField(max_length=96, blank=True)
    accounts = models.ManyToManyField("portal.Account", blank=True, related_name="reservations")
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="reservations")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["start_at", "name"]
        indexes = [models.Index(fields=["end_at"], name="reservation_end")]

    def __str__(self) -> str:
        return self.name


class Simulation(models.Model):
    """One run of the trace simulator that staff asked for, run as a Celery task (inline
    without a broker) and read back by polling (``scheduler.simulations``):

    - a **preview** of a change to ``account``'s shares or limits on the site's own recent
      history (``params``: ``{"shares", "limits"}``; ``scheduler.previews``); nothing about
      the account changes until the admin saves the change itself;
    - a **replay** of a trace (an uploaded Philly-format CSV in ``trace``, or the site's
      history) under policies on a cluster (``params``: ``{"policies", "nodes",
      "gpus_per_node"}``, no nodes: the site's own);
    - a **switch**: the site's history replayed under its own policy and under another
      (``params``: ``{"policy"}``), each account's slowdown under both
      (``scheduler.policy_switch``); the fairness watch starts one when an account starves.
    """

    class Kind(models.TextChoices):
        PREVIEW = "preview"
        REPLAY = "replay"
        SWITCH = "switch"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    account = models.ForeignKey(
        "portal.Account", null=True, blank=True, on_delete=models.CASCADE, related_name="previews"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: The days of the site's history replayed (0: an uploaded trace instead).
    days = models.PositiveIntegerField(default=0)
    params = models.JSONField(default=dict)
    trace_name = models.CharField(max_length=200, blank=True)
    trace = models.TextField(blank=True, help_text="An uploaded Philly-format CSV (a replay of it).")
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    progress = models.FloatField(default=0.0, help_text="Fraction done, 0 to 1.")
    #: The figures when done (see ``scheduler.simulations``).
    result = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk}"


class AdviceMeasurement(models.Model):
    """What the replay of the site's history measured for one user's right-sizing advice
    (``scheduler.advice``): how much sooner the suggestion would have started their last
    jobs of a shape. Written by the Celery task ``scheduler.advise`` and read by every web
    process, hence a row and not the per-process cache. ``key`` names the user, the
    shape and the jobs read (the newest one's id and their count): another job of the
    shape that ends makes a new key; the row of the old one is replaced."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    shape = models.CharField(max_length=300, help_text="The shape's key (scheduler.reads.advice.Shape.key).")
    key = models.CharField(max_length=400, unique=True)
    sooner_seconds = models.FloatField(help_text="Mean of how much sooner the jobs read would have started.")
    replayed_days = models.FloatField()
    computed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["owner", "shape"], name="advice_owner_shape")]

    def __str__(self) -> str:
        return f"advice measurement {self.key}"


class StartBacktest(models.Model):
    """One run of the backtest of calibrated start times (``scheduler.backtests``, the
    periodic task ``scheduler.backtest_starts``): the site's last ``days`` replayed, and
    how often the jobs that waited started at or before their predicted p50 and p90
    starts. The newest row is the one shown."""

    ran_at = models.DateTimeField()
    days = models.PositiveIntegerField()
    #: Jobs replayed, and of them those judged (they waited and had a prediction).
    jobs = models.PositiveIntegerField(default=0)
    judged = models.PositiveIntegerField(default=0)
    #: Shares (0 to 1) of the judged jobs that started at or before their p50 / p90.
    p50_coverage = models.FloatField(default=0.0)
    p90_coverage = models.FloatField(default=0.0)
    #: The median of |start - p50| over the judged jobs, in seconds.
    p50_error_s = models.FloatField(default=0.0)
    wall_s = models.FloatField(default=0.0, help_text="How long the backtest took to run.")

    class Meta:
        ordering = ["-ran_at", "-id"]

    def __str__(self) -> str:
        return f"start backtest at {self.ran_at}"

    @property
    def summary(self) -> str:
        """The result in one sentence, as the dashboard and the API say it."""
        days = f"{self.days} day{'s' if self.days != 1 else ''}"
        if not self.judged:
            return f"No job waited for a start prediction in the {days} replayed."
        return (
            f"{self.p90_coverage:.0%} of jobs started before their p90 and {self.p50_coverage:.0%} before "
            f"their p50; p50 error {self.p50_error_s / 60:.0f} min ({self.judged} of {self.jobs} jobs "
            f"replayed over {days} waited and were judged)."
        )


class InteractiveApp(models.Model):
    """A site-defined kind of interactive session (Open OnDemand's "interactive app"):
    what a launch form asks for and the bash that starts the app's web server.

    A session of an app is a job like any other (quotas, fair-share, accounting,
    estimates, why-pending, walltime); :class:`InteractiveSession` adds what the proxy
    needs to reach its server. Admins add apps in the pages without code; the built-in
    ones (JupyterLab, TensorBoard, a web server of one's own) are rows like the others.
    """

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    #: What the launch form asks beyond the job's resources, in order:
    #: ``[{"name", "label", "kind": "text"|"integer"|"choice", "default", "choices", "help"}]``.
    #: Each value reaches :attr:`command` as ``{name}``, shell-quoted.
    form_fields = models.JSONField(default=list, blank=True)
    #: The bash that starts the server in the foreground, with the placeholders ``{port}``
    #: (the port picked on the node), ``{base_url}`` (``/sessions/<job id>/``, the path the
    #: proxy serves it under) and the form fields' (``scheduler.sessions.script``). The
    #: session's secret is in its environment as ``QM_SESSION_SECRET``, never on a
    #: command line.
    command = models.TextField()
    #: A path below ``{base_url}`` that answers (any status below 500) once the server
    #: is ready; the session's script waits for it before it reports the session ready.
    ready_path = models.CharField(max_length=256, blank=True, default="")
    #: How the proxy proves to the server that a request comes through the portal:
    #: ``header`` sends ``Authorization: token <secret>`` (Jupyter's), ``none``: the
    #: server checks nothing itself (TensorBoard), so only the proxy's login guards it.
    secret_via = models.CharField(
        max_length=16, choices=[("header", "Authorization header"), ("none", "none")], default="header"
    )
    #: Where it may run; none: every enabled cluster.
    clusters = models.ManyToManyField(Cluster, blank=True, related_name="apps")
    #: The launch form's defaults for the job's resources.
    default_gpus = models.PositiveIntegerField(default=1)
    default_cpus = models.PositiveIntegerField(default=2)
    default_memory_mib = models.PositiveIntegerField(default=0)
    default_walltime_seconds = models.PositiveIntegerField(default=4 * 3600)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class InteractiveSession(models.Model):
    """One launch of an :class:`InteractiveApp`: its job, and where its server listens.

    ``host``/``port`` are empty until the session's script reports its server ready; the
    host always comes from the workload manager (the node it was placed on: Slurm's
    ``NodeAddr``, the pod's Service, 127.0.0.1 on the local cluster), never from the job,
    and the port must lie in ``SESSION_PORTS``: a job cannot point the proxy at any other
    service. ``secret`` never leaves the portal (not in the API, not in a page).
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, primary_key=True, related_name="session")
    app = models.ForeignKey(InteractiveApp, on_delete=models.PROTECT, related_name="sessions")
    #: The launch form's values for the app's own fields (name -> value).
    values = models.JSONField(default=dict, blank=True)
    secret = models.CharField(max_length=64, editable=False)
    host = models.CharField(max_length=255, blank=True, default="")
    port = models.PositiveIntegerField(null=True, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    #: The last request the proxy passed to it: the idle rule's clock.
    last_activity_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.app.slug} session of job {self.job_id}"

    @property
    def base_url(self) -> str:
        """The path the proxy serves the session under, on the portal's own origin."""
        return f"/sessions/{self.job_id}/"
