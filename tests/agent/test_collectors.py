"""Collectors read real output formats; the NVML collector is tested at the pynvml seam."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.collectors.base import CollectorError, Process, throttle_names
from agent.collectors.dcgm import parse_dcgm_metrics
from agent.collectors.nvml import NvmlCollector
from agent.collectors.owners import ProcReader
from agent.collectors.simulated import SimulatedGpu, simulate
from tests.builders import T0

FIXTURES = Path(__file__).parent / "fixtures"
MIB = 1024 * 1024


# --- dcgm-exporter -------------------------------------------------------------------------


def test_dcgm_scrape_gives_one_reading_per_physical_gpu():
    readings = parse_dcgm_metrics((FIXTURES / "dcgm-exporter-a800-mig.prom").read_text())
    assert [(r.index, r.uuid) for r in readings] == [
        (0, "GPU-1f027ee8-6e1e-2b8c-0108-3d370e5f0418"),
        (1, "GPU-9e5b8fec-61bf-5124-a0a9-079af1b65cc6"),
    ]
    whole = readings[1]
    assert (whole.utilization_pct, whole.memory_used_mib, whole.memory_total_mib) == (0, 2, 81228)
    assert (whole.temperature_c, whole.power_w, whole.sm_clock_mhz, whole.xid) == (27, 55.942, 210, None)


def test_dcgm_mig_gpu_without_gpu_util_reads_engine_activity_and_sums_its_slices():
    mig = parse_dcgm_metrics((FIXTURES / "dcgm-exporter-a800-mig.prom").read_text())[0]
    assert mig.utilization_pct == 0.0  # from DCGM_FI_PROF_GR_ENGINE_ACTIVE: GPU_UTIL is absent
    assert (mig.memory_used_mib, mig.memory_total_mib) == (20, 2 * 19967)
    assert (mig.temperature_c, mig.power_w) == (33, 78.174)


def test_dcgm_mig_slices_become_readings_when_their_portal_index_is_known():
    text = (
        (FIXTURES / "dcgm-exporter-a800-mig.prom")
        .read_text()
        .replace(
            'GPU_I_ID="5",Hostname="msxf-hpc-64-35-ai",DCGM_FI_DRIVER_VERSION="535.129.03",'
            'DCGM_FI_PROCESS_NAME="/usr/bin/dcgm-exporter"} 0.000000',
            'GPU_I_ID="5",Hostname="msxf-hpc-64-35-ai",DCGM_FI_DRIVER_VERSION="535.129.03",'
            'DCGM_FI_PROCESS_NAME="/usr/bin/dcgm-exporter"} 0.5',
        )
    )
    readings = parse_dcgm_metrics(text, {(0, 3): 8, (0, 5): 9})
    by_index = {r.index: r for r in readings}
    assert sorted(by_index) == [0, 1, 8, 9]
    assert (by_index[8].utilization_pct, by_index[9].utilization_pct) == (0.0, 50.0)
    assert by_index[0].utilization_pct == 25.0  # the mean of its slices
    assert by_index[9].memory_used_mib == 10


def test_dcgm_reports_the_last_xid_and_treats_zero_as_none():
    line = 'DCGM_FI_DEV_XID_ERRORS{gpu="2",UUID="GPU-x"} 79\nDCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-x"} 5\n'
    assert parse_dcgm_metrics(line)[0].xid == 79
    assert parse_dcgm_metrics(line.replace(" 79", " 0"))[0].xid is None


def test_dcgm_garbage_is_a_collector_error():
    with pytest.raises(CollectorError):
        parse_dcgm_metrics("this is { not prometheus")


# --- NVML at the pynvml seam -------------------------------------------------------------------


class NVMLError(Exception):
    pass


class FakeNvml:
    """The subset of ``pynvml`` the collector calls, over two GPUs; GPU 1 lacks ECC."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    nvmlEventTypeXidCriticalError = 8

    def __init__(self, *, init_fails: bool = False, mig: tuple[str, ...] = ()) -> None:
        self.init_fails = init_fails
        self.mig = mig  # handles of GPUs in MIG mode
        self.events: list[SimpleNamespace] = []
        self.shutdown = False

    def nvmlInit(self):
        if self.init_fails:
            raise NVMLError("Driver Not Loaded")

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetIndex(self, handle):
        return int(handle[1:])

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}"

    def nvmlDeviceGetUtilizationRates(self, h):
        if h in self.mig:  # what the driver answers for a MIG-enabled GPU
            raise NVMLError("Not Supported")
        return SimpleNamespace(gpu=87 if h == "h0" else 0, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=40960 * MIB, total=143771 * MIB, free=0)

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 71

    def nvmlDeviceGetPowerUsage(self, h):
        return 612345  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700000

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == self.NVML_CLOCK_SM
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4 | 0x1 if h == "h0" else 0

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        if h == "h1":
            raise NVMLError("Not Supported")
        return 2

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=4242, usedGpuMemory=1024 * MIB)] if h == "h0" else []

    def nvmlEventSetCreate(self):
        return "events"

    def nvmlDeviceRegisterEvents(self, h, kinds, events):
        assert kinds == self.nvmlEventTypeXidCriticalError

    def nvmlEventSetWait_v2(self, events, timeout_ms):
        if not self.events:
            raise NVMLError("Timeout")
        return self.events.pop(0)


