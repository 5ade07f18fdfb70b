"""Per-GPU telemetry: raw samples from node agents, their rollups, each GPU's health,
the queue's history per account, the tokens node agents authenticate with, and the
fairness watch's episodes."""

from __future__ import annotations

from django.db import models

from monitoring.process_audit import ESCAPED, FOREIGN, LEFTOVER, SeenProcess
from people.models import HashedToken


class GpuSample(models.Model):
    """One reading of one GPU at one instant. Unique on ``(gpu, at)``: a batch sent twice
    (an agent retrying after a timeout) stores each reading once."""

    gpu = models.ForeignKey("scheduler.Gpu", on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    #: Null: the driver does not report it (NVML answers NOT_SUPPORTED for MIG-enabled
    #: GPUs): unmeasured, never 0%.
    utilization_pct = models.FloatField(null=True, blank=True)
    memory_used_mib = models.PositiveIntegerField()
    memory_total_mib = models.PositiveIntegerField(null=True, blank=True)
    temperature_c = models.FloatField(null=True, blank=True)
    power_w = models.FloatField(null=True, blank=True)
    power_limit_w = models.FloatField(null=True, blank=True)
    sm_clock_mhz = models.PositiveIntegerField(null=True, blank=True)
    throttle_reasons = models.JSONField(
        default=list, blank=True, help_text='Active clock throttle reasons, e.g. ["sw_power_cap"].'
    )
    xid = models.IntegerField(null=True, blank=True, help_text="XID error seen since the previous sample, if any.")
    ecc_errors = models.PositiveIntegerField(
        null=True, blank=True, help_text="Volatile uncorrected ECC errors (count since driver load)."
    )
    processes = models.JSONField(
        default=list,
        blank=True,
        help_text='[{"pid": 1, "used_memory_mib": 10, "uid": 1001, "user": "alice", "command": "python"}]',
    )

    class Meta:
        ordering = ["-at"]
        constraints = [models.UniqueConstraint(fields=["gpu", "at"], name="gpusample_unique_gpu_at")]
        indexes = [models.Index(fields=["at"], name="gpusample_at")]

    def __str__(self) -> str:
        return f"{self.gpu} at {self.at}"


class Resolution(models.IntegerChoices):
    MINUTE = 60, "1 minute"
    HOUR = 3600, "1 hour"


class MetricBands(models.Model):
    """min/mean/max of each charted metric: the columns every rollup has."""

    utilization_min = models.FloatField(null=True)
    utilization_mean = models.FloatField(null=True)
    utilization_max = models.FloatField(null=True)
    memory_used_min = models.FloatField()
    memory_used_mean = models.FloatField()
    memory_used_max = models.FloatField()
    temperature_min = models.FloatField(null=True)
    temperature_mean = models.FloatField(null=True)
    temperature_max = models.FloatField(null=True)
    power_min = models.FloatField(null=True)
    power_mean = models.FloatField(null=True)
    power_max = models.FloatField(null=True)

    class Meta:
        abstract = True


class GpuRollup(MetricBands):
    """min/mean/max of one GPU over one aligned minute or hour (``at`` is its start).

    Recomputing a period writes the same row (upsert on ``(gpu, period, at)``).
    """

    gpu = models.ForeignKey("scheduler.Gpu", on_delete=models.CASCADE, related_name="rollups")
    period = models.PositiveIntegerField(choices=Resolution.choices)
    at = models.DateTimeField()
    samples = models.PositiveIntegerField()

    class Meta:
        ordering = ["gpu_id", "period", "at"]
        constraints = [models.UniqueConstraint(fields=["gpu", "period", "at"], name="gpurollup_unique_gpu_period_at")]
        indexes = [models.Index(fields=["period", "at"], name="gpurollup_period_at")]

    def __str__(self) -> str:
        return f"{self.gpu_id} {self.get_period_display()} at {self.at}"


class AllGpuRollup(MetricBands):
    """Every GPU's hourly rollups of one hour (``at``, its start) combined: min of the
    mins, mean of the means, max of the maxes, as the charts of all GPUs show them.

    Recomputed from ``GpuRollup`` whenever an hour's rollups are (upsert on ``at``), so
    a chart of every GPU reads one row an hour, not one per GPU and hour.
    """

    at = models.DateTimeField(unique=True)
    gpus = models.PositiveIntegerField(help_text="GPUs with a rollup in the hour.")

    class Meta:
        ordering = ["at"]

    def __str__(self) -> str:
        return f"{self.gpus} GPUs at {self.at}"


class GpuHealth(models.Model):
    """The latest health of one GPU, as its newest sample showed it.

    ``condition`` is empty while the GPU is fine and says why not otherwise (too hot,
    throttling); ``xid``/``xid_at`` remember the newest XID error, which keeps the GPU
    out of new jobs for ``MONITORING_XID_HOLD_SECONDS``.
    """

    gpu = models.OneToOneField("scheduler.Gpu", on_delete=models.CASCADE, related_name="health")
    condition = models.CharField(max_length=200, blank=True)
    xid = models.IntegerField(null=True, blank=True)
    xid_at = models.DateTimeField(null=True, blank=True)
    since = models.DateTimeField(help_text="When the current condition (or health) was first seen.")

    class Meta:
        verbose_name_plural = "GPU health"
        indexes = [models.Index(fields=["xid_at"], name="gpuhealth_xid_at")]

    def __str__(self) -> str:
        return f"{self.gpu_id}: {self.condition or 'ok'}"


class ProcessRule(models.TextChoices):
    """Which rule of the GPU process audit a process broke (``monitoring.process_audit``):
    a process no job on its GPU accounts for; a job's process on a GPU it was not given; a
    process still on a GPU after the job that held it ended."""

    FOREIGN = FOREIGN, "foreign process"
    ESCAPED = ESCAPED, "escaped job"
    LEFTOVER = LEFTOVER, "leftover"


class ProcessFinding(models.Model):
    """A process on a GPU that no job accounts for, found by the GPU process audit
    (``monitoring.audit``): open while ``cleared_at`` is null, and the GPU gets no new
    jobs while one is open (``monitoring.gpu_health``). At most one open finding per
    GPU, pid and rule; it clears once a newer sample of its GPU no longer shows the
    process breaking that rule."""

    gpu = models.ForeignKey("scheduler.Gpu", on_delete=models.CASCADE, related_name="process_findings")
    rule = models.CharField(max_length=16, choices=ProcessRule.choices)
    pid = models.PositiveIntegerField()
    uid = models.PositiveIntegerField(null=True, blank=True, help_text="Its owner's uid; null: the agent did not say.")
    user = models.CharField(max_length=32, blank=True, help_text="Its owner's user name, as the node names it.")
    command = models.CharField(max_length=64, blank=True)
    used_memory_mib = models.PositiveIntegerField(default=0)
    job = models.ForeignKey(
        "scheduler.Job",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The job it is taken to belong to (escaped, leftover); null for a foreign process.",
    )
    reason = models.CharField(max_length=300, help_text="The rule it broke, in words, with the evidence.")
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["gpu_id", "pid", "rule"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu", "pid", "rule"],
                condition=models.Q(cleared_at__isnull=True),
                name="processfinding_one_open",
            )
        ]
        indexes = [
            models.Index(fields=["gpu"], condition=models.Q(cleared_at__isnull=True), name="processfinding_open")
        ]

    def __str__(self) -> str:
        return f"{self.rule} pid {self.pid} on {self.gpu_id}"

    @property
    def owner(self) -> str:
        """Its owner in words: ``alice (uid 1001)``, ``uid 1001``, or ``unknown owner``."""
        return SeenProcess(self.pid, uid=self.uid, user=self.user).owner


