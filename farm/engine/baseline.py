"""The idle power baseline: once per phone per `farm run`, before its first run.

Energy per inference is the energy ABOVE what the phone draws doing nothing (screen, radios, the
OS), and that idle draw differs from phone to phone and from day to day, so it is measured on the
same phone in the same session (field-practices.md): charging off as for a run, the phone held
awake, the run sampler recording nothing of ours for at least `telemetry.idle_baseline_s`, longer
until the fuel gauge has updated MIN_IDLE_READINGS times (slow gauges), at most
IDLE_EXTEND_FACTOR x as long. A phone whose charging stays on, or that has no battery power
source, gets no baseline and a note: its runs then get no net energy rather than a wrong one.

The baseline is kept in the store (an event of kind "baseline" with the window on the phone's
clock) and in every run's env.json (`idle_baseline`), where the metrics read it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from farm.analysis.power import BatteryCalibration, battery_power, window_power_mw
from farm.analysis.series import DEFAULT_SOURCES, TraceLike
from farm.device import controls
from farm.engine.collect import calibration_from_trace, calibration_of
from farm.engine.conditions import disable_charging, mark_screen, restore_power
from farm.engine.model import Gates, IdleBaseline, PreparedPhone
from farm.engine.onphone import SAMPLER, TRACE, RunDir, trace_sampler
from farm.errors import FarmError
from farm.store import Store
from farm.store import devices as device_store
from farm.telemetry.trace import parse_trace

# Gauge readings the idle window needs (after the first one, which may predate charging off).
MIN_IDLE_READINGS = 3
# A slow gauge extends the window up to this many times idle_baseline_s.
IDLE_EXTEND_FACTOR = 8.0
# How often an extended window looks again at the trace so far.
RECHECK_S = 1.0
ENV_KEY = "idle_baseline"
CHARGING_NOTE = "no idle baseline: charging could not be disabled, so battery power is not the phone's draw"
NO_UPDATE_NOTE = (
    "no idle baseline: the fuel gauge did not update while the phone idled (raise telemetry.idle_baseline_s)"
)


def idle_power_mw_of(env: Mapping[str, object]) -> float | None:
    """The idle baseline recorded in a run's env.json (as stored), or None."""
    baseline = env.get(ENV_KEY)
    if not isinstance(baseline, Mapping):
        return None
    value = baseline.get("power_mw")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def baseline_of_trace(
    trace: TraceLike, calibration: BatteryCalibration | None, *, charging_disabled: bool
) -> IdleBaseline:
    """Pure: the idle baseline of an idle recording. The first gauge reading is left out (it may
    be from before charging was switched off); fewer than one reading after it: no baseline."""
    if not charging_disabled:
        return IdleBaseline(None, note=CHARGING_NOTE)
    try:
        power = battery_power(trace, calibration)
    except ValueError as error:
        return IdleBaseline(None, charging_disabled=True, note=f"no idle baseline: {error}")
    if power is None or len(power) == 0:
        return IdleBaseline(None, charging_disabled=True, note="no idle baseline: no battery power source")
    start_ns = int(power.t_ns[0]) + 1
    end_ns = max(_last_sample_ns(trace), int(power.t_ns[-1])) + 1
    trailing = bool(calibration.gauge_trailing) if calibration is not None else False
    mean_mw, readings = window_power_mw(power, start_ns, end_ns, trailing=trailing)
    if readings == 0:
        return IdleBaseline(None, charging_disabled=True, note=NO_UPDATE_NOTE)
    # Its first point is the value held when the recording started, not an update: gaps after it.
    gaps_s = np.diff(power.t_ns[1:]) / 1e9
    interval_s = float(np.median(gaps_s)) if len(gaps_s) else None
    return IdleBaseline(
        mean_mw, readings, (end_ns - start_ns) / 1e9, start_ns, end_ns, True, gauge_interval_s=interval_s
    )


def _gauge_pending(baseline: IdleBaseline) -> bool:
    """Would waiting longer give (more) gauge readings? Not when there is no power at all."""
    if baseline.power_mw is None:
        return baseline.note == NO_UPDATE_NOTE
    return baseline.readings < MIN_IDLE_READINGS