class FakeGpmNvml(FakeNvml):
    """``FakeNvml`` with GPU performance monitoring: GPU 1 is in MIG mode with GPU
    instances 1 and 2, whose graphics engines have been busy ``activity[instance]``
    percent of the span between two samples."""

    NVML_SUCCESS = 0
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_GRAPHICS_UTIL = 1

    def __init__(self, *, supported: bool = True) -> None:
        super().__init__(mig=("h1",))
        self.supported = supported
        self.activity = {1: 30.0, 2: 70.0}
        self.live: set[int] = set()  # samples allocated and not yet freed
        self._next = 0

    class c_nvmlGpmMetricsGet_t:  # pynvml's name
        def __init__(self) -> None:
            self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0)]

    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(isSupportedDevice=int(self.supported))

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return 7 if h in self.mig else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, k):
        if k >= 2:
            raise NVMLError("Not Found")
        return f"{h}/mig{k}"

    def nvmlDeviceGetGpuInstanceId(self, mig):
        return int(mig[-1]) + 1

    def nvmlGpmSampleAlloc(self):
        self._next += 1
        self.live.add(self._next)
        return SimpleNamespace(id=self._next, instance=None)

    def nvmlGpmSampleFree(self, sample):
        self.live.remove(sample.id)

    def nvmlGpmSampleGet(self, h, sample):
        raise NVMLError("Not Supported")  # a MIG-enabled GPU is sampled per instance

    def nvmlGpmMigSampleGet(self, h, instance, sample):
        sample.instance = instance
        return sample

    def nvmlGpmMetricsGet(self, request):
        assert request.sample1.instance == request.sample2.instance and request.sample1.id < request.sample2.id
        request.metrics[0].value = self.activity[request.sample2.instance]
        return request


def test_a_mig_gpu_reads_its_instances_mean_engine_activity_through_gpm_from_the_second_collect():
    fake = FakeGpmNvml()
    collector = NvmlCollector(fake)
    assert [r.utilization_pct for r in collector.collect()] == [87.0, None]  # no span yet: unmeasured
    assert [r.utilization_pct for r in collector.collect()] == [87.0, 50.0]  # (30 + 70) / 2
    fake.activity = {1: 0.0, 2: 10.0}
    assert collector.collect()[1].utilization_pct == 5.0
    assert len(fake.live) == 2  # only the last samples are kept, one per instance
    collector.close()
    assert fake.live == set()


def test_a_mig_gpu_without_gpm_stays_unmeasured():
    collector = NvmlCollector(FakeGpmNvml(supported=False))
    for _ in range(3):
        assert collector.collect()[1].utilization_pct is None