class QueueSample(models.Model):
    """One account's queue at one minute: jobs pending (PENDING or HELD), jobs running
    (DISPATCHING or RUNNING) and the GPUs those hold. Written each minute for every
    account with queued or running jobs (``monitoring.queue.record_queue``); an account
    without a row at a sampled minute had no jobs then. Kept as long as minute rollups.
    """

    at = models.DateTimeField()
    account = models.ForeignKey("portal.Account", on_delete=models.CASCADE, related_name="queue_samples")
    pending = models.PositiveIntegerField()
    running = models.PositiveIntegerField()
    gpus = models.FloatField(help_text="GPUs the running jobs hold (a shared GPU counts as its fraction).")

    class Meta:
        ordering = ["at", "account_id"]
        constraints = [models.UniqueConstraint(fields=["at", "account"], name="queuesample_unique_at_account")]

    def __str__(self) -> str:
        return f"{self.account_id} at {self.at}: {self.pending} pending, {self.running} running"


class NodeToken(HashedToken):
    """A node agent's credential (``qmnode_<prefix>_<secret>``).

    Created by admins per node (admin or ``manage.py create_node_token``); it may post
    samples for that node's GPUs only.
    """

    PREFIX = "qmnode_"

    node = models.ForeignKey("scheduler.Node", on_delete=models.CASCADE, related_name="tokens")

    class Meta(HashedToken.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.node_id} ({self.key_prefix}…)"


