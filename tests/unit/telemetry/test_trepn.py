from pathlib import Path

import pytest

from farm.analysis.metrics import metrics_by_name
from farm.errors import ConfigError
from farm.telemetry.trepn import parse_trepn_csv, read_trepn_csv, split_header, trepn_power_metrics

TREPN_DIR = (Path(__file__).parents[3] / "../shared/data/trepn").resolve()
FIXTURES = sorted(TREPN_DIR.glob("*.csv")) if TREPN_DIR.is_dir() else []
needs_fixtures = pytest.mark.skipif(not FIXTURES, reason=f"Trepn fixtures not found in {TREPN_DIR}")

EXPECTED_UNITS = {
    "Battery Power*": "uW",
    "GPU Frequency": "KHz",
    "GPU Load": "%",
    "CPU1 Frequency": "kHz",
    "CPU1 Load": "%",
}


def test_split_header() -> None:
    assert split_header("Battery Power* [uW] (Raw)") == ("Battery Power*", "uW")
    assert split_header("Time  [ms]") == ("Time", "ms")
    assert split_header("Battery Status") == ("Battery Status", "")


@needs_fixtures
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_real_exports_parse_with_units(path: Path) -> None:
    export = read_trepn_csv(path)
    for name, unit in EXPECTED_UNITS.items():
        assert export.metrics[name].unit == unit
        assert len(export.metrics[name].series) > 400  # ~100 ms over ~45-60 s
    # the statistics block is not taken for samples: every power sample is a plausible phone draw
    power = export.metrics["Battery Power*"].series
    assert power.values.min() > 1e4 and power.values.max() < 2e7  # 10 mW .. 20 W in µW
    assert (power.t_ns[1:] >= power.t_ns[:-1]).all()
    assert "Battery Power*" in export.statistics


@needs_fixtures
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_mean_battery_power_matches_trepn_own_average(path: Path) -> None:
    export = read_trepn_csv(path)
    metrics = metrics_by_name(trepn_power_metrics(export))
    trepn_average_w = export.statistics["Battery Power*"] / 1e6
    mean_w = metrics["power_mean_mw"].value / 1e3
    assert mean_w == pytest.approx(trepn_average_w, rel=0.01)
    assert metrics["energy_total_mj"].value == pytest.approx(
        metrics["power_mean_mw"].value * metrics["duration_s"].value, rel=1e-9
    )


@needs_fixtures
def test_known_values_and_baseline_subtraction() -> None:
    idle = metrics_by_name(trepn_power_metrics(read_trepn_csv(TREPN_DIR / "nexus6p-run1-baseline.csv")))
    assert idle["power_mean_mw"].value / 1e3 == pytest.approx(1.42, abs=0.01)
    parallel = read_trepn_csv(TREPN_DIR / "nexus6p-run1-parallel.csv")
    metrics = metrics_by_name(
        trepn_power_metrics(parallel, idle_power_mw=idle["power_mean_mw"].value, inferences=100)
    )
    assert metrics["power_mean_mw"].value / 1e3 == pytest.approx(5.44, abs=0.02)
    assert metrics["gpu_load_mean"].value == pytest.approx(0.64, abs=0.01)
    assert metrics["gpu_freq_mean_mhz"].value == pytest.approx(600.0)
    net = metrics["energy_net_mj"].value
    assert net == pytest.approx(
        (metrics["power_mean_mw"].value - idle["power_mean_mw"].value) * metrics["duration_s"].value
    )
    assert metrics["energy_per_inference_mj"].value == pytest.approx(net / 100)


def test_sparse_cells_and_statistics_block() -> None:
    text = (
        "App,Package,Start Time\nSystem,,x\n\n"
        'Time  [ms],"Battery Power* [uW]",Time  [ms],GPU Load [%],\n'
        "0,1000000,0,50\n"
        "100,3000000,,\n"
        "200,1000000,150,70\n"
        "\n\nSystem Statistics:\nSensor Id,Name,Type,Average\n332,Battery Power*,Power [uW],99\n"
    )
    export = parse_trepn_csv(text, "x.csv")
    assert export.preamble == {"App": "System", "Start Time": "x"}
    assert export.metrics["GPU Load"].series.values.tolist() == [50.0, 70.0]
    assert export.statistics == {"Battery Power*": 99.0}
    metrics = metrics_by_name(trepn_power_metrics(export))
    # 1 W for 100 ms then 3 W for 100 ms: 400 mJ over 0.2 s
    assert metrics["energy_total_mj"].value == pytest.approx(400.0)
    assert metrics["power_mean_mw"].value == pytest.approx(2000.0)
    assert metrics["gpu_load_mean"].value == pytest.approx(0.6)


def test_bad_input_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"^x.csv:1: .*not a Trepn"):
        parse_trepn_csv("a,b\n1,2\n", "x.csv")
    with pytest.raises(ConfigError, match=r"^x.csv:3: GPU Load"):
        parse_trepn_csv("Time  [ms],GPU Load [%]\n0,1\n5,lots\n", "x.csv")
