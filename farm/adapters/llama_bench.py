"""The `llama_bench` adapter: llama.cpp's llama-bench run with `-o jsonl` (and `-v` for load time).

llama-bench (tools/llama-bench/llama-bench.cpp, jsonl_printer) prints one JSON object per test on
stdout, after the test's repetitions:

    {"build_commit": "4227c9b", ..., "backends": "CPU", "gpu_info": "", "model_size": 3391488,
     "n_threads": 2, "n_gpu_layers": 0, "n_prompt": 32, "n_gen": 0, "n_depth": 0,
     "avg_ns": 5432100, ..., "samples_ns": [ 5401000, 5463200 ], "samples_ts": [ 5924.8, 5857.4 ]}

With `-v` its log goes to stderr, including llama.cpp's `llama_perf_context_print: load time =
  12.34 ms` after each test (one per test, in order). llama-bench loads a model for a test whose
model parameters differ from the previous test's (`equal_mparams`: path, GPU layers, split, mmap,
...) and keeps it otherwise, so a test's load time is a load only where the model was loaded for
it; later tests' figures run from that load's start. `model_load_ms` is the run's first load;
`model_load_warm_ms` a later load of the same file with the same parameters: the experiment names
the model twice under two spellings of one path (`-m F -m /.F`), so llama-bench loads it again
from the page cache the first load filled. The first load is cold when farm dropped the file's
pages just before the program started (benchmark.cold_files, farm.engine.pagecache, which adds
`model_load_cold_ms`); else it is warm too (the file farm just pushed is in the page cache).
Tests of one shape measured after each load are one test with both loads' samples.
Metrics are farm.analysis.llm's, recomputed from every repetition's `samples_ns`; the raw lines
stay in the run's stdout.jsonl. The result is a SUMMARY (a repetition is a whole test, not an
iteration of one workload), with `iterations_measured` the number of repetitions.

A run that asked for GPU layers (`-ngl N`, N > 0) on a build or phone where llama.cpp found no GPU
device ran on the CPU without saying so; that is a failure (PROGRAM_ERROR), not a CPU result.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Sequence
from dataclasses import replace
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
# The model parameters llama-bench compares to decide whether a test needs a new load (the
# jsonl names of cmd_params_instance::equal_mparams' fields, the path aside).
_LOAD_FIELDS = ("n_gpu_layers", "split_mode", "main_gpu", "use_mmap", "tensor_split", "tensor_buft_overrides")


def _load_key(record: dict[str, Any]) -> tuple[str, ...]:
    """What makes a test load its model: the file (its path normalised: `/./a` is `/a`) and the
    other model parameters."""
    path = posixpath.normpath(str(record.get("model_filename", "")))
    return (path, *(str(record.get(name)) for name in _LOAD_FIELDS))


def load_times(
    records: Sequence[dict[str, Any]], loads_ms: Sequence[float]
) -> tuple[float | None, float | None]:
    """(first load, a later load of the same file with the same parameters) of a run's tests in
    order, given one stderr load time per test; None where there is none."""
    first: float | None = loads_ms[0] if loads_ms else None
    again: float | None = None
    for index in range(1, min(len(records), len(loads_ms))):
        previous, record = records[index - 1], records[index]
        reloaded = record.get("model_filename") != previous.get("model_filename") or any(
            record.get(name) != previous.get(name) for name in _LOAD_FIELDS
        )
        if reloaded and _load_key(record) == _load_key(records[0]):
            again = loads_ms[index]
            break
    return first, again


def _pooled(tests: Sequence[tuple[tuple[str, ...], BenchTest]]) -> list[BenchTest]:
    """Tests of one shape on one model (its two loads) as one test with all their samples."""
    merged: dict[tuple[object, ...], BenchTest] = {}
    for key, test in tests:
        shape = (key, test.n_prompt, test.n_gen, test.n_threads)
        known = merged.get(shape)
        merged[shape] = (
            test if known is None else replace(known, samples_ns=known.samples_ns + test.samples_ns)
        )
    return list(merged.values())


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
    tests: list[tuple[tuple[str, ...], BenchTest]] = []
    records: list[dict[str, Any]] = []
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
        test = _test_of(record, place)
        records.append(record)
        tests.append((_load_key(record), test))
    if not tests:
        raise OutputError(
            ADAPTER, FailureReason.NO_METRIC, f"no test record on stdout ({stderr_tail(stderr)})"
        )
    first_ms, warm_ms = load_times(records, [float(ms) for ms in _LOAD_TIME.findall(stderr)])
    pooled = _pooled(tests)
    metrics = bench_metrics(pooled, first_ms, warm_ms)
    repetitions = sum(len(t.samples_ns) for t in pooled)
    metrics.append(Metric("iterations_measured", float(repetitions), "count"))
    return ProgramOutput(ADAPTER, Granularity.SUMMARY, (), tuple(metrics), None, notes=tuple(notes))


__all__ = ["load_times", "parse_llama_bench"]
