"""Live readings of a running phone for the live view: the tail of its sampler's own trace.

While an attempt loads the GPU and runs its benchmark, a TraceWatcher reads the newest records of
the run's trace.bin about once a second and hands farm.analysis.latest.Readings (GPU busy, battery
power, temperature) to a callback. Why the trace and not the sysfs nodes: the sampler already reads
them at its own rate, so the live view adds no extra read of a fuel gauge or kgsl counter (on real
phones a PMIC/I2C transaction that can stall) and shows exactly what the run records. Why apart
from the run: the watcher has its own DeviceSession and thread, so the attempt's own sequence of
adb calls is unchanged; what it costs is one short `sh` on the phone per second (stat + tail of a
few KB), and only while someone watches (farm run's live view).

    with TraceWatcher(session, trace_path, calibration, status.show_readings) as watcher:
        ...
        watcher.follow(Phase.RUNNING)   # starts polling; Phase.RESTORING stops it
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from farm.analysis.latest import Readings, newest_readings
from farm.analysis.power import BatteryCalibration
from farm.device.session import DeviceSession
from farm.engine.collect import calibration_from_trace
from farm.engine.model import Phase
from farm.errors import FarmError
from farm.telemetry.trace import TraceFormatError, parse_trace

WATCH_INTERVAL_S = 1.0
WATCH_CALL_TIMEOUT_S = 5.0  # a poll that takes longer is given up (the next one tries again)
TAIL_RECORDS = 64  # records read back per poll: a few seconds at the default 20 Hz
HEADER_MAX_BYTES = 65536
WATCHED_PHASES = frozenset({Phase.LOADING, Phase.RUNNING})

# $1 trace, $2 header bytes, $3 record bytes, $4 records wanted: the newest complete records.
_TAIL = (
    's=$(stat -c %s "$1" 2>/dev/null) || exit 3; n=$(( (s - $2) / $3 )); k=$4; '
    '[ "$n" -lt "$k" ] && k=$n; [ "$k" -gt 0 ] || exit 4; '
    'tail -c $(( k * $3 + s - $2 - n * $3 )) "$1" | head -c $(( k * $3 ))'
)


class TraceWatcher:
    """Polls one run's trace while the attempt is in a watched phase (see the module docstring)."""

    def __init__(
        self,
        session: DeviceSession,
        trace_path: str,
        calibration: BatteryCalibration | None,
        on_readings: Callable[[Readings], None],
        *,
        interval_s: float = WATCH_INTERVAL_S,
        discharging: bool = False,
    ) -> None:
        self.session = session
        self.trace_path = trace_path
        self.calibration = calibration
        # Charging is switched off for the run: the newest gauge samples are a discharge and may
        # calibrate the current's sign and unit when the probe could not (it saw the phone plugged in).
        self.discharging = discharging
        self.on_readings = on_readings
        self.interval_s = interval_s
        self.polls = 0  # polls that gave readings
        self._header: bytes | None = None
        self._record_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, phase: Phase) -> None:
        """The attempt entered `phase`: watch while it loads or runs, stop after."""
        if phase in WATCHED_PHASES:
            self.start()
        elif phase is Phase.RESTORING:
            self._stop.set()  # no join here: an in-flight poll must not delay the restore

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"watch-{self.session.device_id}")
            self._thread.daemon = True
            self._thread.start()

    def stop(self) -> None:
        """Stop polling and wait (bounded by one poll) for the thread to end."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(WATCH_CALL_TIMEOUT_S * 2 + self.interval_s)

    def __enter__(self) -> TraceWatcher:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            readings = self.poll()
            if readings is not None and not self._stop.is_set():
                self.polls += 1
                self.on_readings(readings)

    def poll(self) -> Readings | None:
        """One look at the trace; None when there is nothing to show yet (or the phone is busy)."""
        try:
            if self._header is None and not self._read_header():
                return None
            assert self._header is not None
            result = self.session.script(
                _TAIL,
                self.trace_path,
                str(len(self._header)),
                str(self._record_bytes),
                str(TAIL_RECORDS),
                timeout_s=WATCH_CALL_TIMEOUT_S,
            )
            if not result.ok or not result.stdout_bytes:
                return None
            trace = parse_trace(self._header + result.stdout_bytes)
        except (FarmError, TraceFormatError):
            return None  # the attempt itself decides what a missing phone or trace means
        calibration = self.calibration
        if calibration is None and self.discharging:
            calibration = calibration_from_trace(trace)
        readings = newest_readings(trace, calibration)
        return readings if readings.t_ns is not None else None

    def _read_header(self) -> bool:
        result = self.session.shell(
            ["head", "-c", str(HEADER_MAX_BYTES), self.trace_path], timeout_s=WATCH_CALL_TIMEOUT_S
        )
        data = result.stdout_bytes if result.ok else b""
        end = data.find(b"\n")
        if end < 0:
            return False  # not written yet
        header = data[: end + 1]
        self._record_bytes = parse_trace(header).header.record_bytes
        self._header = header
        return True
