"""Processes of one run on the phone: the run folder, the sampler, the background load, the
benchmark. Each background process is a context manager that stops it on exit, whatever happened.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from farm import safe_json
from farm.device.session import FARM_ROOT, DeviceSession
from farm.errors import CommandTimeout
from farm.experiment.sections import Intensity
from farm.telemetry.probe import Capabilities
from farm.telemetry.sampler import default_sources, sampler_argv

# The programs farm deploys besides the benchmark (device_agents/ and kernels/gpuload).
PROBE = "farm-probe"
SAMPLER = "farm-sampler"
PAGECACHE = "farm-pagecache"  # drops and counts a file's page-cache pages (farm.engine.pagecache)
LOAD = "gpuload"
RUNS_DIR = f"{FARM_ROOT}/runs"
TRACE = "trace.bin"  # the sampler's output in a run folder
CL_CACHE_DIR = f"{FARM_ROOT}/cache"
# One adb round trip waits on the phone this long for the benchmark to end, so polling costs
# few calls while the end of a run is still seen within POLL_STEP_S.
LONG_POLL_S = 5.0
POLL_STEP_S = 0.05


@dataclass(frozen=True)
class RunDir:
    """The phone folder of one run: /data/local/tmp/farm/runs/<run-id>/."""

    path: str

    @classmethod
    def of(cls, run_id: str) -> RunDir:
        return cls(f"{RUNS_DIR}/{run_id}")

    def file(self, name: str) -> str:
        return f"{self.path}/{name}"

    def create(self, session: DeviceSession) -> None:
        session.script('rm -rf "$1" && mkdir -p "$1" "$2"', self.path, CL_CACHE_DIR, check=True)


class Background:
    """A program started detached on the phone (by pid), stopped (TERM, then KILL) on exit."""

    def __init__(self, session: DeviceSession, run_dir: RunDir, name: str, argv: Sequence[str]) -> None:
        self.session = session
        self.run_dir = run_dir
        self.name = name
        self.argv = tuple(argv)
        self.pid: int | None = None
        self.stdout = run_dir.file(f"{name}.out")
        self.stderr = run_dir.file(f"{name}.err")
        self.exit_file = run_dir.file(f"{name}.exit")
        self.exited = False

    def __enter__(self) -> Background:
        self.pid = self.session.start(
            self.argv,
            workdir=self.run_dir.path,
            stdout=self.stdout,
            stderr=self.stderr,
            exit_file=self.exit_file,
        )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.pid is None or self.exited:
            return
        try:
            self.session.stop(self.pid, grace_s=1.0)
        except Exception:
            # The phone may be gone (that is often why we are here); recovery handles it later.
            if kind is None:
                raise

    def exit_code(self) -> int | None:
        text = self.session.read_text(self.exit_file)
        return int(text.strip()) if text and text.strip().lstrip("-").isdigit() else None

    def wait(self, timeout_s: float) -> int | None:
        """Wait for the program to end; its exit code, or None at the timeout.

        Each adb call waits on the phone up to LONG_POLL_S, so a long run costs few calls."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            window = min(LONG_POLL_S, remaining)
            steps = max(1, int(window / POLL_STEP_S))
            try:
                result = self.session.script(
                    'i=0; while [ ! -f "$1" ] && [ "$i" -lt "$2" ]; do sleep "$3"; i=$((i+1)); done; '
                    'cat "$1" 2>/dev/null',
                    self.exit_file,
                    str(steps),
                    str(POLL_STEP_S),
                    timeout_s=window + self.session.default_timeout_s,
                )
            except CommandTimeout:
                continue
            text = result.stdout.strip()
            if text.lstrip("-").isdigit():
                self.exited = True
                return int(text)

    def read_stdout(self) -> str:
        return self.session.read_text(self.stdout) or ""


def trace_sampler(
    session: DeviceSession, run_dir: RunDir, binary: str, caps: Capabilities, rate_hz: float
) -> Background | None:
    """farm-sampler over the phone's telemetry (farm.telemetry.sampler.default_sources: battery,
    GPU busy and frequency, the relevant thermal zones) into the run folder's trace.bin; None when
    the phone has no readable source at all."""
    sources = default_sources(caps)
    if not sources:
        return None
    return Background(
        session, run_dir, "sampler", sampler_argv(binary, sources, rate_hz, run_dir.file(TRACE))
    )


def gpu_busy_path(caps: Capabilities) -> str | None:
    """The GPU busy counter gpuload steers by, when the phone has a readable one."""
    busy = caps.gpu.busy
    return busy.path if busy is not None and busy.usable else None


def load_argv(
    binary: str, target: float, intensity: Intensity, busy_path: str | None, period_ms: int = 250
) -> list[str]:
    argv = [
        binary,
        f"--target={target:g}",
        f"--intensity={intensity.value}",
        f"--period-ms={period_ms}",
        f"--cl-cache={CL_CACHE_DIR}",
    ]
    return argv + ([f"--busy-path={busy_path}"] if busy_path is not None else [])


_ACHIEVED_KEYS = ("achieved", "achieved_util", "utilization", "util", "busy", "load")


def last_achieved_load(jsonl: str) -> float | None:
    """The last achieved utilisation (0..1) that gpuload reported in its JSON Lines."""
    achieved = None
    for line in jsonl.splitlines():
        try:
            event = safe_json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        for key in _ACHIEVED_KEYS:
            value = event.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                achieved = float(value) / (100.0 if value > 1.0 else 1.0)
                break
    return achieved
