"""llama.cpp's llama-bench (kernels/llama) on a virtual phone with the smallest generated model:
prefill and decode runs whose metrics are recomputed here from the raw samples in their run
folders, a model that fails to load and a run killed by SIGKILL (what the out-of-memory killer
sends) failing their runs with the reason, a missing model file refused in one line, and runs
long enough for the fuel gauge keeping energy per token of each phase."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, open_store, run_farm, start_farm, write_experiment

pytestmark = pytest.mark.integration

LLAMA = REPO / "kernels" / "llama" / "build"
BENCH = LLAMA / "x86_64" / "llama-bench"
MODEL = LLAMA / "models" / "tinyllama-s-q4_0.gguf"

if not (BENCH.exists() and MODEL.exists()):
    pytest.skip("make llama has not built llama-bench and the models", allow_module_level=True)


def _experiment(folder: Path, name: str, model: Path, *, iters: int = 3, zip_phases: bool = True) -> Path:
    """A prefill run (-p 32 and -pg 32,1) and a decode run (-n 8) of `model`; or one decode run
    of 64 tokens (zip_phases False)."""
    if zip_phases:
        phases = (
            'prompt: [32, 0], gen: [0, 8], first_token: ["32,1", "0,0"]}\nzip: [[prompt, gen, first_token]]'
        )
    else:
        phases = 'prompt: [0], gen: [64], first_token: ["0,0"]}'
    lines = [
        "benchmark:",
        "  program: external",
        f"  binary: {{x86_64: {BENCH}}}",
        '  args: [-m, "{model}", -o, jsonl, -v, -r, "{iters}", -t, "2", -ngl, "0",',
        '         -p, "{prompt}", -n, "{gen}", -pg, "{first_token}"]',
        f"  assets: [{model}]",
        "  output: llama_bench",
        f"sweep: {{model: [{model}], {phases}",
        f"measurement: {{iterations: {iters}, repetitions: 1}}",
        "telemetry: {idle_baseline_s: 0}",
        "conditions: {cooldown: {max_temp_c: 90, timeout_s: 30}, min_battery_pct: 5}",
        "timeouts: {run_timeout_s: 120}",
    ]
    return write_experiment(folder, name, "\n".join(lines) + "\n")


def _runs(results: Path, experiment: str) -> list[run_store.Run]:
    with open_store(results) as store:
        return list(run_store.list_runs(store, experiment))


def _metrics(results: Path, run_id: str) -> dict[str, float]:
    with open_store(results) as store:
        return {m.name: m.value for m in run_store.get_metrics(store, run_id)}


def test_prefill_and_decode_runs_keep_every_sample_and_their_metrics_recompute(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    path = _experiment(tmp_path, "llm_small", MODEL)
    done = run_farm(phones.adb_port, results, "run", str(path), "--no-live", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    runs = _runs(results, "llm_small")
    assert len(runs) == 2 and all(run.state is RunState.DONE for run in runs)
    for run in runs:
        got = _metrics(results, run.run_id)
        (stdout,) = results.glob(f"llm_small/{run.run_id}*/stdout.jsonl")
        records = [json.loads(line) for line in stdout.read_text().splitlines() if line.strip()]
        assert all(len(r["samples_ns"]) == 3 for r in records)  # every repetition's time kept
        assert got["model_bytes"] == MODEL.stat().st_size or got["model_bytes"] == records[0]["model_size"]
        assert got["model_load_ms"] > 0 and got["rss_peak_mb"] > 0
        if run.factors["gen"] == 0:
            pp, pg = records
            rates = [pp["n_prompt"] / (ns / 1e9) for ns in pp["samples_ns"]]
            assert got["prefill_tokens_per_s"] == pytest.approx(statistics.median(rates))
            assert got["time_to_first_token_ms"] == pytest.approx(statistics.median(pg["samples_ns"]) / 1e6)
        else:
            (tg,) = records
            token_ms = [ns / 1e6 / tg["n_gen"] for ns in tg["samples_ns"]]
            assert got["decode_token_p50_ms"] == pytest.approx(statistics.median(token_ms))
            assert got["decode_tokens_per_s"] == pytest.approx(statistics.median(1e3 / t for t in token_ms))


def test_a_model_that_fails_to_load_and_a_killed_run_fail_with_their_reason(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(MODEL.read_bytes()[:4096])  # a cut download: the header, no tensors
    path = _experiment(tmp_path, "llm_broken", broken)
    done = run_farm(phones.adb_port, results, "run", str(path), "--no-live", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    for run in _runs(results, "llm_broken"):
        assert run.state is RunState.FAILED and run.reason is not None
        assert run.reason.startswith("llama-bench exited 1: stderr ends:"), run.reason
        assert "failed to load model" in run.reason

    # A long decode run, killed on the phone with SIGKILL as the OOM killer would.
    long_run = _experiment(tmp_path, "llm_killed", MODEL, iters=100000, zip_phases=False)
    farm = start_farm(phones.adb_port, results, "run", str(long_run), "--no-live", "--json")
    try:
        device = phones.client().device(serial=phones[0].adb_serial)
        deadline = time.monotonic() + 120
        pid = ""
        while not pid and time.monotonic() < deadline and farm.poll() is None:
            pid = str(device.shell(["pidof", "llama-bench"])).strip()
        if not pid:
            farm.kill()
            pytest.fail(f"llama-bench never started on the phone: {farm.communicate()[0]}")
        device.shell(["kill", "-9", pid.split()[0]])
        out, _ = farm.communicate(timeout=120)
    finally:
        if farm.poll() is None:
            farm.kill()
            farm.wait()
    assert farm.returncode == 1, out
    (run,) = _runs(results, "llm_killed")
    assert run.state is RunState.FAILED and run.reason is not None
    assert run.reason.startswith(
        "llama-bench exited 137 (killed by SIGKILL: the kernel's out-of-memory killer"
    )


def test_a_missing_model_file_is_one_line_naming_it(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1)
    missing = tmp_path / "models" / "nowhere.gguf"
    path = _experiment(tmp_path, "llm_missing", missing)
    done = run_farm(phones.adb_port, tmp_path / "results", "run", str(path), "--no-live")
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, lines
    assert f"{path}:" in lines[0] and f"asset {missing} does not exist" in lines[0], lines[0]


ENERGY_PREFILL_REPS = 1000
ENERGY_DECODE_REPS = 1500


def test_runs_long_enough_for_the_gauge_keep_energy_per_token_of_each_phase(
    virtual_phones, tmp_path: Path
) -> None:
    """adreno-sd865: charging can be stopped (input_suspend, root) and its gauge updates every
    second. Runs of several seconds per phase on the smallest model (1000 prefill and 1500
    decode repetitions; 300 decode repetitions still ended within two updates): each sees at
    least three gauge updates, so its energy per token is kept. The study's quick variant keeps
    its second-long runs (energy per token flagged there): these counts on its m models ran past
    300 s on 4 phones sharing 2 host cores."""
    reps = {0: ENERGY_PREFILL_REPS, 16: ENERGY_DECODE_REPS}  # gen 0: prefill, 16: decode
    model = LLAMA / "models" / "tinyllama-s-f16.gguf"
    lines = [
        "benchmark:",
        "  program: external",
        f"  binary: {{x86_64: {BENCH}}}",
        '  args: [-m, "{model}", -o, jsonl, -v, -r, "{reps}", -t, "2", -ngl, "0",',
        '         -p, "{prompt}", -n, "{gen}", -pg, "{first_token}", --poll, "0"]',
        f"  assets: [{model}]",
        "  output: llama_bench",
        f"sweep: {{model: [{model}], prompt: [128, 0], gen: [0, 16], first_token: ['128,1', '0,0'],",
        f"        reps: [{reps[0]}, {reps[16]}]}}",
        "zip: [[prompt, gen, first_token, reps]]",
        "measurement: {repetitions: 1}",
        "telemetry: {idle_baseline_s: 3}",
        "conditions: {cooldown: {max_temp_c: 90, timeout_s: 30}, min_battery_pct: 5}",
        "timeouts: {run_timeout_s: 300}",
    ]
    path = write_experiment(tmp_path, "llm_energy", "\n".join(lines) + "\n")
    phones = virtual_phones(count=1, profiles=["adreno-sd865"])
    results = tmp_path / "results"
    # two runs of 5-30 s each on an idle host; minutes on a loaded one
    done = run_farm(phones.adb_port, results, "run", str(path), "--no-live", "--json", timeout_s=600)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = _runs(results, "llm_energy")
    assert len(runs) == 2 and all(run.state is RunState.DONE for run in runs)
    stored = {"prefill" if r.factors["gen"] == 0 else "decode": _metrics(results, r.run_id) for r in runs}
    readings = {phase: got.get("power_readings") for phase, got in stored.items()}
    assert all(n is not None and n >= 3 for n in readings.values()), readings
    for phase, got in stored.items():
        assert got["charging_disabled"] == 1.0 and got["energy_valid"] == 1.0, (phase, got)
        # recomputed from the stored window's power and the phase's measured time and tokens
        net_mw = got["power_mean_mw"] - got["power_idle_mw"]
        expected = net_mw * got[f"llm_{phase}_measured_ms"] / 1e3 / got[f"llm_{phase}_tokens"]
        assert got[f"energy_per_{phase}_token_mj"] == pytest.approx(expected, rel=1e-9)
