"""`farm import trepn` on cut and non-finite exports: one line and exit 2, or a warning when allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.cli.main import main
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
