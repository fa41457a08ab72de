"""Validity flags per run: each condition, the conjunction per concern, and the store round trip."""

from __future__ import annotations

from farm.analysis.validity import (
    Check,
    Concern,
    Requirements,
    Validity,
    assess,
)

REQUIRED = Requirements(min_seconds=1.0, min_iterations=50)
GOOD = {"measured_s": 1.2, "iterations_measured": 50.0, "gpu_load_reached": 1.0, "throttled": 0.0}


def test_a_good_run_is_valid_with_every_applicable_flag_true() -> None:
    validity = assess(GOOD, REQUIRED, charging_disabled=None, clocks_ok=True)
    assert validity.flags == {
        Check.MIN_DURATION: True,
        Check.MIN_ITERATIONS: True,
        Check.LOAD_REACHED: True,
        Check.NOT_THROTTLED: True,
        Check.CLOCKS_AS_REQUESTED: True,
    }
    assert validity.valid() and validity.valid(Concern.ENERGY) and validity.failed() == ()


def test_each_failed_condition_makes_the_run_invalid_and_is_named() -> None:
    cases = {
        Check.MIN_DURATION: {**GOOD, "measured_s": 0.4},
        Check.MIN_ITERATIONS: {**GOOD, "iterations_measured": 12.0},
        Check.LOAD_REACHED: {**GOOD, "gpu_load_reached": 0.0},
        Check.NOT_THROTTLED: {**GOOD, "throttled": 1.0},
    }
    for check, metrics in cases.items():
        validity = assess(metrics, REQUIRED, charging_disabled=None, clocks_ok=None)
        assert not validity.valid(), check
        assert validity.failed() == (check,)
    clocks = assess(GOOD, REQUIRED, charging_disabled=None, clocks_ok=False)
    assert clocks.failed() == (Check.CLOCKS_AS_REQUESTED,) and not clocks.valid()


def test_energy_flags_concern_energy_only() -> None:
    energy = Requirements(min_seconds=1.0, min_iterations=50, energy=True)
    validity = assess({**GOOD, "power_readings": 1.0}, energy, charging_disabled=False, clocks_ok=None)
    assert validity.valid(Concern.LATENCY)
    assert not validity.valid(Concern.ENERGY)
    assert set(validity.failed(Concern.ENERGY)) == {Check.CHARGING_DISABLED, Check.FUEL_GAUGE_READINGS}
    # Without power measured, charging and the gauge are not checked at all.
    assert (
        Check.CHARGING_DISABLED not in assess(GOOD, REQUIRED, charging_disabled=False, clocks_ok=None).flags
    )


def test_sustained_runs_are_not_invalid_for_throttling() -> None:
    sustained = Requirements(min_seconds=1.0, min_iterations=50, sustained=True)
    assert assess({**GOOD, "throttled": 1.0}, sustained, charging_disabled=None, clocks_ok=None).valid()


def test_flags_round_trip_through_stored_metrics() -> None:
    validity = assess({**GOOD, "throttled": 1.0}, REQUIRED, charging_disabled=None, clocks_ok=True)
    stored = {m.name: m.value for m in validity.to_metrics()}
    assert (
        stored["valid"] == 0.0
        and stored["valid_not_throttled"] == 0.0
        and stored["valid_min_duration"] == 1.0
    )
    again = Validity.from_metrics({k: v for k, v in stored.items() if v is not None})
    assert again == validity
    # A run stored before validity existed has no flags and counts as valid.
    assert Validity.from_metrics({"latency_median_ms": 3.0}).valid()
