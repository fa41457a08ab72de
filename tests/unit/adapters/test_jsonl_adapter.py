"""The jsonl adapter on outputs of farm's event contract (kernels/README.md "Output")."""

from __future__ import annotations

import json

import pytest

from farm.adapters import FailureReason, Granularity, OutputError, parse_event_lines, parse_jsonl


def lines(*events: dict[str, object]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


INFO = {"event": "info", "program": "matmul", "backend": "cpu", "n": 64}
WARMUP = [
    {"event": "phase", "phase": "warmup", "t_ns": 1_000},
    {"event": "iter", "i": 0, "t_start_ns": 1_100, "t_end_ns": 9_100},
]
MEASURE = [
    {"event": "phase", "phase": "measure", "t_ns": 10_000},
    {"event": "iter", "i": 0, "t_start_ns": 10_000, "t_end_ns": 2_010_000},
    {"event": "iter", "i": 1, "t_start_ns": 2_010_000, "t_end_ns": 5_010_000},
    {"event": "iter", "i": 2, "t_start_ns": 5_010_000, "t_end_ns": 6_510_000},
]
RESULT = {
    "event": "result",
    "iterations": 3,
    "median_ms": 2.0,
    "mean_ms": 2.1666,
    "gflops": 1.5,
    "verify": "skipped",
}


def test_measured_iterations_on_the_phone_clock_and_the_programs_own_summary() -> None:
    output = parse_jsonl(lines(INFO, *WARMUP, *MEASURE, RESULT))
    assert output.granularity is Granularity.PER_ITERATION
    assert output.latencies_ms == (2.0, 3.0, 1.5)  # the warm-up iteration is not measured
    assert output.iterations is not None and output.iterations.window_ns == (10_000, 6_510_000)
    got = {m.name: (m.value, m.unit) for m in output.metrics}
    assert got["program_median_ms"] == (2.0, "ms") and got["program_iterations"] == (3.0, "")
    assert got["gflops"] == (1.5, "GFLOP/s")  # farm's own reading of a result's gflops
    assert "program_verify" not in got  # not a number
    assert output.inferences == 3 and output.notes == ()


def test_inference_count_given_by_the_program_wins() -> None:
    output = parse_jsonl(lines(*MEASURE, {**RESULT, "inferences": 96}))
    assert output.inferences == 96


def test_a_program_with_only_a_summary() -> None:
    output = parse_jsonl(lines(INFO, {"event": "result", "mean_ms": 4.5, "iterations": 20}))
    assert (
        output.granularity is Granularity.SUMMARY and output.latencies_ms == () and output.iterations is None
    )
    assert output.metric("program_mean_ms") is not None and output.inferences == 20


def test_stray_lines_are_passed_over_and_noted() -> None:
    text = "loading weights...\n" + lines(*MEASURE) + "done\n" + lines(RESULT)
    output = parse_jsonl(text)
    assert len(output.latencies_ms) == 3
    assert output.notes == ("2 lines were not JSON objects (first: line 1)",)
    parsed = parse_event_lines(text)
    assert parsed.bad_lines == (1, 6) and not parsed.cut and len(parsed.events) == 5


def test_output_cut_mid_line_is_truncated() -> None:
    text = lines(INFO, *MEASURE) + '{"event": "iter", "i": 3, "t_sta'
    assert parse_event_lines(text).cut
    with pytest.raises(OutputError) as caught:
        parse_jsonl(text, "Killed\n")
    error = caught.value
    assert error.reason is FailureReason.TRUNCATED
    assert "3 measured iterations" in str(error) and "last line is cut" in str(error)
    assert "stderr ends: Killed" in str(error)


def test_output_that_stops_before_its_result_is_truncated() -> None:
    with pytest.raises(OutputError) as caught:
        parse_jsonl(lines(INFO, *MEASURE))
    assert caught.value.reason is FailureReason.TRUNCATED and "no `result` event" in str(caught.value)


def test_an_error_event_is_the_programs_own_reason() -> None:
    error_event = {"event": "error", "message": "matmul: --n: expected 1..4096, got 0", "exit_code": 2}
    with pytest.raises(OutputError) as caught:
        parse_jsonl(lines(INFO, error_event))
    assert caught.value.reason is FailureReason.PROGRAM_ERROR
    assert (
        str(caught.value)
        == "jsonl output: the program reported an error: matmul: --n: expected 1..4096, got 0"
    )


@pytest.mark.parametrize(
    ("text", "reason", "says"),
    [
        ("", FailureReason.EMPTY, "nothing on stdout (stderr ends: segfault)"),
        ("\n\n", FailureReason.EMPTY, "nothing on stdout"),
        ("starting\n12.5 ms\n", FailureReason.MALFORMED, "no line is a JSON object (line 1: 'starting')"),
        ("[1, 2]\n", FailureReason.MALFORMED, "no line is a JSON object"),
        (lines({"event": "result", "verify": "passed"}), FailureReason.NO_METRIC, "no measured `iter` event"),
        (
            lines({"event": "iter", "t_start_ns": 5, "t_end_ns": 2}, RESULT),
            FailureReason.MALFORMED,
            "event 1: iter ends before it starts",
        ),
        (lines({"event": "iter", "t_start_ns": "5"}, RESULT), FailureReason.MALFORMED, "integer t_start_ns"),
    ],
)
def test_bad_output_fails_with_one_reason(text: str, reason: FailureReason, says: str) -> None:
    with pytest.raises(OutputError) as caught:
        parse_jsonl(text, "segfault\n")
    assert caught.value.reason is reason and says in str(caught.value)


def test_a_capped_stream_counts_every_iteration_from_its_summary() -> None:
    """--iteration-events: two iterations printed of 1000, one sampled, the summary exact."""
    sample = {"event": "iter_sample", "i": 700, "t_start_ns": 700_000_000, "t_end_ns": 701_000_000}
    summary = {
        "event": "iter_summary",
        "iterations": 1000,
        "iter_events": 2,
        "samples": 1,
        "t_start_ns": 10_000,
        "t_end_ns": 1_000_010_000,
        "mean_ms": 1.0,
        "std_ms": 0.0,
        "min_ns": 1_000_000,
        "max_ns": 1_000_000,
        "hist_bins_per_octave": 64,
        "hist": [[1275, 1000]],  # floor(64 log2 1e6)
    }
    head = [
        {"event": "phase", "phase": "measure", "t_ns": 10_000},
        {"event": "iter", "i": 0, "t_start_ns": 10_000, "t_end_ns": 1_010_000},
        {"event": "iter", "i": 1, "t_start_ns": 1_010_000, "t_end_ns": 2_010_000},
    ]
    output = parse_jsonl(lines(INFO, *head, sample, summary, {**RESULT, "iterations": 1000}))
    assert output.inferences == 1000 and output.iterations is not None and len(output.iterations) == 1000
    assert output.iterations.window_ns == (10_000, 1_000_010_000)
    assert output.latencies_ms == (1.0, 1.0, 1.0)  # the printed ones: the first two and the sample


def test_json_nested_deeper_than_python_reads_is_a_bad_line_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = '{"event": "iter", "i": 0, "t_start_ns": 0, "t_end_ns": 10}\n' + deep + "\n"
    lines = parse_event_lines(text)
    assert len(lines.events) == 1 and lines.bad_lines == (2,)
    with pytest.raises(OutputError) as caught:
        parse_jsonl('{"event": "result", "nested": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    assert "\n" not in str(caught.value)
