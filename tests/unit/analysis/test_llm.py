"""Language-model metrics (farm.analysis.llm): phases, windows, energy per token, the catalogue."""

from __future__ import annotations

import pytest

from farm.analysis.llm import (
    LLM_METRICS,
    BenchTest,
    Phase,
    bench_metrics,
    energy_per_token_metrics,
    phase_window_metrics,
)
from farm.analysis.regression import direction_of
from farm.metric import Metric


def _test(n_prompt: int, n_gen: int, *samples_ns: int) -> BenchTest:
    return BenchTest(n_prompt, n_gen, samples_ns, 4_000_000, "CPU", 0, 2)


def _values(metrics: list[Metric]) -> dict[str, float]:
    return {m.name: m.value for m in metrics}


def test_phases_of_llama_bench_tests() -> None:
    assert _test(64, 0, 1).phase is Phase.PREFILL
    assert _test(0, 16, 1).phase is Phase.DECODE
    assert _test(64, 1, 1).phase is Phase.FIRST_TOKEN
    assert _test(64, 16, 1).phase is Phase.MIXED


def test_prefill_run_metrics_from_the_samples() -> None:
    # 64 tokens in 10, 20 and 40 ms: 6400, 3200, 1600 tok/s; the median is the middle one.
    tests = [_test(64, 0, 10_000_000, 20_000_000, 40_000_000), _test(64, 1, 30_000_000, 50_000_000)]
    got = _values(bench_metrics(tests, 12.5))
    assert got["prefill_tokens_per_s"] == pytest.approx(3200.0)
    assert got["prefill_p64_tokens_per_s"] == pytest.approx(3200.0)
    assert got["time_to_first_token_ms"] == pytest.approx(40.0)  # median of 30 and 50 ms
    assert got["model_load_ms"] == 12.5 and got["model_bytes"] == 4_000_000
    # The phase window counts the pp test only: 70 ms for 3 x 64 tokens.
    assert got["llm_prefill_measured_ms"] == pytest.approx(70.0)
    assert got["llm_prefill_tokens"] == 192
    assert "decode_tokens_per_s" not in got and "llm_decode_tokens" not in got


def test_decode_run_per_token_percentiles() -> None:
    # 16 tokens per repetition: 1, 2, 3, 4 ms per token.
    tests = [_test(0, 16, *(16_000_000 * k for k in (1, 2, 3, 4)))]
    got = _values(bench_metrics(tests, None))
    assert got["decode_tokens_per_s"] == pytest.approx((500.0 + 333.333333) / 2)
    assert got["decode_token_p50_ms"] == pytest.approx(2.5)
    assert got["decode_token_p90_ms"] == pytest.approx(3.7)
    assert got["llm_decode_measured_ms"] == pytest.approx(160.0) and got["llm_decode_tokens"] == 64
    assert "model_load_ms" not in got


def test_two_prompt_lengths_have_no_single_prefill_rate_and_a_mixed_run_no_window() -> None:
    got = _values(bench_metrics([_test(16, 0, 1_000_000), _test(64, 0, 2_000_000)], None))
    assert got["prefill_p16_tokens_per_s"] == pytest.approx(16_000.0)
    assert got["prefill_p64_tokens_per_s"] == pytest.approx(32_000.0)
    assert "prefill_tokens_per_s" not in got
    assert phase_window_metrics([_test(64, 0, 1), _test(0, 16, 1)]) == []
    assert phase_window_metrics([_test(64, 16, 1)]) == []


def test_energy_per_token_charges_net_power_to_the_phase_time() -> None:
    window = [Metric("llm_decode_measured_ms", 2000.0, "ms"), Metric("llm_decode_tokens", 100.0, "count")]
    # (1500 - 500) mW x 2 s = 2000 mJ over 100 tokens.
    (metric,) = energy_per_token_metrics(1500.0, 500.0, window)
    assert metric == Metric("energy_per_decode_token_mj", pytest.approx(20.0), "mJ")
    prefill = [Metric("llm_prefill_measured_ms", 500.0, "ms"), Metric("llm_prefill_tokens", 1000.0, "count")]
    assert energy_per_token_metrics(900.0, 500.0, prefill) == [
        Metric("energy_per_prefill_token_mj", pytest.approx(0.2), "mJ")
    ]
    assert energy_per_token_metrics(None, 500.0, window) == []
    assert energy_per_token_metrics(1500.0, None, window) == []
    assert energy_per_token_metrics(1500.0, 500.0, []) == []
    # at or below the idle draw (drift, a charging battery): no figure rather than a negative one
    assert energy_per_token_metrics(400.0, 500.0, window) == []
    assert energy_per_token_metrics(-900.0, 500.0, window) == []


def test_the_catalogue_agrees_with_the_regression_direction_of_each_name() -> None:
    for definition in LLM_METRICS:
        if definition.direction is not None and "<" not in definition.name:
            assert direction_of(definition.name) is definition.direction, definition.name
    names = {d.name for d in LLM_METRICS}
    made = _values(bench_metrics([_test(64, 0, 1), _test(64, 1, 2)], 1.0))
    made |= _values(bench_metrics([_test(0, 16, 1)], None))
    assert {n for n in made if not n.startswith("prefill_p")} <= names
