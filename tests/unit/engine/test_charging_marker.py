"""The charging marker is cleared only when charging is known to be back on (issue 28, finding 1):
a switch-off that failed while the node took the value (toybox's split write) leaves the node at
the disable value, so the host must restore it, not forget it."""

from __future__ import annotations

from farm.engine.lifecycle import MarkerAction, marker_action
from farm.engine.steering import Charging, ChargingState, RunReport, parse_line


def _report(**fields: object) -> RunReport:
    report = RunReport()
    for name, value in fields.items():
        setattr(report, name, value)
    return report


def test_a_failed_switch_whose_node_reads_the_disable_value_is_restored() -> None:
    report = _report(charging_disabled=False, charging_failed_reads="1", done=True)
    assert marker_action(report, enable_value="0") is MarkerAction.RESTORE


def test_a_failed_switch_whose_node_still_reads_enable_clears_the_marker() -> None:
    report = _report(charging_disabled=False, charging_failed_reads="0", done=True)
    assert marker_action(report, enable_value="0") is MarkerAction.CLEAR


def test_an_unreadable_node_after_a_failed_switch_is_restored() -> None:
    report = _report(charging_disabled=False, charging_failed_reads="-", done=True)
    assert marker_action(report, enable_value="0") is MarkerAction.RESTORE


def test_the_scripts_restore_or_a_run_that_never_reached_the_switch_clears() -> None:
    assert marker_action(_report(charging_disabled=True, charging_restored=True), "0") is MarkerAction.CLEAR
    assert marker_action(_report(done=True), "0") is MarkerAction.CLEAR
    assert (
        marker_action(_report(charging_disabled=True, charging_restored=False), "0") is MarkerAction.RESTORE
    )
    assert marker_action(_report(charging_disabled=True), "0") is MarkerAction.RESTORE  # the phone dropped


def test_the_failed_line_carries_what_the_node_reads() -> None:
    assert parse_line("charging failed 1") == Charging(ChargingState.FAILED, "1")
