"""Trepn Profiler CSV parser and power metrics, on the real exports in tests/fixtures/trepn/.

The independent truth is Trepn's own `System Statistics` block in each file: its Average of a data
point is what farm's power_mean_mw must reproduce.
"""

from pathlib import Path

import numpy as np
import pytest

from farm.analysis.metrics import metrics_by_name
from farm.errors import ConfigError
from farm.telemetry.trepn import parse_trepn_csv, read_trepn_csv, split_header, trepn_power_metrics
from tests.fixtures.trepn_exports import TREPN_DIR, TREPN_FILES

EXPECTED_UNITS = {
    "Battery Power*": "uW",
    "GPU Frequency": "KHz",
    "GPU Load": "%",
    "CPU1 Frequency": "kHz",
    "CPU1 Load": "%",
}
NEXUS6P_PARALLEL = TREPN_DIR / "nexus6p-run1-parallel.csv"
SMALL = (
    "App,Package,Start Time\nSystem,,x\n\n"
    'Time  [ms],"Battery Power* [uW]",Time  [ms],GPU Load [%],\n'
    "0,1000000,0,50\n"
    "100,3000000,,\n"
    "200,1000000,150,70\n"
    "\n\nSystem Statistics:\nSensor Id,Name,Type,Average\n"
    "332,Battery Power*,Power [uW],1666666.6666666667\n401,GPU Load,GPU Load [%],60\n"
)


def test_the_real_exports_are_in_the_repository() -> None:
    assert len(TREPN_FILES) == 5
    assert (TREPN_DIR / "README.md").read_text().count("mtmd/Mobile_ConvNet") == 1


def test_split_header() -> None:
    assert split_header("Battery Power* [uW] (Raw)") == ("Battery Power*", "uW")
    assert split_header("Time  [ms]") == ("Time", "ms")
    assert split_header("Battery Status") == ("Battery Status", "")


@pytest.mark.parametrize("path", TREPN_FILES, ids=lambda p: p.name)
def test_real_exports_parse_with_units(path: Path) -> None:
    export = read_trepn_csv(path)
    for name, unit in EXPECTED_UNITS.items():
        assert export.metrics[name].unit == unit
        assert len(export.metrics[name].series) > 400  # ~100 ms over ~45-60 s
    # the statistics block is not taken for samples: every power sample is a plausible phone draw
    power = export.metrics["Battery Power*"].series
    assert power.values.min() > 1e4 and power.values.max() < 2e7  # 10 mW .. 20 W in µW
    assert (power.t_ns[1:] >= power.t_ns[:-1]).all()
    assert export.truncation is None
    assert export.statistics["Battery Power*"].line > export.statistics["Battery Status"].line


@pytest.mark.parametrize("path", TREPN_FILES, ids=lambda p: p.name)
def test_mean_battery_power_is_trepn_own_average(path: Path) -> None:
    export = read_trepn_csv(path)
    metrics = metrics_by_name(trepn_power_metrics(export))
    trepn_average_mw = export.statistics["Battery Power*"].average / 1e3
    # the Nexus 5 files print their averages with 10 significant digits
    assert metrics["power_mean_mw"].value == pytest.approx(trepn_average_mw, rel=1e-9)
    gpu_load_average = export.statistics["GPU Load"].average / 100
    assert metrics["gpu_load_mean"].value == pytest.approx(gpu_load_average, abs=1e-9)
    # the time-weighted figure is energy over duration, by construction, under its own name
    assert metrics["energy_total_mj"].value == pytest.approx(
        metrics["power_time_weighted_mw"].value * metrics["duration_s"].value, rel=1e-12
    )
    assert metrics["power_time_weighted_mw"].value == pytest.approx(trepn_average_mw, rel=0.01)


