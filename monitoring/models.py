"""Per-GPU telemetry samples from node agents (NVML or DCGM exporter)."""

from __future__ import annotations

from django.db import models


class GpuSample(models.Model):
    """One reading of one GPU at one instant."""

    gpu = models.ForeignKey("scheduler.Gpu", on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    utilization_pct = models.FloatField()
    memory_used_mib = models.PositiveIntegerField()
    temperature_c = models.FloatField()
    power_w = models.FloatField()
    sm_clock_mhz = models.PositiveIntegerField(null=True, blank=True)
    xid = models.IntegerField(null=True, blank=True, help_text="Last XID error code, if any.")
    processes = models.JSONField(default=list, blank=True, help_text='[{"pid": 1, "used_memory_mib": 10}]')

    class Meta:
        ordering = ["-at"]
        indexes = [
            models.Index(fields=["gpu", "at"], name="gpusample_gpu_at"),
            models.Index(fields=["at"], name="gpusample_at"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu} at {self.at}"
