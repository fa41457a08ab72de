"""The llama_bench adapter on llama-bench's real output (fixtures/llama_bench_*: written by the
kernels/llama build's llama-bench on this host's smallest generated model, -o jsonl -v), and every
metric against the value recomputed here from the raw samples."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from farm.adapters import AdapterName, FailureReason, Granularity, OutputError, adapter_for, parse_llama_bench
from farm.adapters.llama_bench import load_times

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _values(stdout: str, stderr: str) -> dict[str, float]:
    return {m.name: m.value for m in parse_llama_bench(stdout, stderr).metrics}


def test_a_prefill_run_recomputed_from_its_samples() -> None:
    stdout, stderr = fixture("llama_bench_prefill.jsonl"), fixture("llama_bench_prefill.stderr")
    output = adapter_for(AdapterName.LLAMA_BENCH).parse(stdout, stderr)
    assert output.granularity is Granularity.SUMMARY and output.inferences is None
    got = {m.name: m.value for m in output.metrics}
    pp, pg = _records(stdout)
    assert (pp["n_prompt"], pp["n_gen"], pg["n_prompt"], pg["n_gen"]) == (64, 0, 64, 1)
    rates = [64 / (ns / 1e9) for ns in pp["samples_ns"]]
    assert got["prefill_tokens_per_s"] == pytest.approx(statistics.median(rates))
    assert got["prefill_p64_tokens_per_s"] == got["prefill_tokens_per_s"]
    # llama-bench's own mean of the same samples agrees with them (its avg_ts)
    assert statistics.mean(rates) == pytest.approx(pp["avg_ts"], rel=1e-3)
    assert got["time_to_first_token_ms"] == pytest.approx(statistics.median(pg["samples_ns"]) / 1e6)
    assert got["llm_prefill_measured_ms"] == pytest.approx(sum(pp["samples_ns"]) / 1e6)
    assert got["llm_prefill_tokens"] == 64 * len(pp["samples_ns"])
    assert got["model_bytes"] == pp["model_size"]
    assert got["iterations_measured"] == len(pp["samples_ns"]) + len(pg["samples_ns"])
    load_line = next(line for line in stderr.splitlines() if "load time" in line)
    assert got["model_load_ms"] == pytest.approx(float(load_line.split("=")[1].split("ms")[0]))


def test_a_decode_run_recomputed_from_its_samples() -> None:
    stdout, stderr = fixture("llama_bench_decode.jsonl"), fixture("llama_bench_decode.stderr")
    got = _values(stdout, stderr)
    (tg,) = _records(stdout)
    token_ms = sorted(ns / 1e6 / tg["n_gen"] for ns in tg["samples_ns"])
    assert got["decode_tokens_per_s"] == pytest.approx(statistics.median(1e3 / t for t in token_ms))
    assert got["decode_token_p50_ms"] == pytest.approx(statistics.median(token_ms))
    # p90 by linear interpolation between order statistics (numpy's default)
    rank = 0.9 * (len(token_ms) - 1)
    low = int(rank)
    high = min(low + 1, len(token_ms) - 1)
    assert got["decode_token_p90_ms"] == pytest.approx(
        token_ms[low] + (token_ms[high] - token_ms[low]) * (rank - low)
    )
    assert got["llm_decode_tokens"] == tg["n_gen"] * len(tg["samples_ns"])
    assert "prefill_tokens_per_s" not in got and "time_to_first_token_ms" not in got


def test_gpu_layers_without_a_gpu_fail_the_run() -> None:
    line = fixture("llama_bench_decode.jsonl").splitlines()[0]
    record = json.loads(line)
    record.update(n_gpu_layers=99, gpu_info="")
    with pytest.raises(OutputError) as caught:
        parse_llama_bench(json.dumps(record) + "\n", "")
    assert caught.value.reason is FailureReason.PROGRAM_ERROR
    assert "asked for 99 GPU layers but llama.cpp found no GPU device" in str(caught.value)
    record.update(gpu_info="Adreno (TM) 740")
    assert parse_llama_bench(json.dumps(record) + "\n", "").metric("decode_tokens_per_s") is not None


def test_empty_cut_and_malformed_output() -> None:
    with pytest.raises(OutputError) as empty:
        parse_llama_bench("", "main: error: failed to load model 'x.gguf'\n")
    assert empty.value.reason is FailureReason.EMPTY and "failed to load model" in str(empty.value)
    whole = fixture("llama_bench_decode.jsonl").splitlines()[0]
    with pytest.raises(OutputError) as cut:
        parse_llama_bench(whole[: len(whole) // 2] + "\n", "")
    assert cut.value.reason is FailureReason.TRUNCATED and "stdout line 1" in str(cut.value)
    record = json.loads(whole)
    del record["samples_ns"]
    with pytest.raises(OutputError, match="stdout line 1: no samples_ns"):
        parse_llama_bench(json.dumps(record) + "\n", "")
    with pytest.raises(OutputError) as none:
        parse_llama_bench("| model | size |\n", "")
    assert none.value.reason is FailureReason.NO_METRIC


def test_the_model_named_twice_gives_its_first_and_its_second_load_and_pools_the_samples() -> None:
    """fixtures/llama_bench_reload.*: `-m build/models/X -m ./build/models/X -p 32 -pg 32,1 -r 3`:
    llama-bench loads the model for the first test and again for the third (its path differs
    from the previous test's), and prints one load time per test."""
    stdout, stderr = fixture("llama_bench_reload.jsonl"), fixture("llama_bench_reload.stderr")
    records = _records(stdout)
    assert [r["model_filename"] for r in records] == ["build/models/tinyllama-s-q4_0.gguf"] * 2 + [
        "./build/models/tinyllama-s-q4_0.gguf"
    ] * 2
    loads = [float(line.split("=")[1].split("ms")[0]) for line in stderr.splitlines() if "load time" in line]
    got = _values(stdout, stderr)
    assert got["model_load_ms"] == pytest.approx(loads[0])
    assert got["model_load_warm_ms"] == pytest.approx(loads[2])  # not the second test's: no load there
    rates = [32 / (ns / 1e9) for r in records if r["n_gen"] == 0 for ns in r["samples_ns"]]
    assert len(rates) == 6 and got["prefill_tokens_per_s"] == pytest.approx(statistics.median(rates))
    assert got["prefill_p32_tokens_per_s"] == got["prefill_tokens_per_s"]
    first = [ns for r in records if r["n_gen"] == 1 for ns in r["samples_ns"]]
    assert got["time_to_first_token_ms"] == pytest.approx(statistics.median(first) / 1e6)
    assert got["iterations_measured"] == 12


def test_a_run_of_one_load_or_of_another_model_has_no_warm_load() -> None:
    stdout, stderr = fixture("llama_bench_prefill.jsonl"), fixture("llama_bench_prefill.stderr")
    assert "model_load_warm_ms" not in _values(stdout, stderr)
    records = _records(fixture("llama_bench_reload.jsonl"))
    other = [*records[:2], *({**r, "model_filename": "build/models/other.gguf"} for r in records[2:])]
    assert load_times(other, [10.0, 20.0, 30.0, 40.0]) == (10.0, None)
    # a later load of the same file with other model parameters (GPU layers) is not the same load
    offloaded = [*records[:2], *({**r, "n_gpu_layers": 99} for r in records[2:])]
    assert load_times(offloaded, [10.0, 20.0, 30.0, 40.0]) == (10.0, None)
    assert load_times(records, [10.0, 20.0, 30.0, 40.0]) == (10.0, 30.0)
    assert load_times(records, [10.0]) == (10.0, None)  # a cut log: the loads it has