def test_the_two_means_differ_where_readings_are_uneven() -> None:
    # 1 W held for 100 ms, 3 W for 100 ms and a last 1 W reading: Trepn averages the three readings
    # (5/3 W), the energy is 0.4 J over 0.2 s (2 W)
    export = parse_trepn_csv(SMALL, "x.csv")
    metrics = metrics_by_name(trepn_power_metrics(export))
    assert metrics["power_mean_mw"].value == pytest.approx(5000 / 3)
    assert metrics["power_time_weighted_mw"].value == pytest.approx(2000.0)
    assert metrics["energy_total_mj"].value == pytest.approx(400.0)


def test_known_values_and_baseline_subtraction() -> None:
    idle = metrics_by_name(trepn_power_metrics(read_trepn_csv(TREPN_DIR / "nexus6p-run1-baseline.csv")))
    assert idle["power_mean_mw"].value / 1e3 == pytest.approx(1.42, abs=0.01)
    idle_mw = idle["power_time_weighted_mw"].value
    parallel = read_trepn_csv(NEXUS6P_PARALLEL)
    metrics = metrics_by_name(trepn_power_metrics(parallel, idle_power_mw=idle_mw, inferences=100))
    assert metrics["power_mean_mw"].value / 1e3 == pytest.approx(5.44, abs=0.02)
    assert metrics["gpu_load_mean"].value == pytest.approx(0.64, abs=0.01)
    assert metrics["gpu_freq_mean_mhz"].value == pytest.approx(600.0)
    net = metrics["energy_net_mj"].value
    assert net == pytest.approx(metrics["energy_total_mj"].value - idle_mw * metrics["duration_s"].value)
    assert metrics["power_idle_mw"].value == idle_mw
    assert metrics["energy_per_inference_mj"].value == pytest.approx(net / 100)


def test_sparse_cells_and_statistics_block() -> None:
    export = parse_trepn_csv(SMALL, "x.csv")
    assert export.preamble == {"App": "System", "Start Time": "x"}
    assert export.metrics["GPU Load"].series.values.tolist() == [50.0, 70.0]
    assert {name: (s.average, s.line) for name, s in export.statistics.items()} == {
        "Battery Power*": (1666666.6666666667, 12),
        "GPU Load": (60.0, 13),
    }
    assert metrics_by_name(trepn_power_metrics(export))["gpu_load_mean"].value == pytest.approx(0.6)


def test_bad_input_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"^x.csv:1: .*not a Trepn"):
        parse_trepn_csv("a,b\n1,2\n", "x.csv")
    with pytest.raises(ConfigError, match=r"^x.csv:3: GPU Load: `lots` is not a number"):
        parse_trepn_csv("Time  [ms],GPU Load [%]\n0,1\n5,lots\nSystem Statistics:\n", "x.csv")


# -- cut exports -------------------------------------------------------------------------------


def _real_text() -> str:
    return NEXUS6P_PARALLEL.read_text()


def test_a_cut_export_is_refused_naming_its_last_line() -> None:
    cut = _real_text()[:3000]  # 3 KB of a 45 s export, cut mid-row
    with pytest.raises(ConfigError) as caught:
        parse_trepn_csv(cut, "cut.csv")
    lines = cut.count("\n") + 1
    assert str(caught.value).startswith(f"cut.csv:{lines}: the export has no System Statistics block")
    assert "--allow-truncated" in str(caught.value)


def test_allow_truncated_drops_the_cut_row_and_keeps_the_samples_before_it() -> None:
    text = _real_text()
    cut = text[:3000]
    export = parse_trepn_csv(cut, "cut.csv", allow_truncated=True)
    last = cut.count("\n") + 1
    assert export.truncation is not None
    assert (export.truncation.dropped_line, export.truncation.last_line) == (last, last - 1)
    assert "cut before its System Statistics block" in export.truncation.message
    assert f"dropped the cut row at line {last}" in export.truncation.message
    # the truth: the same rows of the complete file, parsed as a complete file
    complete_rows = text.splitlines()[: last - 1]
    reference = parse_trepn_csv("\n".join(complete_rows) + "\n", "ref.csv", allow_truncated=True)
    for name, metric in reference.metrics.items():
        got = export.metrics[name].series
        assert np.array_equal(got.values, metric.series.values)
        assert np.array_equal(got.t_ns, metric.series.t_ns)
    full_power = read_trepn_csv(NEXUS6P_PARALLEL).metrics["Battery Power*"].series
    assert 0 < len(export.metrics["Battery Power*"].series) < len(full_power)
    assert metrics_by_name(trepn_power_metrics(export))["duration_s"].value < 2.5


