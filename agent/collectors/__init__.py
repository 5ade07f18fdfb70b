"""Collectors: each turns one source of GPU telemetry into :class:`Reading` objects.

One interface (:class:`Collector`), three sources: ``nvml`` (the node agent reading the
driver through ``nvidia-ml-py``), ``dcgm`` (a dcgm-exporter Prometheus endpoint) and
``simulated`` (plausible curves for the demo and tests).
"""

from __future__ import annotations

from agent.collectors.base import Collector, Process, Reading

__all__ = ["Collector", "Process", "Reading"]
