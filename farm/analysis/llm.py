"""Language-model metrics from llama.cpp's llama-bench: what each test's raw repetition times mean.

llama-bench runs tests; a test processes `n_prompt` prompt tokens in batches (prefill, its `pp`
test), generates `n_gen` tokens one at a time (decode, `tg`), or both in one timed run (`pg`:
the prompt, then the generated tokens). It repeats a test `-r` times and prints each
repetition's wall time in `samples_ns` (tools/llama-bench/llama-bench.cpp: `samples_ns`,
`avg_ts` = the mean of n_tokens / sample). Every metric here is recomputed from those samples,
never from llama-bench's averages:

    prefill_tokens_per_s          n_prompt / sample, median over repetitions (the run's one pp test)
    prefill_p<N>_tokens_per_s     the same for prompt length N (every pp test of the run)
    decode_tokens_per_s           n_gen / sample, median over repetitions (tg test)
    decode_token_p50_ms ...p90/p99   per-token decode latency: sample / n_gen of each repetition,
                                  percentiles over repetitions (llama-bench times a whole tg run,
                                  not each token: these are per-repetition mean token times)
    time_to_first_token_ms        a pg test with one generated token (`-pg N,1`): the prompt's
                                  prefill plus the first decoded token in one timed run; median
    model_load_ms                 llama.cpp's own "load time" (llama-bench -v, stderr) of the run's
                                  first model load: from the start of loading the model to the end
                                  of its first evaluation (the warm-up's, which pages the mmapped
                                  weights in)
    model_load_warm_ms            the same for a second load of the same file in the run (the model
                                  named twice, `-m F -m /.F`: llama-bench reloads a model whose
                                  path differs from the previous test's), from the page cache the
                                  first load filled
    model_load_cold_ms            the first load of a run that dropped the model from the page cache
                                  just before (benchmark.cold_files; farm.engine.pagecache adds it
                                  with `cold_start_valid`, the proof that the drop took)
    model_bytes                   the weights' size as llama.cpp reports it (model_size)

Energy per token takes each phase's own window from one run per phase (a run whose tests are all
prefill, or all decode): llama-bench prints no event on the phone's clock that would split a
run's window by phase, and a window cannot be split by guessing. Within a run, the net power over
the program's window (mean power minus the phone's idle power) is charged to the measured
repetitions' time of that phase: energy = net power x sum(samples), over the tokens those
repetitions processed (the model load and warm-up in the window are not tokens and are not
charged to them; this assumes the phase's power is the window's mean, which holds when the
window is that phase's work and little else: enough repetitions, a small model load).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from farm.analysis.regression import Direction
from farm.metric import Metric


@dataclass(frozen=True)
class MetricDefinition:
    """One catalogue entry: what a metric means, its unit and which way is better (None: neither,
    a count the others are computed from)."""

    name: str
    unit: str
    direction: Direction | None
    meaning: str


DECODE_PERCENTILES = (50.0, 90.0, 99.0)
FIRST_LOAD_METRIC = "model_load_ms"
COLD_LOAD_METRIC = "model_load_cold_ms"
WARM_LOAD_METRIC = "model_load_warm_ms"

LLM_METRICS: tuple[MetricDefinition, ...] = (
    MetricDefinition(
        "prefill_tokens_per_s", "tok/s", Direction.HIGHER_IS_BETTER, "prompt tokens processed per second"
    ),
    MetricDefinition(
        "prefill_p<N>_tokens_per_s", "tok/s", Direction.HIGHER_IS_BETTER, "prefill rate at prompt length N"
    ),
    MetricDefinition(
        "decode_tokens_per_s", "tok/s", Direction.HIGHER_IS_BETTER, "tokens generated per second"
    ),
    *(
        MetricDefinition(
            f"decode_token_p{q:g}_ms",
            "ms",
            Direction.LOWER_IS_BETTER,
            f"per-token decode time, p{q:g} over repetitions",
        )
        for q in DECODE_PERCENTILES
    ),
    MetricDefinition(
        "time_to_first_token_ms",
        "ms",
        Direction.LOWER_IS_BETTER,
        "prefill of the prompt plus the first token",
    ),
    MetricDefinition(
        FIRST_LOAD_METRIC, "ms", Direction.LOWER_IS_BETTER, "first model load to end of first evaluation"
    ),
    MetricDefinition(
        COLD_LOAD_METRIC,
        "ms",
        Direction.LOWER_IS_BETTER,
        "first load after the model's pages were dropped from the page cache",
    ),
    MetricDefinition(
        WARM_LOAD_METRIC, "ms", Direction.LOWER_IS_BETTER, "second load of the model, from the page cache"
    ),
    MetricDefinition(
        "cold_start_valid", "bool", None, "every cold file was out of the page cache at the start"
    ),
    MetricDefinition(
        "cold_resident_after_drop_pct", "%", None, "cold files' pages still cached after the drop"
    ),
    MetricDefinition("model_bytes", "B", Direction.LOWER_IS_BETTER, "weights' size in memory"),
    MetricDefinition(
        "energy_per_prefill_token_mj", "mJ", Direction.LOWER_IS_BETTER, "net energy per prompt token"
    ),
    MetricDefinition(
        "energy_per_decode_token_mj", "mJ", Direction.LOWER_IS_BETTER, "net energy per generated token"
    ),
    *(
        MetricDefinition(f"llm_{phase}_measured_ms", "ms", None, f"{phase} repetitions' time, summed")
        for phase in ("prefill", "decode")
    ),
    *(
        MetricDefinition(f"llm_{phase}_tokens", "count", None, f"{phase} tokens measured")
        for phase in ("prefill", "decode")
    ),
)


class Phase(enum.StrEnum):
    PREFILL = "prefill"  # pp: prompt tokens in batches
    DECODE = "decode"  # tg: one token at a time
    FIRST_TOKEN = "first_token"  # pg with n_gen = 1: time to first token
    MIXED = "mixed"  # pg with more generated tokens: both phases in one timed run


@dataclass(frozen=True)
class BenchTest:
    """One llama-bench test (a jsonl line): its shape and every repetition's wall time."""

    n_prompt: int
    n_gen: int
    samples_ns: tuple[int, ...]
    model_bytes: int
    backends: str
    n_gpu_layers: int
    n_threads: int

    @property
    def phase(self) -> Phase:
        if self.n_gen == 0:
            return Phase.PREFILL
        if self.n_prompt == 0:
            return Phase.DECODE
        return Phase.FIRST_TOKEN if self.n_gen == 1 else Phase.MIXED

    @property
    def tokens(self) -> int:
        return self.n_prompt + self.n_gen


