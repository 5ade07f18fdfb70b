"""The node agent's collector: NVML through ``nvidia-ml-py`` (imported as ``pynvml``).

The only seam is the ``pynvml`` module itself: :class:`NvmlCollector` takes it as an
argument (the real one by default), so tests hand it a fake with the same functions and
nothing else is mocked.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from monitoring.collectors.base import CollectorError, Process, Reading, throttle_names

MIB = 1024 * 1024


class NvmlCollector:
    """Reads every GPU the driver shows. ``collect`` raises ``CollectorError`` when NVML
    cannot be initialised; a field a GPU does not support is left out (``None``).

    XID errors arrive as NVML events: the collector registers for critical XID events
    once and drains the queue on every ``collect``, so each sample carries the XIDs seen
    since the previous one.
    """

    name = "nvml"

    def __init__(self, nvml: ModuleType | Any | None = None) -> None:
        if nvml is None:
            try:
                import pynvml
            except ImportError as exc:  # pragma: no cover - the package is a requirement
                raise CollectorError("nvidia-ml-py is not installed") from exc
            nvml = pynvml
        self.nvml: Any = nvml
        self._ready = False
        self._events: Any = None

    def _init(self) -> None:
        if self._ready:
            return
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as exc:
            raise CollectorError(f"NVML could not be initialised: {exc}") from exc
        self._ready = True
        try:
            self._events = self.nvml.nvmlEventSetCreate()
            for i in range(self.nvml.nvmlDeviceGetCount()):
                handle = self.nvml.nvmlDeviceGetHandleByIndex(i)
                self.nvml.nvmlDeviceRegisterEvents(handle, self.nvml.nvmlEventTypeXidCriticalError, self._events)
        except self.nvml.NVMLError:
            self._events = None  # XID events unsupported (some GPUs, containers): readings still work

    def close(self) -> None:
        if self._ready:
            self.nvml.nvmlShutdown()
            self._ready = False

    def _optional(self, func: Any, *args: Any) -> Any:
        try:
            return func(*args)
        except self.nvml.NVMLError:
            return None

    def _pending_xids(self) -> dict[int, int]:
        """GPU index -> the newest XID seen since the last call (drains the event queue)."""
        xids: dict[int, int] = {}
        if self._events is None:
            return xids
        while True:
            try:
                event = self.nvml.nvmlEventSetWait_v2(self._events, 0)
            except self.nvml.NVMLError:  # NVMLError_Timeout: the queue is empty
                return xids
            index = self._optional(self.nvml.nvmlDeviceGetIndex, event.device)
            if index is not None:
                xids[int(index)] = int(event.eventData)

    def collect(self) -> list[Reading]:
        self._init()
        nvml = self.nvml
        xids = self._pending_xids()
        readings = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            util = self._optional(nvml.nvmlDeviceGetUtilizationRates, h)
            memory = nvml.nvmlDeviceGetMemoryInfo(h)
            power = self._optional(nvml.nvmlDeviceGetPowerUsage, h)
            limit = self._optional(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
            reasons = self._optional(nvml.nvmlDeviceGetCurrentClocksEventReasons, h)
            ecc = self._optional(
                nvml.nvmlDeviceGetTotalEccErrors, h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            )
            processes = self._optional(nvml.nvmlDeviceGetComputeRunningProcesses, h) or []
            temperature = self._optional(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)
            clock = self._optional(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)
            readings.append(
                Reading(
                    index=i,
                    uuid=_text(nvml.nvmlDeviceGetUUID(h)),
                    # NOT_SUPPORTED (MIG mode): unmeasured, which is not idle.
                    utilization_pct=float(util.gpu) if util is not None else None,
                    memory_used_mib=int(memory.used) // MIB,
                    memory_total_mib=int(memory.total) // MIB,
                    temperature_c=float(temperature) if temperature is not None else None,
                    power_w=power / 1000 if power is not None else None,
                    power_limit_w=limit / 1000 if limit is not None else None,
                    sm_clock_mhz=int(clock) if clock is not None else None,
                    throttle_reasons=throttle_names(int(reasons)) if reasons is not None else (),
                    xid=xids.get(i),
                    ecc_errors=int(ecc) if ecc is not None else None,
                    processes=tuple(
                        Process(int(p.pid), int(p.usedGpuMemory or 0) // MIB) for p in processes if p is not None
                    ),
                )
            )
        return readings


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