class JobEfficiency(models.Model):
    """How well a finished job used what it held (Slurm's ``seff``, for GPUs): written once
    per attempt, shortly after it ends (``monitoring.efficiency``), from its GPUs' samples.

    ``samples`` 0 means unmeasured (no agent reported those GPUs while it ran): the
    utilization and memory figures are then null, never shown as 0% or 100%.
    """

    job = models.OneToOneField("scheduler.Job", on_delete=models.CASCADE, related_name="efficiency")
    attempt = models.PositiveIntegerField(help_text="The attempt these figures are of.")
    gpu_hours = models.FloatField(help_text="GPUs held x elapsed (a share counts as its fraction).")
    elapsed_seconds = models.PositiveIntegerField()
    samples = models.PositiveIntegerField(help_text="GPU samples behind the figures; 0: unmeasured.")
    gpu_util_mean = models.FloatField(null=True, help_text="Mean GPU utilization over its GPUs and run, %.")
    gpu_util_peak = models.FloatField(null=True)
    memory_used_mean_mib = models.FloatField(null=True, help_text="Mean GPU memory used per GPU, MiB.")
    memory_used_peak_mib = models.FloatField(null=True)
    memory_total_mib = models.FloatField(null=True, help_text="Memory of one of its GPUs, MiB.")
    gpus_busy = models.PositiveIntegerField(
        null=True, help_text="Of its GPUs, how many were busy (mean utilization >= 5%) over its run; null: unmeasured."
    )
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"efficiency of job {self.job_id} (attempt {self.attempt})"


class FairnessEpisode(models.Model):
    """A span in which the fairness watch (``monitoring.fairness``) found Jain's index
    over accounts' slowdowns of the last 24 h below ``FAIRNESS_WATCH_BELOW``: opened by
    the check that first saw it, with the worst-treated account then, and closed by the
    first check that saw the index recover. Staff are told once per episode
    (``notifications.facts.starving``); ``switch`` is the replay comparing the site's
    policy with ``FAIRNESS_SWITCH_POLICY``, asked for when it opened. At most one is
    open (``open``, unique while true, so two checks at once cannot open two)."""

    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    open = models.BooleanField(default=True)
    account = models.CharField(max_length=150, help_text="The account with the worst slowdown when it opened.")
    jain = models.FloatField(help_text="Jain's index over accounts' mean slowdowns when it opened.")
    worst_ratio = models.FloatField(help_text="That account's mean slowdown over all jobs' mean.")
    switch = models.ForeignKey(
        "scheduler.Simulation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["open"], condition=models.Q(open=True), name="one_open_fairness_episode")
        ]

    def __str__(self) -> str:
        return f"{self.account} starving since {self.started_at:%Y-%m-%d %H:%M}"