def _median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64)))


def bench_metrics(
    tests: Sequence[BenchTest], model_load_ms: float | None, warm_load_ms: float | None = None
) -> list[Metric]:
    """The LLM metrics of one run's tests (non-empty, each with samples; a shape measured after
    each of two loads of one model is one test with both loads' samples)."""
    metrics: list[Metric] = []
    prefill = [t for t in tests if t.phase is Phase.PREFILL]
    for test in prefill:
        rates = [test.n_prompt / (ns / 1e9) for ns in test.samples_ns]
        metrics.append(Metric(f"prefill_p{test.n_prompt}_tokens_per_s", _median(rates), "tok/s"))
    if len(prefill) == 1:
        metrics.append(Metric("prefill_tokens_per_s", metrics[-1].value, "tok/s"))
    decode = [t for t in tests if t.phase is Phase.DECODE]
    if decode:
        test = decode[0]
        token_ms = np.asarray(test.samples_ns, dtype=np.float64) / 1e6 / test.n_gen
        metrics.append(Metric("decode_tokens_per_s", _median(list(1e3 / token_ms)), "tok/s"))
        metrics += [
            Metric(f"decode_token_p{q:g}_ms", float(np.percentile(token_ms, q)), "ms")
            for q in DECODE_PERCENTILES
        ]
    first = [t for t in tests if t.phase is Phase.FIRST_TOKEN]
    if first:
        metrics.append(Metric("time_to_first_token_ms", _median(first[0].samples_ns) / 1e6, "ms"))
    if model_load_ms is not None:
        metrics.append(Metric(FIRST_LOAD_METRIC, model_load_ms, "ms"))
    if warm_load_ms is not None:
        metrics.append(Metric(WARM_LOAD_METRIC, warm_load_ms, "ms"))
    metrics.append(Metric("model_bytes", float(tests[0].model_bytes), "B"))
    metrics += phase_window_metrics(tests)
    return metrics


def phase_window_metrics(tests: Sequence[BenchTest]) -> list[Metric]:
    """The measured time and tokens of the run's one phase, when its window holds one phase only:
    prefill (pp tests, and first-token tests, which are a prompt plus one token), or decode (tg
    tests only). A run that decodes and prefills gets none: its window cannot be split."""
    phases = {t.phase for t in tests}
    if phases <= {Phase.PREFILL, Phase.FIRST_TOKEN} and Phase.PREFILL in phases:
        counted = [t for t in tests if t.phase is Phase.PREFILL]
        name = "prefill"
    elif phases == {Phase.DECODE}:
        counted = list(tests)
        name = "decode"
    else:
        return []
    measured_ns = sum(sum(t.samples_ns) for t in counted)
    tokens = sum(t.tokens * len(t.samples_ns) for t in counted)
    return [
        Metric(f"llm_{name}_measured_ms", measured_ns / 1e6, "ms"),
        Metric(f"llm_{name}_tokens", float(tokens), "count"),
    ]


def energy_per_token_metrics(
    power_mean_mw: float | None, power_idle_mw: float | None, phase_metrics: Sequence[Metric]
) -> list[Metric]:
    """Net energy per token of a single-phase run (module docstring): the net power over the
    program's window times the phase's measured time, over its tokens. Nothing without power, an
    idle baseline, power above it or a single-phase window."""
    if power_mean_mw is None or power_idle_mw is None or power_mean_mw <= power_idle_mw:
        # Below the idle draw is no measurement of the work (the idle draw drifted, or too few
        # gauge readings): no figure, as farm shows no negative net energy.
        return []
    values = {m.name: m.value for m in phase_metrics}
    for phase in ("prefill", "decode"):
        measured_ms = values.get(f"llm_{phase}_measured_ms")
        tokens = values.get(f"llm_{phase}_tokens")
        if measured_ms and tokens:
            energy_mj = (power_mean_mw - power_idle_mw) * measured_ms / 1e3
            return [Metric(f"energy_per_{phase}_token_mj", energy_mj / tokens, "mJ")]
    return []


__all__ = [
    "COLD_LOAD_METRIC",
    "FIRST_LOAD_METRIC",
    "LLM_METRICS",
    "WARM_LOAD_METRIC",
    "BenchTest",
    "MetricDefinition",
    "Phase",
    "bench_metrics",
    "energy_per_token_metrics",
    "phase_window_metrics",
]
