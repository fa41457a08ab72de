"""The tflite adapter on benchmark_model outputs written from its documentation (fixtures/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.adapters import FailureReason, Granularity, OutputError, ProgramOutput, parse_tflite

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def values(output: ProgramOutput) -> dict[str, float]:
    return {m.name: m.value for m in output.metrics}


def test_current_output_with_memory_footprint() -> None:
    output = parse_tflite("", fixture("tflite_v2.txt"))  # the tool logs on stderr
    assert output.granularity is Granularity.SUMMARY and output.latencies_ms == ()
    got = values(output)
    assert got["latency_mean_ms"] == pytest.approx(16.4553)
    assert got["latency_std_ms"] == pytest.approx(0.311)
    assert (got["latency_min_ms"], got["latency_max_ms"]) == pytest.approx((16.188, 18.022))
    assert got["iterations_measured"] == 61 and output.inferences == 61
    assert got["warmup_mean_ms"] == pytest.approx(17.3904) and got["warmup_iterations"] == 29
    assert got["warmup_std_ms"] == pytest.approx(2.712)
    assert got["init_ms"] == pytest.approx(41.72) and got["first_inference_ms"] == pytest.approx(31.25)
    assert got["model_size_mb"] == pytest.approx(13.9786)
    assert got["memory_init_delta_mb"] == pytest.approx(21.5781)
    assert got["memory_overall_delta_mb"] == pytest.approx(38.0273)
    assert got["memory_peak_mb"] == pytest.approx(45.125)
    units = {m.name: m.unit for m in output.metrics}
    assert units["latency_mean_ms"] == "ms" and units["memory_peak_mb"] == "MB"
    assert units["iterations_measured"] == "count"
    assert not any(name.startswith("warmup_m") and name.endswith(("min_ms", "max_ms")) for name in got)


def test_percentiles_where_printed_belong_to_the_measured_runs() -> None:
    got = values(parse_tflite(fixture("tflite_percentiles.txt")))
    assert got["latency_median_ms"] == pytest.approx(4.428)
    assert (got["latency_p5_ms"], got["latency_p95_ms"], got["latency_p99_ms"]) == pytest.approx(
        (4.321, 4.612, 4.95)
    )
    assert got["iterations_measured"] == 223
    assert not any(name.startswith("warmup_p") for name in got)
    assert "memory_peak_mb" not in got  # printed only with --report_peak_memory_footprint


def test_older_wording_and_the_op_profiler_tables_are_not_runs() -> None:
    got = values(parse_tflite(fixture("tflite_op_profiling_old.txt")))
    # "Timings (microseconds): count=830 ... avg=1204" is the op profiler's, not a third run
    assert got["latency_mean_ms"] == pytest.approx(1.204) and got["iterations_measured"] == 830
    assert got["warmup_mean_ms"] == pytest.approx(1.2107) and got["warmup_iterations"] == 412
    assert got["init_ms"] == pytest.approx(5.91)  # "Init: 5910" us, the same as "5.91ms"
    assert "first_inference_ms" not in got  # the older summary has no First inference


def test_a_single_timing_line_is_placed_by_the_summary() -> None:
    text = (
        "Running benchmark for at least 50 iterations and at least 1 seconds\n"
        "count=50 first=900 curr=800 min=790 max=900 avg=812.5 std=20\n"
        "Inference timings in us: Init: 100, First inference: 900, "
        "Warmup (avg): 900, Inference (avg): 812.5\n"
    )
    output = parse_tflite(text)
    assert values(output)["latency_std_ms"] == pytest.approx(0.02) and output.inferences == 50
    assert "warmup_iterations" not in values(output)


def test_output_cut_before_the_summary_is_truncated() -> None:
    with pytest.raises(OutputError) as caught:
        parse_tflite("", fixture("tflite_truncated.txt"))
    assert caught.value.reason is FailureReason.TRUNCATED
    assert "1 timing lines" in str(caught.value) and "Inference timings" in str(caught.value)


def test_a_failing_model_load_is_no_metric_quoting_the_tool() -> None:
    with pytest.raises(OutputError) as caught:
        parse_tflite("", fixture("tflite_bad_model.txt"))
    assert caught.value.reason is FailureReason.NO_METRIC
    assert "it says: Failed to mmap model /data/local/tmp/missing.tflite" in str(caught.value)


def test_empty_and_unrelated_output() -> None:
    with pytest.raises(OutputError) as caught:
        parse_tflite("", "  \n")
    assert caught.value.reason is FailureReason.EMPTY and str(caught.value).startswith(
        "tflite output: empty output"
    )
    with pytest.raises(OutputError) as caught:
        parse_tflite("hello world\n", "")
    assert caught.value.reason is FailureReason.NO_METRIC


def test_a_number_that_is_not_one_names_its_line() -> None:
    text = fixture("tflite_v2.txt").replace("avg=16455.3", "avg=16455.3.1")
    with pytest.raises(OutputError) as caught:
        parse_tflite(text)
    assert caught.value.reason is FailureReason.MALFORMED and "stdout line 15: avg '16455.3.1'" in str(
        caught.value
    )
