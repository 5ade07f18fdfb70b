"""Scrape a dcgm-exporter Prometheus endpoint (``http://node:9400/metrics``).

Read: ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_FB_USED``/``_FREE`` (MiB),
``DCGM_FI_DEV_GPU_TEMP`` (C), ``DCGM_FI_DEV_POWER_USAGE`` (W), ``DCGM_FI_DEV_SM_CLOCK``
(MHz), ``DCGM_FI_DEV_XID_ERRORS`` (the last XID, 0 for none) and, for MIG slices, where
the exporter has no ``GPU_UTIL``, ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a 0..1 ratio).

dcgm-exporter labels a MIG slice with its physical GPU (``gpu``, ``UUID``) plus
``GPU_I_ID``; it never names the slice's own ``MIG-`` UUID. So:

- every physical GPU becomes one reading for its ``gpu`` index: device-level temperature,
  power, clock and XID, memory summed over its slices, utilization from ``GPU_UTIL`` or
  else the mean engine activity of its slices;
- a slice becomes a reading of its own only when ``mig_indices`` says which portal GPU
  index it is (``{(gpu, GPU_I_ID): index}``): slice numbering is the portal's, not DCGM's.
"""

from __future__ import annotations

import urllib.request
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.collectors.base import CollectorError, Reading

FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "engine",
    "DCGM_FI_DEV_FB_USED": "used",
    "DCGM_FI_DEV_FB_FREE": "free",
    "DCGM_FI_DEV_GPU_TEMP": "temp",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "DCGM_FI_DEV_SM_CLOCK": "clock",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}


@dataclass
class _Entity:
    uuid: str = ""
    values: dict[str, float] = field(default_factory=dict)


def parse_dcgm_metrics(text: str, mig_indices: Mapping[tuple[int, int], int] | None = None) -> list[Reading]:
    """Readings from one dcgm-exporter scrape (Prometheus text format), sorted by index.

    Raises ``CollectorError`` on text that is not Prometheus exposition format.
    """
    # Here, not at the top: a node that reads NVML needs no prometheus-client.
    from prometheus_client.parser import text_string_to_metric_families

    gpus: dict[int, _Entity] = defaultdict(_Entity)
    slices: dict[tuple[int, int], _Entity] = defaultdict(_Entity)
    try:
        for family in text_string_to_metric_families(text):
            key = FIELDS.get(family.name)
            if key is None:
                continue
            for sample in family.samples:
                if "gpu" not in sample.labels:
                    continue
                gpu = int(sample.labels["gpu"])
                instance = sample.labels.get("GPU_I_ID")
                entity = gpus[gpu] if instance is None else slices[(gpu, int(instance))]
                entity.uuid = sample.labels.get("UUID", "")
                entity.values[key] = float(sample.value)
    except ValueError as exc:
        raise CollectorError(f"not a Prometheus scrape: {exc}") from exc

    by_parent: dict[int, list[_Entity]] = defaultdict(list)
    for (gpu, _), entity in sorted(slices.items()):
        by_parent[gpu].append(entity)
        gpus[gpu].uuid = gpus[gpu].uuid or entity.uuid
    readings = [_physical(index, gpus[index], by_parent.get(index, [])) for index in sorted(gpus)]
    for (gpu, slice_id), entity in sorted(slices.items()):
        index = (mig_indices or {}).get((gpu, slice_id))
        if index is not None:
            readings.append(_reading(index, "", entity.values, _util(entity.values)))
    return sorted(readings, key=lambda r: r.index)


def _util(values: Mapping[str, float]) -> float:
    if "util" in values:
        return values["util"]
    return 100 * values.get("engine", 0.0)


def _physical(index: int, gpu: _Entity, parts: list[_Entity]) -> Reading:
    """A physical GPU: its own values, or for a MIG GPU what its slices report."""
    if not parts:
        return _reading(index, gpu.uuid, gpu.values, _util(gpu.values))
    device = dict(parts[0].values)  # temperature, power, clock, XID are device-level
    device.update(gpu.values)
    device["used"] = sum(p.values.get("used", 0.0) for p in parts)
    device["free"] = sum(p.values.get("free", 0.0) for p in parts)
    util = gpu.values["util"] if "util" in gpu.values else sum(_util(p.values) for p in parts) / len(parts)
    return _reading(index, gpu.uuid, device, util)


def _reading(index: int, uuid: str, v: Mapping[str, float], util: float) -> Reading:
    used = int(v.get("used", 0))
    xid = int(v.get("xid", 0))
    return Reading(
        index=index,
        uuid=uuid,
        utilization_pct=round(util, 3),
        memory_used_mib=used,
        memory_total_mib=used + int(v["free"]) if "free" in v else None,
        temperature_c=v.get("temp"),
        power_w=v.get("power"),
        sm_clock_mhz=int(v["clock"]) if "clock" in v else None,
        xid=xid or None,
    )


class DcgmCollector:
    """Scrapes one dcgm-exporter; raises ``CollectorError`` if it cannot be reached."""

    name = "dcgm"

    def __init__(
        self, url: str, *, mig_indices: Mapping[tuple[int, int], int] | None = None, timeout: float = 5
    ) -> None:
        self.url = url
        self.mig_indices = dict(mig_indices or {})
        self.timeout = timeout

    def collect(self) -> list[Reading]:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:
                text = response.read().decode()
        except OSError as exc:
            raise CollectorError(f"cannot scrape {self.url}: {exc}") from exc
        return parse_dcgm_metrics(text, self.mig_indices)