def test_nvml_reads_every_field_in_api_units(tmp_path):
    first, second = NvmlCollector(FakeNvml(), ProcReader(tmp_path)).collect()
    assert (first.index, first.uuid, first.utilization_pct) == (0, "GPU-h0", 87.0)
    assert (first.memory_used_mib, first.memory_total_mib) == (40960, 143771)
    assert (first.temperature_c, first.power_w, first.power_limit_w, first.sm_clock_mhz) == (71.0, 612.345, 700.0, 1980)
    assert first.throttle_reasons == ("sw_power_cap",)  # idle (0x1) is not a problem
    assert first.processes == (Process(4242, 1024),)  # its /proc shows no pid 4242: owner unknown
    assert (first.ecc_errors, second.ecc_errors) == (2, None)  # unsupported: left out


def fake_proc(root: Path, pid: int, *, uid: int, comm: str) -> None:
    """``root/<pid>/status`` and ``comm`` as Linux writes them (real, effective, saved, fs uids)."""
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "status").write_text(f"Name:\t{comm}\nUmask:\t0022\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    (root / str(pid) / "comm").write_text(f"{comm}\n")


def test_nvml_names_each_process_owner_and_command_from_proc(tmp_path):
    fake_proc(tmp_path, 4242, uid=1002, comm="python3")
    proc = ProcReader(tmp_path, names={1002: "bob"}.__getitem__)
    [first, _] = NvmlCollector(FakeNvml(), proc).collect()
    assert first.processes == (Process(4242, 1024, uid=1002, user="bob", command="python3"),)
    assert first.to_payload(T0)["processes"] == [
        {"pid": 4242, "used_memory_mib": 1024, "uid": 1002, "user": "bob", "command": "python3"}
    ]


def test_a_process_gone_before_proc_is_read_has_an_unknown_owner(tmp_path):
    [first, _] = NvmlCollector(FakeNvml(), ProcReader(tmp_path)).collect()
    assert first.processes == (Process(4242, 1024),)
    assert first.to_payload(T0)["processes"] == [{"pid": 4242, "used_memory_mib": 1024}]


def test_an_unnamed_uid_is_sent_without_a_user_name(tmp_path):
    fake_proc(tmp_path, 4242, uid=7777, comm="train")
    [first, _] = NvmlCollector(FakeNvml(), ProcReader(tmp_path, names=lambda uid: "")).collect()
    assert first.processes == (Process(4242, 1024, uid=7777, command="train"),)


def test_a_mig_enabled_gpu_is_unmeasured_through_nvml_never_0_percent():
    busy, mig = NvmlCollector(FakeNvml(mig=("h1",))).collect()
    assert busy.utilization_pct == 87.0 and mig.utilization_pct is None
    assert mig.to_payload(T0)["utilization_pct"] is None and mig.memory_used_mib == 40960


def test_nvml_xid_events_arrive_once_with_the_next_sample():
    fake = FakeNvml()
    collector = NvmlCollector(fake)
    collector.collect()
    fake.events.append(SimpleNamespace(device="h1", eventData=79))
    assert [r.xid for r in collector.collect()] == [None, 79]
    assert [r.xid for r in collector.collect()] == [None, None]


def test_nvml_without_a_driver_is_a_collector_error():
    with pytest.raises(CollectorError, match="Driver Not Loaded"):
        NvmlCollector(FakeNvml(init_fails=True)).collect()


def test_throttle_names_ignore_idle_and_application_clocks():
    assert throttle_names(0x1 | 0x2) == ()
    assert throttle_names(0x8 | 0x80) == ("hw_slowdown", "hw_power_brake_slowdown")


# --- simulated -----------------------------------------------------------------------------------


def test_simulated_busy_gpus_work_and_idle_ones_rest():
    busy, idle = simulate([SimulatedGpu(0, 81920, True), SimulatedGpu(1, 81920, False)], T0, seed="n1")
    assert (busy.utilization_pct or 0) >= 65 and busy.memory_used_mib > 60000 and (busy.temperature_c or 0) > 55
    assert idle.utilization_pct == 0 and idle.memory_used_mib < 1000 and (idle.temperature_c or 99) < 40


def test_simulated_is_deterministic_per_gpu_and_second():
    gpus = [SimulatedGpu(0, 24576, True)]
    assert simulate(gpus, T0, seed="a") == simulate(gpus, T0, seed="a")
