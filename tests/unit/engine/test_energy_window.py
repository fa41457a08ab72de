"""The energy window: a slow fuel gauge lengthens a run's measuring window to hold
telemetry.gauge_updates updates, at most max_seconds; nothing changes without energy, without a
known gauge interval, or when min_seconds already covers the updates."""

from __future__ import annotations

import pytest

from farm.engine.measurement import EnergyWindow, energy_window, gauge_interval_s
from farm.engine.model import IdleBaseline
from farm.experiment import load_text

SLOW = 10.0  # s between updates, a Nexus 6P-like gauge


def test_slow_gauge_extends_the_window_to_the_updates_wanted() -> None:
    window = energy_window(1.0, 120.0, energy=True, interval_s=SLOW, updates=5)
    assert window == EnergyWindow(50.0, extended=True, capped=False, gauge_interval_s=SLOW, wanted_s=50.0)
    metrics = {m.name: m.value for m in window.to_metrics()}
    assert metrics == {
        "energy_window_extended": 1.0,
        "energy_window_capped": 0.0,
        "energy_window_min_s": 50.0,
        "gauge_interval_s": SLOW,
    }


def test_max_seconds_caps_it_and_says_so() -> None:
    window = energy_window(1.0, 30.0, energy=True, interval_s=SLOW, updates=5)
    assert (window.min_seconds, window.extended, window.capped) == (30.0, True, True)
    # min_seconds already at the cap: capped, yet not extended.
    at_cap = energy_window(30.0, 30.0, energy=True, interval_s=SLOW, updates=5)
    assert (at_cap.min_seconds, at_cap.extended, at_cap.capped) == (30.0, False, True)


@pytest.mark.parametrize(
    ("energy", "interval_s", "min_s"),
    [(False, SLOW, 1.0), (True, None, 1.0), (True, 0.5, 3.0)],  # no energy; unknown gauge; fast gauge
)
def test_no_extension(energy: bool, interval_s: float | None, min_s: float) -> None:
    window = energy_window(min_s, 120.0, energy=energy, interval_s=interval_s, updates=5)
    assert window.min_seconds == min_s and not window.extended and not window.capped


def test_the_gauge_interval_comes_from_the_idle_baseline() -> None:
    seen = IdleBaseline(850.0, readings=3, sampled_s=31.5, gauge_interval_s=10.0)
    assert gauge_interval_s(seen) == 10.0  # the gaps between updates it saw
    assert gauge_interval_s(IdleBaseline(850.0, readings=1, sampled_s=12.5)) == pytest.approx(12.5)
    assert gauge_interval_s(IdleBaseline(None, note="no idle baseline")) is None
    assert gauge_interval_s(IdleBaseline(850.0, readings=0, sampled_s=5.0)) is None
    assert gauge_interval_s(None) is None


def test_program_args_take_the_extended_window_within_max_seconds() -> None:
    spec = load_text(
        "name: e\nbenchmark: {program: lstm, params: {hidden: 32}}\n"
        "measurement: {min_seconds: 1, max_seconds: 20}\n",
        "e.yaml",
    )
    (cell,) = spec.cells()
    assert "--min-seconds=1" in spec.program_args(cell)
    assert "--min-seconds=12.5" in spec.program_args(cell, 12.5)
    assert "--min-seconds=20" in spec.program_args(cell, 50.0)  # never past max_seconds
    assert spec.telemetry.gauge_updates == 5
