"""Throttling seen while a run measures, and what the experiment's `on_throttle` makes of it.

The run script (device_agents/run/farm-run.sh) samples when the benchmark starts, every second
while it runs (farm.engine.runscript.THROTTLE_POLL_S) and once more at its end: each cpufreq
policy's scaling_max_freq (the kernel shows the thermal cap there: the cooling device's QoS
request) and kgsl's thermal_pwrlevel (above the pinned level: the GPU is capped); every fifth
second or so (STATUS_POLL_S, a binder call) and at the end also `dumpsys thermalservice`'s
"Thermal Status" (Android 10+; 1 = light throttling and up). So time_to_throttle_s is within
about a second of the cap, which a sustained run's figure marks. A CPU is capped
when its maximum falls below what it was when the run started (or below its pin).

    samples = [(seconds_since_start, parse_sample(text)), ...]   # the script's throttle blocks
    report = judge(samples, pinned_khz, pinned_pwrlevel)  # ThrottleReport: capped CPU / GPU, status
    next_state = throttle_decision(...)  # on_throttle: flag | retry | fail
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from farm.device.android import parse_hal_temperatures
from farm.experiment.clocks import OnThrottle
from farm.store import Metric, Outcome, RunState

THERMAL_STATUS_LIGHT = 1  # android.os.PowerManager.THERMAL_STATUS_LIGHT
_STATUS = re.compile(r"^Thermal Status:\s*(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class ThrottleSample:
    cpu_max_khz: Mapping[str, int]
    kgsl_thermal_pwrlevel: int | None
    thermal_status: int | None
    # The pinned clock nodes (farm.engine.clockhold) as they read: path -> text ("" unreadable).
    nodes: Mapping[str, str] = field(default_factory=dict)
    # The thermal HAL's temperatures (°C by sensor) where no thermal node is readable.
    hal_temps_c: Mapping[str, float] = field(default_factory=dict)


def parse_sample(text: str) -> ThrottleSample:
    """One sample: `cpu DIR MAX_KHZ` lines, `kgsl LEVEL`, `node PATH VALUE` lines, then dumpsys
    thermalservice's status (pure)."""
    cpu: dict[str, int] = {}
    nodes: dict[str, str] = {}
    kgsl = None
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["cpu"] and len(parts) == 3 and parts[2].isdigit():
            cpu[parts[1]] = int(parts[2])
        elif parts[:1] == ["kgsl"] and len(parts) == 2 and parts[1].isdigit():
            kgsl = int(parts[1])
        elif parts[:1] == ["node"] and len(parts) >= 2:
            nodes[parts[1]] = " ".join(parts[2:])
    match = _STATUS.search(text)
    hal = parse_hal_temperatures(text.splitlines())
    return ThrottleSample(cpu, kgsl, int(match.group(1)) if match else None, nodes, hal)


def hal_temperature_trace(samples: Sequence[tuple[float, ThrottleSample]]) -> list[tuple[float, float]]:
    """(seconds since the watch began, hottest HAL sensor °C) of each sample that carried the
    thermal HAL's readings: the run's temperature trace where no thermal node is readable."""
    return [(round(at_s, 3), max(s.hal_temps_c.values())) for at_s, s in samples if s.hal_temps_c]


@dataclass(frozen=True)
class ThrottleReport:
    cpu_capped: tuple[str, ...] = ()  # policy folders whose maximum fell
    gpu_capped: bool = False
    thermal_status_max: int | None = None
    time_to_throttle_s: float | None = None  # from the watch's start to the first throttled sample
    samples: int = 0

    @property
    def throttled(self) -> bool:
        status = self.thermal_status_max is not None and self.thermal_status_max >= THERMAL_STATUS_LIGHT
        return bool(self.cpu_capped) or self.gpu_capped or status

    def describe(self) -> str:
        parts = (
            [f"CPU max lowered on {', '.join(d.rsplit('/', 1)[-1] for d in self.cpu_capped)}"]
            if self.cpu_capped
            else []
        )
        parts += ["GPU capped (kgsl thermal_pwrlevel)"] if self.gpu_capped else []
        if self.thermal_status_max:
            parts.append(f"thermal status {self.thermal_status_max}")
        return "; ".join(parts) or "not throttled"

    def to_json(self) -> dict[str, object]:
        """As env.json's `throttle` carries it."""
        return {
            "throttled": self.throttled,
            "cpu_capped": list(self.cpu_capped),
            "gpu_capped": self.gpu_capped,
            "thermal_status_max": self.thermal_status_max,
            "time_to_throttle_s": self.time_to_throttle_s,
            "samples": self.samples,
        }

    def metrics(self) -> list[Metric]:
        metrics = [
            Metric("throttled_cpu_cap", float(bool(self.cpu_capped)), "bool"),
            Metric("throttled_gpu_cap", float(self.gpu_capped), "bool"),
        ]
        if self.thermal_status_max is not None:
            metrics.append(Metric("thermal_status_max", float(self.thermal_status_max), "status"))
        if self.time_to_throttle_s is not None:
            metrics.append(Metric("time_to_throttle_s", self.time_to_throttle_s, "s"))
        return metrics


def judge(
    samples: Sequence[tuple[float, ThrottleSample]],
    pinned_khz: Mapping[str, int],
    pinned_pwrlevel: int | None,
) -> ThrottleReport:
    """Throttling over the samples (seconds since the start, sample), pure. A policy's reference
    maximum is its pin, else its first sample."""
    if not samples:
        return ThrottleReport()
    reference = {**samples[0][1].cpu_max_khz, **pinned_khz}
    floor_level = pinned_pwrlevel or 0
    capped: dict[str, None] = {}
    gpu = False
    status_max: int | None = None
    first: float | None = None
    for at_s, sample in samples:
        now_capped = [d for d, khz in sample.cpu_max_khz.items() if d in reference and khz < reference[d]]
        capped.update(dict.fromkeys(now_capped))
        gpu_now = sample.kgsl_thermal_pwrlevel is not None and sample.kgsl_thermal_pwrlevel > floor_level
        gpu = gpu or gpu_now
        if sample.thermal_status is not None:
            status_max = max(status_max or 0, sample.thermal_status)
        hot = (sample.thermal_status or 0) >= THERMAL_STATUS_LIGHT
        if first is None and (now_capped or gpu_now or hot):
            first = round(at_s, 3)
    return ThrottleReport(tuple(capped), gpu, status_max, first, len(samples))


def throttle_decision(
    next_state: RunState,
    outcome: Outcome,
    report: ThrottleReport | None,
    policy: OnThrottle,
    *,
    attempts: int,
    max_attempts: int,
) -> tuple[RunState, str | None]:
    """Where a DONE-but-throttled run goes under `on_throttle` (pure), and the reason to record.
    flag keeps it (its validity says not_throttled = false); retry runs it again after the
    cooldown gate while attempts are left, then keeps it flagged; fail fails it."""
    if outcome is not Outcome.DONE or report is None or not report.throttled:
        return next_state, None
    why = f"throttled: {report.describe()}"
    if policy is OnThrottle.RETRY and attempts < max_attempts:
        return RunState.PENDING, f"{why}; retrying after the cooldown"
    if policy is OnThrottle.FAIL:
        return RunState.FAILED, why
    return next_state, why
