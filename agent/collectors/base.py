"""What every collector returns, and how a reading travels to the ingest API."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

#: Clock throttle reasons by NVML bit (``nvmlClocksEventReason*``), named as the API
#: stores them. Idle and application-clock settings are not problems, so they are left out.
THROTTLE_BITS: dict[int, str] = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


def throttle_names(mask: int) -> tuple[str, ...]:
    """The named throttle reasons set in an NVML/nvidia-smi bitmask."""
    return tuple(name for bit, name in THROTTLE_BITS.items() if mask & bit)


@dataclass(frozen=True, slots=True)
class Process:
    """A process on a GPU; its owner (``uid``, ``user``) and ``command`` name where the
    agent could read them (``agent.collectors.owners``), else unknown."""

    pid: int
    used_memory_mib: int
    uid: int | None = None
    user: str = ""
    command: str = ""

    def to_payload(self) -> dict[str, Any]:
        """The process as a sample's ``processes`` item: its unknown fields left out."""
        item: dict[str, Any] = {"pid": self.pid, "used_memory_mib": self.used_memory_mib}
        if self.uid is not None:
            item["uid"] = self.uid
        if self.user:
            item["user"] = self.user
        if self.command:
            item["command"] = self.command
        return item


@dataclass(frozen=True, slots=True)
class Reading:
    """One GPU (or MIG slice) at one instant, in the units the API stores.

    ``index`` is the GPU's index on its node as the portal knows it; ``uuid`` the
    driver's ``GPU-...``/``MIG-...`` id when the source knows it.
    """

    index: int
    #: None where the driver does not report it (a MIG-enabled GPU through NVML).
    utilization_pct: float | None
    memory_used_mib: int
    uuid: str = ""
    memory_total_mib: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    throttle_reasons: tuple[str, ...] = ()
    xid: int | None = None
    ecc_errors: int | None = None
    processes: tuple[Process, ...] = field(default=())

    def to_payload(self, at: datetime) -> dict[str, Any]:
        """The JSON object ``POST /api/v1/monitoring/samples/`` takes for this reading."""
        payload: dict[str, Any] = {
            "index": self.index,
            "at": at.isoformat(),
            "utilization_pct": self.utilization_pct,
            "memory_used_mib": self.memory_used_mib,
        }
        optional = {
            "uuid": self.uuid or None,
            "memory_total_mib": self.memory_total_mib,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "sm_clock_mhz": self.sm_clock_mhz,
            "xid": self.xid,
            "ecc_errors": self.ecc_errors,
        }
        payload.update({k: v for k, v in optional.items() if v is not None})
        if self.throttle_reasons:
            payload["throttle_reasons"] = list(self.throttle_reasons)
        if self.processes:
            payload["processes"] = [p.to_payload() for p in self.processes]
        return payload


class Collector(Protocol):
    """A source of readings. ``collect`` returns every GPU it can see right now and
    raises ``CollectorError`` when the source cannot be read at all."""

    name: str

    def collect(self) -> list[Reading]: ...


class CollectorError(Exception):
    """The source could not be read (driver missing, endpoint down, unparseable)."""
