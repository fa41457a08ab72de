"""`farm run` bounds what a phone returns (issue 27): a benchmark whose stdout is a large sparse
file (free on the phone) fails its run with one line and leaves the file on the phone, and a
command line longer than an adb request fails its own run while the phone goes on with the next;
neither costs the phone its place in the sweep."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from farm.engine import planner
from farm.experiment import load
from farm.store import RunState
from farm.store import devices as device_store
from farm.store import runs as run_store
from tests.e2e.farm_cli import open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "big_stdout.c"
C_FLAGS = ("-std=c11", "-Wall", "-Wextra", "-Werror", "-O1")


@pytest.fixture(scope="module")
def big_stdout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bigout") / "big-stdout"
    subprocess.run(["gcc", *C_FLAGS, "-o", str(out), str(SOURCE)], check=True)
    return out


def _experiment(tmp_path: Path, binary: Path, sweep: str, limits: str = "") -> Path:
    return write_experiment(
        tmp_path,
        "bounds",
        f"""\
        benchmark:
          program: external
          binary: {{x86_64: {binary}}}
          args: ["{{arg}}"]
          output: jsonl
        sweep: {{arg: {sweep}}}
        measurement: {{warmup: 0, iterations: 3, min_seconds: 0, max_seconds: 10, repetitions: 1}}
        telemetry: {{idle_baseline_s: 0, power: none, disable_charging: false}}
        conditions: {{cooldown: {{max_temp_c: 90, timeout_s: 5}}, min_battery_pct: 1}}
        retries: {{max_attempts: 2, on: [timeout, lost, error]}}
        {limits}
        """,
    )


def _runs(results: Path) -> dict[str, run_store.StoredRun]:
    with open_store(results) as store:
        return {str(run.factors["arg"])[:16]: run for run in run_store.list_runs(store, "bounds")}


def test_a_run_whose_stdout_is_over_the_limit_fails_and_brings_nothing_giant_back(
    virtual_phones, big_stdout: Path, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    sweep = f"[--bytes=1000, --bytes={64 << 20}]"
    path = _experiment(tmp_path, big_stdout, sweep, "limits: {run_file_mb: 1}")
    run = run_farm(phones.adb_port, results, "run", str(path), "--no-live", "--json")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    runs = _runs(results)
    small, big = runs["--bytes=1000"], runs[f"--bytes={64 << 20}"]
    assert small.state is RunState.DONE
    assert big.state is RunState.FAILED and big.attempts == 1  # the same file would come back
    assert big.reason is not None
    assert f"bench.out is {64 << 20} bytes, over the {1 << 20} bytes a run's file may be" in big.reason
    assert "limits.run_file_mb" in big.reason
    written = sum(f.stat().st_size for f in results.rglob("*") if f.is_file() and f.name != "farm.db")
    assert written < 1 << 20, sorted((f.stat().st_size, str(f)) for f in results.rglob("*"))
    assert json.loads(run.stdout)["done"] == 1


def test_a_command_line_no_adb_request_carries_fails_its_run_not_the_phone(
    virtual_phones, big_stdout: Path, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    huge = "--pad=" + "x" * 400_000
    path = _experiment(tmp_path, big_stdout, f"[--bytes=1000, {huge}, --bytes=2000]")
    run = run_farm(phones.adb_port, results, "run", str(path), "--no-live")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    runs = _runs(results)
    assert runs["--bytes=1000"].state is RunState.DONE and runs["--bytes=2000"].state is RunState.DONE
    refused = runs[huge[:16]]
    assert refused.state is RunState.FAILED and refused.attempts == 1
    assert refused.reason is not None and "an adb request carries at most 65535" in refused.reason
    with open_store(results) as store:
        assert device_store.quarantines(store) == {}


def test_a_link_planted_at_a_run_folder_is_refused_and_nothing_is_written_through_it(
    virtual_phones, big_stdout: Path, tmp_path: Path
) -> None:
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    path = _experiment(tmp_path, big_stdout, "[--bytes=1000, --bytes=2000]")
    plan = planner.plan(load(path), [f"local/{phones[0].serial}"])
    planted, kept = plan.runs[0], plan.runs[1]  # the ids `farm run --dry-run` prints
    target = tmp_path / "elsewhere"
    target.mkdir()
    (results / "bounds").mkdir(parents=True)
    (results / "bounds" / planted.run_id).symlink_to(target)

    run = run_farm(phones.adb_port, results, "run", str(path), "--no-live")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert list(target.iterdir()) == []
    with open_store(results) as store:
        refused = run_store.get_run(store, planted.run_id)
        done = run_store.get_run(store, kept.run_id)
    assert refused is not None and refused.state is RunState.FAILED and refused.reason is not None
    assert refused.reason.startswith(f"{results / 'bounds' / planted.run_id}: a link; farm writes")
    assert done is not None and done.state is RunState.DONE
    assert (results / "bounds" / kept.run_id / "stdout.jsonl").is_file()


def test_a_plan_that_would_grow_the_store_past_its_limit_is_refused_before_it_writes(
    virtual_phones, big_stdout: Path, tmp_path: Path
) -> None:
    # 800 KB of experiment file: two 400 KB levels x 250 values = 500 runs, each row carrying its
    # 400 KB level (the audit's case grew the store to 202 MB).
    phones = virtual_phones(count=1)
    results = tmp_path / "results"
    levels = f"[{'a' * 400_000}, {'b' * 400_000}]"
    path = write_experiment(
        tmp_path,
        "huge_plan",
        f"""\
        benchmark:
          program: external
          binary: {{x86_64: {big_stdout}}}
          args: ["--pad={{pad}}", "--n={{n}}"]
          output: jsonl
        sweep: {{pad: {levels}, n: {list(range(250))}}}
        measurement: {{repetitions: 1}}
        """,
    )
    assert path.stat().st_size > 800_000
    for args in (["--dry-run"], []):
        run = run_farm(phones.adb_port, results, "run", str(path), "--no-live", *args)
        assert run.returncode == 2, run.stdout + run.stderr
        lines = [line for line in run.stderr.splitlines() if line.startswith("farm: ")]
        assert lines[-1].startswith(f"farm: {path}: the plan's 500 runs would add 20"), run.stderr
        assert "over limits.plan_store_mb (64)" in lines[-1] and "Traceback" not in run.stderr
    with open_store(results) as store:
        assert run_store.list_runs(store, "huge_plan") == []
    assert (results / "farm.db").stat().st_size < 1 << 20
