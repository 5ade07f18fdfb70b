"""Per-GPU telemetry: raw samples from node agents, their rollups, each GPU's health,
the queue's history per account, and the tokens node agents authenticate with."""

from __future__ import annotations

from django.db import models

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
    processes = models.JSONField(default=list, blank=True, help_text='[{"pid": 1, "used_memory_mib": 10}]')

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
