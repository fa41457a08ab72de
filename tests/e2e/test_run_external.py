"""External programs end to end (`program: external`): the shipped jsonl and regex examples on two
virtual phones, a second sweep that pushes nothing, bad output and a crash that fail their runs
with one reason while the sweep goes on, and a program with no binary for the phones' ABI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import adbutils
import pytest

from farm.store import RunState
from farm.store import events as store_events
from farm.store import runs as run_store
from tests.e2e.farm_cli import REPO, open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration

EXAMPLES = REPO / "kernels" / "examples" / "build" / "x86_64"


def _metrics(results: Path, experiment: str) -> dict[str, dict[str, float]]:
    with open_store(results) as store:
        return {
            run.run_id: {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}
            for run in run_store.list_runs(store, experiment)
        }


def _deploy_events(results: Path, experiment: str) -> list[str]:
    with open_store(results) as store:
        return [e.message for e in store_events.recent(store, experiment, 200) if e.kind == "deploy"]


def _phone_files(results: Path, experiment: str) -> set[str]:
    """The binary and the asset each run used, from the argv its env.json recorded."""
    paths = set()
    for env in results.glob(f"{experiment}/*/env.json"):
        argv = json.loads(env.read_text())["argv"]
        paths.add(next(a for a in argv if "/farm/bin/" in a))
        paths |= {a.split("=", 1)[1] for a in argv if "/farm/assets/" in a}
    return paths


def _mtimes(client: adbutils.AdbClient, serial: str, paths: set[str]) -> dict[str, str]:
    device = client.device(serial=serial)
    return {path: str(device.shell(["stat", "-c", "%Y %s", path])).strip() for path in sorted(paths)}


def test_external_programs_on_two_phones(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=2)
    results = tmp_path / "results"
    example = str(REPO / "experiments" / "external_example.yaml")
    key = "external_example.quick"

    first = run_farm(phones.adb_port, results, "run", example, "--variant", "quick", "--no-live", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads(first.stdout)["done"] == 2
    for values in _metrics(results, key).values():
        assert values["latency_per_iteration"] == 1.0 and values["iterations_measured"] == 20
        assert 0 < values["latency_median_ms"] < 1000
    pushed = _deploy_events(results, key)
    assert len(pushed) == 2 and all(
        "example-matmul" in m and "asset data/example_seed.txt" in m for m in pushed
    )
    files = _phone_files(results, key)
    assert len(files) == 2 and any(
        re.search(r"/farm/assets/[0-9a-f]{16}/example_seed.txt$", f) for f in files
    )
    client = phones.client()
    before = {p.serial: _mtimes(client, p.adb_serial, files) for p in phones}
    assert all(re.fullmatch(r"\d+ \d+", stamp) for stamps in before.values() for stamp in stamps.values())

    again = run_farm(
        phones.adb_port, results, "run", example, "--variant", "quick", "--fresh", "--no-live", "--json"
    )
    assert again.returncode == 0, again.stdout + again.stderr
    # --fresh forgets the first sweep's runs and events: these are the second sweep's.
    assert _deploy_events(results, key)[-2:] == ["nothing pushed (the phone has every sha256)"] * 2
    assert {p.serial: _mtimes(client, p.adb_serial, files) for p in phones} == before

    textbench = str(REPO / "experiments" / "external_textbench.yaml")
    regex = run_farm(phones.adb_port, results, "run", textbench, "--variant", "quick", "--no-live", "--json")
    assert regex.returncode == 0, regex.stdout + regex.stderr
    for values in _metrics(results, "external_textbench.quick").values():
        assert values["latency_per_iteration"] == 1.0 and values["iterations_measured"] == 20
        assert values["latency_median_ms"] >= 2.0  # it spins 2000 us per iteration
        assert values["rss_program_peak_kb"] > 0  # what the program printed
        assert values["rss_peak_mb"] > 0  # its memory samples: the telemetry window


def test_bad_output_and_crash_fail_their_runs_and_a_phone_without_its_abi_is_skipped(
    virtual_phones, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    bench = EXAMPLES / "example-textbench"
    bad = write_experiment(
        tmp_path,
        "bad_output",
        f"""\
        benchmark:
          program: external
          binary: {{x86_64: {bench}}}
          args: ["--iters=5", "--work-us=1000", "{{mode}}"]
          output:
            adapter: regex
            patterns: ['^iter \\d+: (?P<ms>[0-9.]+) ms$']
            metrics: {{ms: {{name: latency, unit: ms}}}}
            latency: ms
        sweep:
          mode: [--format=text, --format=tflite, --fail-after=2]
        measurement: {{repetitions: 1}}
        telemetry: {{idle_baseline_s: 0}}
        retries: {{on: [timeout, lost, error]}}
        """,
    )
    done = run_farm(phones.adb_port, results, "run", str(bad), "--no-live", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    with open_store(results) as store:
        runs = {run.factors["mode"]: run for run in run_store.list_runs(store, "bad_output")}
    assert runs["--format=text"].state is RunState.DONE
    no_match, crash = runs["--format=tflite"], runs["--fail-after=2"]
    assert no_match.state is RunState.FAILED and no_match.attempts == 1
    assert no_match.reason is not None and "regex output: no metric matched" in no_match.reason
    assert crash.state is RunState.FAILED and crash.attempts == 1
    assert crash.reason is not None and crash.reason.startswith("example-textbench exited 5: stderr ends:")

    arm_only = write_experiment(
        tmp_path,
        "arm_only",
        f"""\
        benchmark:
          program: external
          binary: {{arm64-v8a: {REPO / "kernels" / "examples" / "build" / "arm64-v8a" / "example-textbench"}}}
          args: ["--iters=3"]
          output:
            {{adapter: regex, patterns: ['^iter (?P<ms>[0-9.]+)'], metrics: {{ms: {{name: t, unit: ms}}}}}}
        measurement: {{repetitions: 1}}
        """,
    )
    skipped = run_farm(phones.adb_port, results, "run", str(arm_only), "--no-live")
    assert skipped.returncode != 0
    lines = [
        line for line in (skipped.stdout + skipped.stderr).splitlines() if "no binary for its ABI" in line
    ]
    assert lines and all("x86_64" in line and "arm64-v8a" in line for line in lines)
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "arm_only")
    assert (
        run.state is RunState.SKIPPED
        and run.reason is not None
        and "no binary for its ABI x86_64" in run.reason
    )
