"""`farm regress` on stored nightlies: what it flags is recorded on the newest nightly and `farm
report` of that nightly lists it; --all lists every judged cell, --metric picks the metrics."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from farm.cli.regress import regress
from farm.cli.report import report
from farm.store import Store
from tests.unit.schedule.nightly_store import store_night

NIGHTS = [f"tiny--202611{day:02d}-020000" for day in range(1, 8)]
NEWEST = NIGHTS[-1]


def _history(results: Path) -> None:
    with Store.in_results(results) as store:
        for index, name in enumerate(NIGHTS[:-1]):
            slow = 1.0 + 0.01 * (index % 2)  # quiet: 1.00 / 1.01 ms
            store_night(store, name, {"local/A": [slow, slow], "local/B": [2.0, 2.0]})
        # the newest: local/A twice as slow, local/B unchanged
        store_night(store, NEWEST, {"local/A": [2.0, 2.0], "local/B": [2.0, 2.0]})


def test_a_regression_flagged_by_farm_regress_is_in_the_nightlys_report(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _history(results)
    flagged = CliRunner().invoke(regress, ["tiny", "--results", str(results)])
    assert flagged.exit_code == 1, flagged.output
    assert "latency_median_ms" in flagged.output and "local/A" in flagged.output
    assert f"recorded on {NEWEST}" in flagged.output
    again = CliRunner().invoke(regress, ["tiny", "--results", str(results)])  # recorded once only
    assert again.exit_code == 1
    with Store.in_results(results) as store:
        rows = store.query("SELECT experiment, device_id FROM events WHERE kind = 'regression'")
    assert [(r["experiment"], r["device_id"]) for r in rows] == [(NEWEST, "local/A")]

    out = tmp_path / "report"
    written = CliRunner().invoke(report, [NEWEST, "--results", str(results), "--out", str(out)])
    assert written.exit_code == 0, written.output
    markdown = (out / "report.md").read_text()
    section = markdown.split("## Regressions", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(lines) == 1 and "latency_median_ms regression on local/A" in lines[0]
    # the history's median is 1.005 ms (nights alternate 1.00 / 1.01), the newest 2 ms: +99.0 %
    assert "1.005 -&gt; 2 (+99.0%" in lines[0]  # the Markdown escapes the arrow's >
    assert "latency_median_ms regression on local/A" in (out / "report.html").read_text()
    # an earlier nightly has no regression of its own, so no such section
    earlier = CliRunner().invoke(report, [NIGHTS[0], "--results", str(results), "--out", str(tmp_path / "e")])
    assert earlier.exit_code == 0 and "## Regressions" not in (tmp_path / "e" / "report.md").read_text()


def test_all_lists_every_judged_cell_and_metric_picks_what_is_judged(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _history(results)
    every = CliRunner().invoke(regress, ["tiny", "--results", str(results), "--all"])
    rows = [line.split() for line in every.output.splitlines() if line.startswith("  ") and "local/" in line]
    assert sorted((row[0], row[1]) for row in rows) == [("regression", "local/A"), ("unchanged", "local/B")]
    only_flagged = CliRunner().invoke(regress, ["tiny", "--results", str(results)])
    assert "unchanged" not in only_flagged.output
    energy = CliRunner().invoke(
        regress, ["tiny", "--results", str(results), "--metric", "energy_per_inference_mj", "--json"]
    )
    assert energy.exit_code == 0, energy.output  # no energy stored: nothing judged, nothing flagged
    document = json.loads(energy.output)
    assert document["policy"]["metrics"] == ["energy_per_inference_mj"] and document["findings"] == []
    latency = CliRunner().invoke(
        regress, ["tiny", "--results", str(results), "--metric", "latency_median_ms", "--json"]
    )
    assert latency.exit_code == 1
    found = json.loads(latency.output)["findings"]
    assert {(f["device"], f["verdict"]) for f in found} == {
        ("local/A", "regression"),
        ("local/B", "unchanged"),
    }