def _last_sample_ns(trace: TraceLike) -> int:
    current = trace.series(DEFAULT_SOURCES.battery_current)
    if current is None or len(current) == 0:
        current = trace.series(DEFAULT_SOURCES.battery_power)
    return int(current.t_ns[-1]) if current is not None and len(current) else 0


def _read_baseline(
    prepared: PreparedPhone, trace_path: str, charging_off: bool, max_bytes: int
) -> tuple[IdleBaseline, bytes]:
    data = prepared.session.pull_many([trace_path], max_bytes=max_bytes).get(trace_path, b"")
    if not data:
        return IdleBaseline(None, charging_disabled=charging_off, note="no idle baseline: no trace"), data
    trace = parse_trace(data)
    calibration = calibration_of(prepared.caps)
    if calibration is None and charging_off:
        calibration = calibration_from_trace(trace)
    return baseline_of_trace(trace, calibration, charging_disabled=charging_off), data


def measure_idle_baseline(
    prepared: PreparedPhone,
    gates: Gates,
    store: Store,
    cancel: threading.Event,
    artifacts: Path | None = None,
) -> IdleBaseline:
    """Sample the idle phone (charging off as for runs) and return its baseline; the phone's
    charging is restored whatever happens. `artifacts`: where to keep the idle trace."""
    started = time.monotonic()
    baseline = _measure(prepared, gates, store, cancel, artifacts)
    return dataclasses.replace(baseline, took_s=time.monotonic() - started)


def _measure(
    prepared: PreparedPhone,
    gates: Gates,
    store: Store,
    cancel: threading.Event,
    artifacts: Path | None,
) -> IdleBaseline:
    if gates.idle_baseline_s <= 0:
        return IdleBaseline(None, note="idle baseline disabled (telemetry.idle_baseline_s: 0)")
    session = prepared.session
    run_dir = RunDir.of(f"idle-{int(time.time() * 1000)}")
    notes: list[str] = []
    charging_off = False
    started = time.monotonic()
    baseline = IdleBaseline(None, note="no idle baseline: interrupted")
    data = b""
    screen_timeout: str | None = None
    try:
        run_dir.create(session)
        own = mark_screen(prepared, store)  # the marker first: a phone that dies keeps it
        held = controls.hold_screen(session)  # as the runs hold it (farm-run.sh)
        screen_timeout = own if own is not None else held
        if gates.disable_charging:
            charging_off = disable_charging(prepared, store, notes)
        if not charging_off:
            return IdleBaseline(None, note=CHARGING_NOTE)
        trace_path = run_dir.file(TRACE)
        sampler = trace_sampler(
            session, run_dir, prepared.programs[SAMPLER].phone_path, prepared.caps, gates.rate_hz
        )
        if sampler is None:
            return IdleBaseline(
                None, charging_disabled=True, note="no idle baseline: no battery power source"
            )
        with sampler:
            if cancel.wait(gates.idle_baseline_s):
                return baseline
            limit = started + gates.idle_baseline_s * IDLE_EXTEND_FACTOR
            while True:
                baseline, data = _read_baseline(prepared, trace_path, charging_off, gates.max_file_bytes)
                if not _gauge_pending(baseline) or time.monotonic() >= limit or cancel.wait(RECHECK_S):
                    break
        baseline, data = _read_baseline(prepared, trace_path, charging_off, gates.max_file_bytes)
    except FarmError as error:
        baseline = IdleBaseline(None, charging_disabled=charging_off, note=f"no idle baseline: {error}")
    finally:
        try:
            restore_power(prepared, store, charging_off=charging_off)
            controls.release_screen(session, screen_timeout)  # after charging: stay-on holds again
            if screen_timeout is not None:
                device_store.clear_screen_held(store, prepared.phone.device_id)
            session.script('rm -rf "$1"', run_dir.path)
        except FarmError as error:
            notes.append(f"charging not restored yet after the idle baseline: {error}")
    if artifacts is not None and data:
        artifacts.mkdir(parents=True, exist_ok=True)
        (artifacts / "trace.bin").write_bytes(data)
    if notes and baseline.note is None:
        return dataclasses.replace(baseline, note="; ".join(notes))
    return baseline
