"""The regex adapter: its spec's validation, and parsing of free-form outputs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from farm.adapters import (
    AdapterName,
    FailureReason,
    Granularity,
    OutputError,
    RegexSpec,
    Stream,
    adapter_for,
    parse_regex,
)

PER_ITER = {
    "patterns": [r"^iter (?P<i>\d+): (?P<t>[0-9.]+) us$", r"peak rss: (?P<rss>\d+) kB"],
    "metrics": {"t": {"name": "latency", "unit": "us"}, "rss": {"name": "rss_peak_kb", "unit": "kB"}},
    "latency": "t",
}
SUMMARY = {
    "patterns": r"avg=(?P<avg>[0-9.]+)ms p90=(?P<p90>[0-9.]+)ms n=(?P<n>\d+)",
    "metrics": {
        "avg": {"name": "latency_mean_ms", "unit": "ms"},
        "p90": {"name": "latency_p90_ms", "unit": "ms"},
        "n": {"name": "iterations_measured", "unit": "count"},
    },
    "inferences": "n",
}
OUTPUT = "warming up\niter 0: 1500 us\niter 1: 1250.5 us\niter 2: 1300 us\npeak rss: 20480 kB\n"


def spec(raw: dict[str, Any], **changes: Any) -> RegexSpec:
    return RegexSpec.model_validate({**raw, **changes})


def test_per_iteration_latencies_converted_to_ms() -> None:
    output = adapter_for(AdapterName.REGEX, regex=spec(PER_ITER)).parse(OUTPUT, "")
    assert output.granularity is Granularity.PER_ITERATION
    assert output.latencies_ms == pytest.approx((1.5, 1.2505, 1.3))
    assert output.inferences == 3 and output.missing == ()
    assert [(m.name, m.value, m.unit) for m in output.metrics] == [("rss_peak_kb", 20480.0, "kB")]


def test_summary_takes_the_last_match_and_the_inference_count() -> None:
    text = "progress avg=9.0ms p90=12.0ms n=10\nfinal avg=8.25ms p90=10.5ms n=200\n"
    output = parse_regex(spec(SUMMARY), text)
    assert output.granularity is Granularity.SUMMARY and output.latencies_ms == ()
    assert {m.name: m.value for m in output.metrics} == {
        "latency_mean_ms": 8.25,
        "latency_p90_ms": 10.5,
        "iterations_measured": 200,
    }
    assert output.inferences == 200


def test_streams() -> None:
    on_stderr = spec(PER_ITER, stream="stderr")
    assert on_stderr.stream is Stream.STDERR
    assert len(parse_regex(on_stderr, "", OUTPUT).latencies_ms) == 3
    with pytest.raises(OutputError) as caught:
        parse_regex(spec(PER_ITER, stream="stdout"), "", OUTPUT)
    assert caught.value.reason is FailureReason.EMPTY and "nothing on stdout" in str(caught.value)
    assert len(parse_regex(spec(PER_ITER), "iter 0: 5 us\n", "iter 1: 6 us\n").latencies_ms) == 2  # both


def test_a_metric_the_output_lacks_is_listed_as_missing() -> None:
    output = parse_regex(spec(PER_ITER), "iter 0: 10 us\n")
    assert output.missing == ("rss_peak_kb",) and output.latencies_ms == (0.01,)


def test_nothing_matched_is_a_failure_never_an_empty_result() -> None:
    with pytest.raises(OutputError) as caught:
        parse_regex(spec(PER_ITER), "Segmentation fault\n", "core dumped\n")
    error = caught.value
    assert error.reason is FailureReason.NO_METRIC
    assert str(error).startswith(
        "regex output: no metric matched: none of the 2 patterns matched any of the 2 lines"
    )
    with pytest.raises(OutputError) as caught:
        parse_regex(spec(PER_ITER), "peak rss: 100 kB\n")
    assert caught.value.reason is FailureReason.NO_METRIC and "latency group 't'" in str(caught.value)
    with pytest.raises(OutputError) as caught:
        parse_regex(spec(PER_ITER), "")
    assert caught.value.reason is FailureReason.EMPTY


def test_a_group_that_matched_no_number_names_the_line() -> None:
    loose = spec(PER_ITER, patterns=[r"^iter \d+: (?P<t>\S+) us$", r"peak rss: (?P<rss>\d+) kB"])
    with pytest.raises(OutputError) as caught:
        parse_regex(loose, "iter 0: 5 us\niter 1: n/a us\n")
    assert caught.value.reason is FailureReason.MALFORMED
    assert "stdout line 2: group 't' matched 'n/a', not a number" in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"patterns": [r"iter (?P<t>[0-9.]+"]}, "is not a valid regular expression: missing ), unterminated"),
        ({"patterns": [r"iter ([0-9.]+) us"]}, "has no named group"),
        ({"metrics": {"ms": {"name": "latency", "unit": "ms"}}}, "'ms' is not a named group of the patterns"),
        ({"latency": "rss"}, "latency: unit 'kB' is not a time unit"),
        ({"latency": "nope"}, "latency: 'nope' is not one of the metrics"),
        ({"inferences": "i"}, "inferences: 'i' is not one of the metrics"),
        ({"patterns": [r"a(?P<t>\d)", r"b(?P<t>\d)(?P<rss>\d)"]}, "group 't' is in two patterns"),
        (
            {"metrics": {"t": {"name": "x", "unit": "us"}, "rss": {"name": "x"}}},
            "the name 'x' is given to two groups",
        ),
        ({"metrics": {"t": {"name": "Latency ms", "unit": "us"}}}, "should match pattern"),
        ({"colour": "red"}, "Extra inputs are not permitted"),
        ({"stream": "stdin"}, "'stdout', 'stderr' or 'both'"),
    ],
)
def test_spec_errors_are_clear(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        spec(PER_ITER, **changes)
    assert says in str(caught.value)


def test_adapters_by_name() -> None:
    with pytest.raises(ValueError, match="needs a RegexSpec"):
        adapter_for(AdapterName.REGEX)
    with pytest.raises(ValueError, match="takes no patterns"):
        adapter_for(AdapterName.TFLITE, regex=spec(PER_ITER))
    assert adapter_for(AdapterName("jsonl")).name is AdapterName.JSONL
