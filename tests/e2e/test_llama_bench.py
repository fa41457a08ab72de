"""llama.cpp's llama-bench (kernels/llama) on a virtual phone with the smallest generated model:
prefill and decode runs whose metrics are recomputed here from the raw samples in their run
folders, a model that fails to load and a run killed by SIGKILL (what the out-of-memory killer
sends) failing their runs with the reason, a missing model file refused in one line, a cold start
proven by the page counts with a second, warm load, and the study's energy runs long enough for
the fuel gauge to keep energy per token of each phase."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from farm.experiment.files import load as load_experiment
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


def test_a_cold_start_drops_the_model_and_its_second_load_is_warm(virtual_phones, tmp_path: Path) -> None:
    """benchmark.cold_files: farm-pagecache drops the model's pages just before llama-bench starts
    and counts them (mincore) before and after the drop and after the run; the model named twice
    (`-m F -m /.F`) is loaded twice. Judged on the page counts, never on the times: none of the
    file in the page cache after the drop, all of it once the program had loaded it, and the two
    load times are llama.cpp's own for the first and the second load."""
    lines = [
        "benchmark:",
        "  program: external",
        f"  binary: {{x86_64: {BENCH}}}",
        '  args: [-m, "{model}", -m, "/.{model}", -o, jsonl, -v, -r, "3", -t, "2", -ngl, "0",',
        '         -p, "{prompt}", -n, "0", -pg, "{prompt},1", --poll, "0"]',
        f"  assets: [{MODEL}]",
        '  cold_files: ["{model}"]',
        "  output: llama_bench",
        f"sweep: {{model: [{MODEL}], prompt: [32]}}",
        "measurement: {repetitions: 1}",
        "telemetry: {idle_baseline_s: 0}",
        "conditions: {cooldown: {max_temp_c: 90, timeout_s: 30}, min_battery_pct: 5}",
        "timeouts: {run_timeout_s: 120}",
    ]
    path = write_experiment(tmp_path, "llm_cold", "\n".join(lines) + "\n")
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    done = run_farm(phones.adb_port, results, "run", str(path), "--no-live", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = _runs(results, "llm_cold")
    assert run.state is RunState.DONE, run.reason
    (folder,) = results.glob(f"llm_cold/{run.run_id}*/")
    page_cache = json.loads((folder / "env.json").read_text())["page_cache"]
    pages = -(-MODEL.stat().st_size // 4096)  # the host's page size: the virtual phone's kernel
    (at_drop,) = page_cache["at_drop"]
    (at_end,) = page_cache["at_end"]
    assert at_drop["pages"] == pages and at_end["pages"] == pages, page_cache
    # Dropped: nothing of the model cached when llama-bench started; read whole by its load.
    assert at_drop["resident_after_drop"] == 0, page_cache
    assert at_end["resident"] == pages, page_cache
    assert page_cache["cold"] is True and page_cache["not_cold_because"] is None
    got = _metrics(results, run.run_id)
    assert got["cold_start_valid"] == 1.0 and got["cold_resident_after_drop_pct"] == 0.0
    # llama.cpp's load times, one per test: two tests per load (pp 32, pg 32,1)
    stderr = (folder / "stderr.txt").read_text()
    loads = [float(line.split("=")[1].split("ms")[0]) for line in stderr.splitlines() if "load time" in line]
    stdout = (folder / "stdout.jsonl").read_text()
    records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert [r["model_filename"].startswith("/./") for r in records] == [False, False, True, True]
    assert len(loads) == 4
    assert got["model_load_cold_ms"] == pytest.approx(loads[0]) == got["model_load_ms"]
    assert got["model_load_warm_ms"] == pytest.approx(loads[2])
    # both loads' repetitions pooled: 6 samples of the prompt
    rates = [32 / (ns / 1e9) for r in records if r["n_gen"] == 0 for ns in r["samples_ns"]]
    assert len(rates) == 6 and got["prefill_tokens_per_s"] == pytest.approx(statistics.median(rates))


def _energy_variant_reps(model: str) -> dict[int, int]:
    """experiments/llm_gpu_load.yaml's `energy` variant: repetitions per load of `model`'s rows,
    by gen (0: prefill, 16: decode)."""
    experiment = load_experiment(REPO / "experiments" / "llm_gpu_load.yaml", variant="energy")
    sweep = experiment.sweep
    rows = zip(sweep["model"], sweep["gen"], sweep["reps"], strict=True)
    return {int(gen): int(reps) for level, gen, reps in rows if str(level).endswith(model)}


def test_runs_long_enough_for_the_gauge_keep_energy_per_token_of_each_phase(
    virtual_phones, tmp_path: Path
) -> None:
    """adreno-sd865: charging can be stopped (input_suspend, root) and its gauge updates every
    second. The study's `energy` variant sizes each model's runs for three gauge updates (its
    repetitions per model and phase, the model loaded twice as the study does): on the smallest
    model each phase's run sees at least three updates, so its energy per token is kept. (Fewer
    repetitions fail: 300 decode repetitions of one load ended within two updates.)"""
    model = LLAMA / "models" / "tinyllama-s-f16.gguf"
    reps = _energy_variant_reps(model.name)
    lines = [
        "benchmark:",
        "  program: external",
        f"  binary: {{x86_64: {BENCH}}}",
        '  args: [-m, "{model}", -m, "/.{model}", -o, jsonl, -v, -r, "{reps}", -t, "2", -ngl, "0",',
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