def test_an_export_cut_at_a_line_end_loses_no_row() -> None:
    text = _real_text()
    cut = text[: text.index("\n", 3000) + 1]
    with pytest.raises(ConfigError, match="no System Statistics block"):
        parse_trepn_csv(cut, "cut.csv")
    export = parse_trepn_csv(cut, "cut.csv", allow_truncated=True)
    assert export.truncation is not None and export.truncation.dropped_line is None
    assert "dropped" not in export.truncation.message


def test_an_export_cut_inside_its_statistics_block() -> None:
    text = _real_text()
    power_row = text.index('332,"Battery Power*"')
    cut = text[: power_row + 30]  # 332,"Battery Power*",Power [uW],54  (the average cut short)
    with pytest.raises(ConfigError, match=r"the export ends mid-row: it was cut"):
        parse_trepn_csv(cut, "cut.csv")
    export = parse_trepn_csv(cut, "cut.csv", allow_truncated=True)
    assert export.truncation is not None and export.truncation.statistics
    assert "Battery Power*" not in export.statistics  # the cut average is dropped, not misread
    assert "Battery Status" in export.statistics


def test_an_export_cut_inside_its_header_is_refused_even_when_truncation_is_allowed() -> None:
    text = _real_text()
    cut = text[: text.index("Time  [ms]") + 40]
    with pytest.raises(ConfigError, match=r"^cut.csv:4: the export was cut inside its header row"):
        parse_trepn_csv(cut, "cut.csv", allow_truncated=True)


# -- numbers that are not --------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["1e309", "nan", "inf", "-Infinity"])
def test_non_finite_samples_are_refused_with_file_and_line(cell: str) -> None:
    text = SMALL.replace("100,3000000", f"100,{cell}")
    with pytest.raises(ConfigError, match=rf"^x.csv:6: Battery Power\*: `{cell}` is not a finite number"):
        parse_trepn_csv(text, "x.csv")
    with pytest.raises(ConfigError, match=r"^x.csv:6: Battery Power\*: time: `nan` is not a finite number"):
        parse_trepn_csv(SMALL.replace("100,3000000", "nan,3000000"), "x.csv")


def test_non_finite_statistics_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"^x.csv:13: GPU Load: average: `1e309` is not a finite number"):
        parse_trepn_csv(SMALL.replace("GPU Load [%],60", "GPU Load [%],1e309"), "x.csv")


def test_samples_that_disagree_with_the_statistics_block_are_refused() -> None:
    text = _real_text()
    first_power = text.splitlines()[4].split(",")[3]  # a Battery Power* sample in the first row
    edited = text.replace(f",{first_power},", f",{int(first_power) * 10},", 1)
    lines = text.splitlines()
    stats_line = next(i for i, line in enumerate(lines, 1) if line.startswith('332,"Battery Power*"'))
    with pytest.raises(ConfigError) as caught:
        parse_trepn_csv(edited, "edited.csv")
    message = str(caught.value)
    assert message.startswith(f"edited.csv:{stats_line}: Battery Power*: its 449 samples average "), message
    assert "System Statistics say 5441075" in message


def test_a_field_longer_than_csv_reads_is_one_line_naming_its_line() -> None:
    text = SMALL.replace("100,3000000,,\n", f'100,"{"9" * (200 << 10)}",,\n')
    with pytest.raises(ConfigError) as caught:
        parse_trepn_csv(text, "big.csv")
    message = str(caught.value)
    assert message.startswith("big.csv:6: not a Trepn Profiler CSV export: field larger than field limit")
    assert "\n" not in message
