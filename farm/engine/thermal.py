"""Throttling seen while a run measures, and what the experiment's `on_throttle` makes of it.

A watch thread reads, every THROTTLE_POLL_S and once more at the end: each cpufreq policy's
scaling_max_freq (the kernel shows the thermal cap there: the cooling device's QoS request),
kgsl's thermal_pwrlevel (above the pinned level: the GPU is capped) and `dumpsys
thermalservice`'s "Thermal Status" (Android 10+; 1 = light throttling and up). A CPU is capped
when its maximum falls below what it was when the run started (or below its pin).

    with ThrottleWatch(session, policy_dirs, pinned_khz, kgsl_dir, pinned_pwrlevel) as watch:
        ...  # the benchmark
    report = watch.report()          # ThrottleReport: capped CPU / GPU, status, time to throttle
    next_state = throttle_decision(...)  # on_throttle: flag | retry | fail
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from farm.device.session import DeviceSession
from farm.engine.clocks import AppliedClocks
from farm.spec.clocks import OnThrottle
from farm.store import Metric, Outcome, RunState

THROTTLE_POLL_S = 5.0  # dumpsys thermalservice is a binder call: not more often than this
THERMAL_STATUS_LIGHT = 1  # android.os.PowerManager.THERMAL_STATUS_LIGHT
_STATUS = re.compile(r"^Thermal Status:\s*(\d+)", re.MULTILINE)
# $1: kgsl folder or ""; $2...: policy folders. `cpu DIR MAX_KHZ`, `kgsl LEVEL`, then the dump.
_SAMPLE = (
    'k=$1; shift; for d in "$@"; do echo "cpu $d $(cat "$d/scaling_max_freq" 2>/dev/null)"; done; '
    '[ -n "$k" ] && echo "kgsl $(cat "$k/thermal_pwrlevel" 2>/dev/null)"; '
    "dumpsys thermalservice 2>/dev/null | grep '^Thermal Status'; true"
)


@dataclass(frozen=True)
class ThrottleSample:
    cpu_max_khz: Mapping[str, int]
    kgsl_thermal_pwrlevel: int | None
    thermal_status: int | None


def parse_sample(text: str) -> ThrottleSample:
    """One `_SAMPLE` output (pure)."""
    cpu: dict[str, int] = {}
    kgsl = None
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["cpu"] and len(parts) == 3 and parts[2].isdigit():
            cpu[parts[1]] = int(parts[2])
        elif parts[:1] == ["kgsl"] and len(parts) == 2 and parts[1].isdigit():
            kgsl = int(parts[1])
    match = _STATUS.search(text)
    return ThrottleSample(cpu, kgsl, int(match.group(1)) if match else None)


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


@dataclass
class ThrottleWatch:
    """Samples throttling on its own thread while a run measures (see the module docstring)."""

    session: DeviceSession
    policy_dirs: Sequence[str]
    pinned_khz: Mapping[str, int] = field(default_factory=dict)
    kgsl_dir: str | None = None
    pinned_pwrlevel: int | None = None
    poll_s: float = THROTTLE_POLL_S

    def __post_init__(self) -> None:
        self._samples: list[tuple[float, ThrottleSample]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0
        self.error: str | None = None

    def _sample(self) -> None:
        try:
            text = self.session.script(_SAMPLE, self.kgsl_dir or "", *self.policy_dirs).stdout
        except Exception as error:  # the phone may be gone: the run's outcome says so, not this
            self.error = str(error)
            return
        self._samples.append((time.monotonic() - self._start, parse_sample(text)))

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._sample()

    def __enter__(self) -> ThrottleWatch:
        self._start = time.monotonic()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="throttle-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def report(self) -> ThrottleReport:
        return judge(self._samples, self.pinned_khz, self.pinned_pwrlevel)


def throttle_watch(
    session: DeviceSession, policy_dirs: Sequence[str], clocks: AppliedClocks | None
) -> ThrottleWatch:
    """The watch for a run on a phone prepared with these clocks."""
    if clocks is None:
        return ThrottleWatch(session, policy_dirs)
    return ThrottleWatch(session, policy_dirs, clocks.pinned_khz, clocks.kgsl_dir, clocks.pinned_pwrlevel)


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
