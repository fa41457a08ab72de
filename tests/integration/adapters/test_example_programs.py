"""The example external programs run on this host (and, cross-built, under qemu-user), their
output read by farm.adapters: what the programs' own arithmetic says is what the adapters read."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from example_programs import Example

from farm.adapters import (
    AdapterName,
    FailureReason,
    Granularity,
    OutputError,
    RegexSpec,
    adapter_for,
    parse_jsonl,
    parse_tflite,
)
from farm.device.elf import read_elf_header, runs_on
from tests.fixtures.cross import ALL_ABIS, HOST_ABI

Factory = Callable[[str, str], Example]
TEXT_SPEC = RegexSpec.model_validate(
    {
        "patterns": [
            r"^iter \d+: (?P<iter_ms>[0-9.]+) ms$",
            r"^summary: iterations=(?P<n>\d+) mean_ms=(?P<mean>[0-9.]+)",
            r"^peak rss: (?P<rss>\d+) kB$",
        ],
        "metrics": {
            "iter_ms": {"name": "latency", "unit": "ms"},
            "n": {"name": "program_iterations", "unit": "count"},
            "mean": {"name": "program_mean_ms", "unit": "ms"},
            "rss": {"name": "rss_peak_kb", "unit": "kB"},
        },
        "latency": "iter_ms",
    }
)


@pytest.mark.parametrize("abi", ALL_ABIS)
@pytest.mark.parametrize("name", ["example-matmul", "example-textbench"])
def test_each_abi_build_is_a_static_binary_of_its_machine(example: Factory, name: str, abi: str) -> None:
    header = read_elf_header(example(name, abi).path)
    assert header is not None and runs_on(header, abi) and header.static


@pytest.mark.parametrize("abi", ALL_ABIS)
def test_matmul_speaks_the_jsonl_contract(example: Factory, abi: str) -> None:
    done = example("example-matmul", abi).run("--n=24", "--iters=5", "--warmup=1")
    assert done.returncode == 0 and done.stderr == ""
    output = parse_jsonl(done.stdout, done.stderr)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    iters = [e for e in events if e["event"] == "iter"]
    assert output.granularity is Granularity.PER_ITERATION and output.inferences == 5
    assert output.latencies_ms == tuple((e["t_end_ns"] - e["t_start_ns"]) / 1e6 for e in iters)
    # the program's own median (C, from its own clock readings) is the median of what was read
    median = output.metric("program_median_ms")
    assert median is not None and median.unit == "ms"
    assert median.value == pytest.approx(statistics.median(output.latencies_ms), abs=1e-6)
    measure = next(e for e in events if e.get("phase") == "measure")
    assert output.iterations is not None and output.iterations.window_ns[0] >= measure["t_ns"]


def test_matmul_measures_at_least_the_seconds_asked(example: Factory) -> None:
    done = example("example-matmul", HOST_ABI).run("--n=8", "--iters=1", "--seconds=0.2")
    output = parse_jsonl(done.stdout)
    measure_ns = next(json.loads(x)["t_ns"] for x in done.stdout.splitlines() if '"measure"' in x)
    assert output.iterations is not None and output.iterations.window_ns[1] - measure_ns >= 200_000_000
    assert output.inferences == len(output.latencies_ms) > 1


def test_matmul_input_file_is_its_data(example: Factory, tmp_path: Path) -> None:
    program = example("example-matmul", HOST_ABI)
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    first.write_bytes(bytes(range(256)) * 4)
    second.write_bytes(bytes(range(255, -1, -1)) * 4)

    def checksum_and_info(path: Path) -> tuple[float, dict[str, object]]:
        done = program.run("--n=16", "--iters=1", "--warmup=0", f"--input={path}")
        info = json.loads(done.stdout.splitlines()[0])
        checksum = parse_jsonl(done.stdout).metric("program_checksum")
        assert checksum is not None
        return checksum.value, info

    (a1, info), (a2, _), (b, _) = (
        checksum_and_info(first),
        checksum_and_info(first),
        checksum_and_info(second),
    )
    assert info["input_bytes"] == 1024 and a1 == a2 and a1 != b
    missing = program.run(f"--input={tmp_path / 'nope.bin'}")
    assert missing.returncode == 5 and "cannot open" in missing.stderr


def test_matmul_bad_argument_is_exit_2_one_line_and_an_error_event(example: Factory) -> None:
    done = example("example-matmul", HOST_ABI).run("--n=0")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--n" in done.stderr
    with pytest.raises(OutputError) as caught:
        parse_jsonl(done.stdout, done.stderr)
    assert caught.value.reason is FailureReason.PROGRAM_ERROR
    assert caught.value.detail == done.stderr.strip().removeprefix("example-matmul: ")


@pytest.mark.parametrize("abi", ALL_ABIS)
def test_textbench_text_read_by_a_regex_spec(example: Factory, abi: str) -> None:
    done = example("example-textbench", abi).run("--iters=6", "--work-us=300")
    assert done.returncode == 0, done.stderr
    output = adapter_for(AdapterName.REGEX, regex=TEXT_SPEC).parse(done.stdout, done.stderr)
    assert output.granularity is Granularity.PER_ITERATION and len(output.latencies_ms) == 6
    assert all(ms >= 0.3 for ms in output.latencies_ms)  # each spun at least --work-us
    got = {m.name: m.value for m in output.metrics}
    assert got["program_iterations"] == 6 and got["rss_peak_kb"] > 0
    # the program's mean (of unrounded times) against the mean of its rounded per-iteration lines
    assert got["program_mean_ms"] == pytest.approx(statistics.mean(output.latencies_ms), abs=1e-3)
    assert output.missing == ()


def test_textbench_in_benchmark_model_format_read_by_the_tflite_adapter(example: Factory) -> None:
    done = example("example-textbench", HOST_ABI).run("--iters=8", "--work-us=300", "--format=tflite")
    output = parse_tflite(done.stdout, done.stderr)
    got = {m.name: m.value for m in output.metrics}
    assert output.granularity is Granularity.SUMMARY and output.inferences == 8
    assert got["iterations_measured"] == 8 and got["warmup_iterations"] == 3
    assert got["latency_mean_ms"] >= 0.3 and got["first_inference_ms"] >= 0.3
    assert {"init_ms", "warmup_mean_ms", "memory_overall_delta_mb"} <= set(got)


def test_a_program_that_dies_midway(example: Factory) -> None:
    program = example("example-textbench", HOST_ABI)
    as_text = program.run("--iters=5", "--work-us=100", "--fail-after=2")
    assert as_text.returncode == 5
    # per iteration, what it printed before dying is still read (the exit code fails the run)
    assert len(adapter_for(AdapterName.REGEX, regex=TEXT_SPEC).parse(as_text.stdout, "").latencies_ms) == 2
    as_tflite = program.run("--iters=5", "--work-us=100", "--fail-after=2", "--format=tflite")
    with pytest.raises(OutputError) as caught:
        parse_tflite(as_tflite.stdout, as_tflite.stderr)
    assert caught.value.reason is FailureReason.TRUNCATED and "--fail-after" in str(caught.value)
