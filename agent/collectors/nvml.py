"""The node agent's collector: NVML through ``nvidia-ml-py`` (imported as ``pynvml``).

The only seam is the ``pynvml`` module itself: :class:`NvmlCollector` takes it as an
argument (the real one by default), so tests hand it a fake with the same functions and
nothing else is mocked. Each GPU process's owner and command name are read from
``/proc`` (``agent.collectors.owners``; a directory of the same shape in tests).

A MIG-enabled GPU answers NOT_SUPPORTED for utilization. Where the driver has GPU
performance monitoring (GPM: Hopper and later, driver 520+), the collector reads the
graphics engine activity of each of its GPU instances instead (``nvmlGpmMigSampleGet``;
``NVML_GPM_METRIC_GRAPHICS_UTIL``, DCGM's ``PROF_GR_ENGINE_ACTIVE``) over the span
between two collects, and gives the physical GPU their mean. The first collect has no
span yet, and a GPU without GPM has none at all: its utilization is then unmeasured
(``None``), never 0%.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from agent.collectors.base import CollectorError, Process, Reading, throttle_names
from agent.collectors.owners import ProcReader

MIB = 1024 * 1024


class NvmlCollector:
    """Reads every GPU the driver shows. ``collect`` raises ``CollectorError`` when NVML
    cannot be initialised; a field a GPU does not support is left out (``None``).

    XID errors arrive as NVML events: the collector registers for critical XID events
    once and drains the queue on every ``collect``, so each sample carries the XIDs seen
    since the previous one.
    """

    name = "nvml"

    def __init__(self, nvml: ModuleType | Any | None = None, proc: ProcReader | None = None) -> None:
        if nvml is None:
            try:
                import pynvml
            except ImportError as exc:  # pragma: no cover - the package is a requirement
                raise CollectorError("nvidia-ml-py is not installed") from exc
            nvml = pynvml
        self.nvml: Any = nvml
        self.proc = proc or ProcReader()
        self._ready = False
        self._events: Any = None
        #: GPU index -> its GPM samples of the previous collect, per GPU instance id
        #: (``None``: the whole GPU), to measure the span to the next one.
        self._gpm: dict[int, dict[int | None, Any]] = {}

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
            for samples in self._gpm.values():
                self._free(samples.values())
            self._gpm.clear()
            self.nvml.nvmlShutdown()
            self._ready = False

    def _free(self, samples: Any) -> None:
        for sample in samples:
            self._optional(self.nvml.nvmlGpmSampleFree, sample)

    def _gpm_utilization(self, index: int, handle: Any) -> float | None:
        """Mean graphics engine activity (%) of the GPU's instances since the previous
        collect, from GPM samples; ``None`` without GPM or before a second sample."""
        nvml = self.nvml
        if not hasattr(nvml, "nvmlGpmMigSampleGet"):
            return None  # a library older than GPM
        support = self._optional(nvml.nvmlGpmQueryDeviceSupport, handle)
        if support is None or not support.isSupportedDevice:
            return None
        samples: dict[int | None, Any] = {}
        instances: list[int | None] = list(self._gpu_instances(handle)) or [None]  # None: the whole GPU
        for instance in instances:
            sample = self._optional(nvml.nvmlGpmSampleAlloc)
            if sample is None:
                continue
            taken = (
                self._optional(nvml.nvmlGpmSampleGet, handle, sample)
                if instance is None
                else self._optional(nvml.nvmlGpmMigSampleGet, handle, instance, sample)
            )
            if taken is None:
                self._free([sample])
                continue
            samples[instance] = sample
        previous = self._gpm.pop(index, {})
        self._gpm[index] = samples
        values = [
            value
            for instance, sample in samples.items()
            if instance in previous and (value := self._graphics_util(previous[instance], sample)) is not None
        ]
        self._free(previous.values())
        return sum(values) / len(values) if values else None

    def _gpu_instances(self, handle: Any) -> list[int]:
        """The GPU instance ids of a MIG-enabled GPU's slices (none found: ``[]``)."""
        nvml = self.nvml
        ids: set[int] = set()
        for k in range(self._optional(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
            mig = self._optional(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, k)
            instance = self._optional(nvml.nvmlDeviceGetGpuInstanceId, mig) if mig is not None else None
            if instance is not None:
                ids.add(int(instance))
        return sorted(ids)

    def _graphics_util(self, first: Any, second: Any) -> float | None:
        """``NVML_GPM_METRIC_GRAPHICS_UTIL`` between two samples, or ``None``."""
        nvml = self.nvml
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 1
        request.sample1, request.sample2 = first, second
        request.metrics[0].metricId = nvml.NVML_GPM_METRIC_GRAPHICS_UTIL
        if self._optional(nvml.nvmlGpmMetricsGet, request) is None:
            return None
        metric = request.metrics[0]
        return float(metric.value) if metric.nvmlReturn == nvml.NVML_SUCCESS else None

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

    def _process(self, info: Any) -> Process:
        """One of NVML's running processes, with its owner and command name from ``/proc``."""
        pid = int(info.pid)
        owner = self.proc.owner(pid)
        return Process(pid, int(info.usedGpuMemory or 0) // MIB, owner.uid, owner.user, owner.command)

    def collect(self) -> list[Reading]:
        self._init()
        nvml = self.nvml
        xids = self._pending_xids()
        readings = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            util = self._optional(nvml.nvmlDeviceGetUtilizationRates, h)
            utilization = float(util.gpu) if util is not None else self._gpm_utilization(i, h)
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
                    # NOT_SUPPORTED (MIG mode) and no GPM span: unmeasured, which is not idle.
                    utilization_pct=utilization,
                    memory_used_mib=int(memory.used) // MIB,
                    memory_total_mib=int(memory.total) // MIB,
                    temperature_c=float(temperature) if temperature is not None else None,
                    power_w=power / 1000 if power is not None else None,
                    power_limit_w=limit / 1000 if limit is not None else None,
                    sm_clock_mhz=int(clock) if clock is not None else None,
                    throttle_reasons=throttle_names(int(reasons)) if reasons is not None else (),
                    xid=xids.get(i),
                    ecc_errors=int(ecc) if ecc is not None else None,
                    processes=tuple(self._process(p) for p in processes if p is not None),
                )
            )
        return readings


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
