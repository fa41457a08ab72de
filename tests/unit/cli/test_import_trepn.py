"""`farm import trepn` on cut and non-finite exports: one line and exit 2, or a warning when allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.cli.main import main
from farm.store import Store
from farm.store import runs as run_store
from tests.fixtures.trepn_exports import TREPN_DIR
from tests.unit.cli.test_json_output import strict_loads

PARALLEL = TREPN_DIR / "nexus6p-run1-parallel.csv"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(["import", "trepn", *args])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _cut(tmp_path: Path) -> Path:
    cut = tmp_path / "cut.csv"
    cut.write_text(PARALLEL.read_text()[:3000])  # 3 KB of a 45 s export
    return cut


def test_a_cut_export_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = _cut(tmp_path)
    code, out, err = _run(capsys, str(cut), "--json")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"farm: {cut}:")
    assert "no System Statistics block" in err and "--allow-truncated" in err


def test_allow_truncated_warns_and_prints_valid_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = _cut(tmp_path)
    code, out, err = _run(capsys, str(cut), "--allow-truncated", "--json")
    assert code == 0
    assert err.startswith(f"farm: warning: {cut}: the export was cut before its System Statistics block")
    assert "dropped the cut row at line" in err
    doc = strict_loads(out)
    assert isinstance(doc, list)
    metrics = doc[0]["metrics"]
    assert 0 < metrics["duration_s"]["value"] < 2.5
    assert metrics["power_mean_mw"]["unit"] == "mW" and "power_time_weighted_mw" in metrics


@pytest.mark.parametrize("cell", ["1e309", "nan", "inf"])
def test_a_non_finite_cell_is_refused_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cell: str
) -> None:
    lines = PARALLEL.read_text().splitlines(keepends=True)
    cells = lines[9].split(",")
    cells[3] = cell  # a Battery Power* sample on line 10
    lines[9] = ",".join(cells)
    bad = tmp_path / "bad.csv"
    bad.write_text("".join(lines))
    code, out, err = _run(capsys, str(bad), "--json")
    assert code == 2 and out == ""
    assert err.startswith(f"farm: {bad}:10: Battery Power*: `{cell}` is not a finite number"), err


def test_the_baseline_is_checked_and_warned_about_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = _cut(tmp_path)
    code, _, err = _run(capsys, str(PARALLEL), "--baseline", str(cut))
    assert code == 2 and err.startswith(f"farm: {cut}:")
    code, out, err = _run(capsys, str(PARALLEL), "--baseline", str(cut), "--allow-truncated", "--json")
    assert code == 0 and err.startswith(f"farm: warning: {cut}:")
    metrics = strict_loads(out)[0]["metrics"]
    assert metrics["energy_net_mj"]["value"] < metrics["energy_total_mj"]["value"]


def _metrics_by_experiment(results: Path) -> dict[str, list[tuple[str, float | None]]]:
    """(run id, duration_s) of each stored run of the experiments `first` and `second`."""
    with Store.in_results(results).open() as store:
        return {
            name: [
                (run.run_id, _duration(run_store.get_metrics(store, run.run_id)))
                for run in run_store.list_runs(store, name)
            ]
            for name in ("first", "second")
        }


def _duration(metrics: list[run_store.Metric]) -> float | None:
    return next(m.value for m in metrics if m.name == "duration_s")


def test_equal_bytes_in_another_experiment_are_another_run_and_a_duplicate_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    other = tmp_path / "other.csv"
    other.write_bytes(PARALLEL.read_bytes())  # the same bytes under another name
    assert _run(capsys, str(PARALLEL), "--experiment", "first", "--results", str(results))[0] == 0
    stored = _metrics_by_experiment(results)
    code, out, err = _run(capsys, str(other), "--experiment", "second", "--results", str(results))
    assert code == 0 and err == ""
    after = _metrics_by_experiment(results)
    assert after["first"] == stored["first"] and len(after["second"]) == 1
    assert after["second"][0][0] != after["first"][0][0]  # its own run, not the first one's

    code, out, err = _run(capsys, str(other), "--experiment", "second", "--results", str(results))
    assert code == 0
    assert err == f"farm: {other}: already imported into 'second'; kept the stored run\n"
    assert "stored 0 run(s)" in out
    assert _metrics_by_experiment(results) == after


def test_an_experiment_name_that_is_not_one_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, str(PARALLEL), "--experiment", "../../x", "--results", str(tmp_path / "r"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("farm: --experiment '../../x': not an experiment name")
    assert not (tmp_path / "r").exists()
