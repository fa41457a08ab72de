"""The `llama_bench` adapter: llama.cpp's llama-bench run with `-o jsonl` (and `-v` for load time).

llama-bench (tools/llama-bench/llama-bench.cpp, jsonl_printer) prints one JSON object per test on
stdout, after the test's repetitions:

    {"build_commit": "4227c9b", ..., "backends": "CPU", "gpu_info": "", "model_size": 3391488,
     "n_threads": 2, "n_gpu_layers": 0, "n_prompt": 32, "n_gen": 0, "n_depth": 0,
     "avg_ns": 5432100, ..., "samples_ns": [ 5401000, 5463200 ], "samples_ts": [ 5924.8, 5857.4 ]}

With `-v` its log goes to stderr, including llama.cpp's `llama_perf_context_print: load time =
  12.34 ms` after each test; the first is the model's load (farm.analysis.llm says what it spans).
It is a warm load: llama-bench keeps the model between tests, and the file farm just pushed is in
the page cache. A cold load needs the file's pages dropped (posix_fadvise DONTNEED, no root
needed) and checked (mincore) on the phone just before the program starts, which farm's external
programs cannot do yet (kernels/llama/README.md, "Model load time").
Metrics are farm.analysis.llm's, recomputed from every repetition's `samples_ns`; the raw lines
stay in the run's stdout.jsonl. The result is a SUMMARY (a repetition is a whole test, not an
iteration of one workload), with `iterations_measured` the number of repetitions.

A run that asked for GPU layers (`-ngl N`, N > 0) on a build or phone where llama.cpp found no GPU
device ran on the CPU without saying so; that is a failure (PROGRAM_ERROR), not a CPU result.
"""

from __future__ import annotations

import json
import re
from typing import Any

from farm.adapters.output import (
    FailureReason,
    Granularity,
    OutputError,
    ProgramOutput,
    require_text,
    stderr_tail,
)
from farm.analysis.llm import BenchTest, bench_metrics
from farm.metric import Metric

ADAPTER = "llama_bench"
_LOAD_TIME = re.compile(r"\bload time\s*=\s*([0-9.]+)\s*ms")
_INT_FIELDS = ("n_prompt", "n_gen", "model_size", "n_gpu_layers", "n_threads")


def _test_of(record: Any, place: str) -> BenchTest:
    if not isinstance(record, dict):
        raise OutputError(ADAPTER, FailureReason.MALFORMED, f"{place}: not a JSON object")
    missing = [key for key in (*_INT_FIELDS, "samples_ns") if key not in record]
    if missing:
        raise OutputError(ADAPTER, FailureReason.MALFORMED, f"{place}: no {', '.join(missing)}")
    samples = record["samples_ns"]
    values = [record[key] for key in _INT_FIELDS]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise OutputError(
            ADAPTER, FailureReason.MALFORMED, f"{place}: {', '.join(_INT_FIELDS)} must be counts"
        )
    if not isinstance(samples, list) or not samples:
        raise OutputError(ADAPTER, FailureReason.TRUNCATED, f"{place}: samples_ns is empty")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in samples):
        raise OutputError(ADAPTER, FailureReason.MALFORMED, f"{place}: samples_ns must be positive integers")
    n_prompt, n_gen, model_bytes, n_gpu_layers, n_threads = values
    if n_prompt + n_gen == 0:
        raise OutputError(ADAPTER, FailureReason.MALFORMED, f"{place}: a test of no tokens")
    gpu_info = str(record.get("gpu_info", ""))
    backends = str(record.get("backends", ""))
    if n_gpu_layers > 0 and not gpu_info.strip():
        raise OutputError(
            ADAPTER,
            FailureReason.PROGRAM_ERROR,
            f"{place}: asked for {n_gpu_layers} GPU layers but llama.cpp found no GPU device "
            f"(backends: {backends or 'none'}), so it ran on the CPU",
        )
    return BenchTest(n_prompt, n_gen, tuple(samples), model_bytes, backends, n_gpu_layers, n_threads)


def parse_llama_bench(stdout: str, stderr: str = "") -> ProgramOutput:
    require_text(ADAPTER, stdout, stderr)
    tests: list[BenchTest] = []
    notes: list[str] = []
    for number, line in enumerate(stdout.splitlines(), 1):
        text = line.strip()
        if not text:
            continue
        place = f"stdout line {number}"
        if not text.startswith("{"):
            notes.append(f"{place}: not a test record, passed over")
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            # llama-bench flushes each record whole: a cut line is a killed program.
            raise OutputError(
                ADAPTER, FailureReason.TRUNCATED, f"{place}: {error.msg} ({stderr_tail(stderr)})"
            ) from None
        tests.append(_test_of(record, place))
    if not tests:
        raise OutputError(
            ADAPTER, FailureReason.NO_METRIC, f"no test record on stdout ({stderr_tail(stderr)})"
        )
    loads = _LOAD_TIME.findall(stderr)
    metrics = bench_metrics(tests, float(loads[0]) if loads else None)
    repetitions = sum(len(t.samples_ns) for t in tests)
    metrics.append(Metric("iterations_measured", float(repetitions), "count"))
    return ProgramOutput(ADAPTER, Granularity.SUMMARY, (), tuple(metrics), None, notes=tuple(notes))


__all__ = ["parse_llama_bench"]
