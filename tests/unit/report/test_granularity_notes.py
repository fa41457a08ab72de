"""The report says whether an external program's latencies are per iteration or its own summary."""

from __future__ import annotations

from farm.report.model import ReportData
from farm.report.tables import quality_notes
from tests.unit.report.test_energy_notes import with_metrics


def test_summary_only_runs_are_named_and_farms_own_runs_get_no_note(report_data: ReportData) -> None:
    assert not [n for n in quality_notes(report_data) if "external program" in n]
    ids = [run.run_id for run in report_data.done_runs]
    marked = {run_id: {"latency_per_iteration": 1.0} for run_id in ids}
    (per_iteration,) = [
        n for n in quality_notes(with_metrics(report_data, marked)) if "external program" in n
    ]
    assert per_iteration == f"Latencies of the external program: one per iteration in all {len(ids)} run(s)."
    marked[ids[0]] = {"latency_per_iteration": 0.0}
    (summary,) = [n for n in quality_notes(with_metrics(report_data, marked)) if "external program" in n]
    assert summary.startswith("1 run(s) of the external program printed summary figures only")
    assert ids[0] in summary and f"{len(ids) - 1} run(s) have latencies per iteration" in summary
