"""Plausible GPU curves for the demo and tests, driven by which GPUs jobs hold.

A busy GPU runs at 70-100% with a slow wave (a training loop's epochs), fills most of
its memory, warms towards 70 °C and draws most of its power limit; an idle GPU sits at
0%, a few hundred MiB, about 32 °C and idle power. The same GPU at the same second gives
the same reading (noise is seeded by GPU, time and ``seed``), so tests can assert on it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from agent.collectors.base import Reading

POWER_LIMIT_W = 700.0
IDLE_POWER_W = 70.0


@dataclass(frozen=True, slots=True)
class SimulatedGpu:
    index: int
    memory_mib: int
    busy: bool


def simulate(gpus: Iterable[SimulatedGpu], at: datetime, *, seed: str = "") -> list[Reading]:
    """One reading per GPU at ``at``."""
    t = at.timestamp()
    readings = []
    for gpu in gpus:
        rng = random.Random(f"{seed}/{gpu.index}/{int(t)}")
        if gpu.busy:
            wave = 0.5 + 0.5 * math.sin(2 * math.pi * t / 600 + gpu.index)
            util = min(100.0, 70 + 25 * wave + rng.uniform(-5, 5))
            memory = int(gpu.memory_mib * (0.75 + 0.1 * wave))
            temperature = 55 + 15 * util / 100 + rng.uniform(-1, 1)
            power = IDLE_POWER_W + (POWER_LIMIT_W - IDLE_POWER_W) * util / 100 * 0.9
        else:
            util = 0.0
            memory = 300 + rng.randrange(0, 200)
            temperature = 32 + rng.uniform(-1, 1)
            power = IDLE_POWER_W + rng.uniform(-5, 5)
        readings.append(
            Reading(
                index=gpu.index,
                utilization_pct=round(util, 1),
                memory_used_mib=min(memory, gpu.memory_mib),
                memory_total_mib=gpu.memory_mib,
                temperature_c=round(temperature, 1),
                power_w=round(power, 1),
                power_limit_w=POWER_LIMIT_W,
                sm_clock_mhz=1980 if gpu.busy else 345,
            )
        )
    return readings
