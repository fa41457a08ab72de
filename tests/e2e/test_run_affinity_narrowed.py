"""A taskset pin the kernel narrows, through `farm run` (issue 28): the phone's init puts adbd's
shells in /dev/cpuset/foreground (ro.cpuset.default, AOSP system/core/init/README.md) and the
lab's tuning left that cpuset without CPUs 0-1, so `taskset f` (the little cores) runs on 2-3 and
succeeds. farm reads the mask back: env.json records the mask asked and in force and the
benchmark's cgroups, the run is flagged (valid_affinity_as_requested = 0) with a note, and the
report's data-quality notes say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration

PROFILE = Path(__file__).resolve().parents[2] / "vphone" / "src" / "vphone" / "profiles" / "adreno-sd865.yaml"


def _foreground_profile(tmp_path: Path) -> str:
    """adreno-sd865 (little 0-3, big 4-6, prime 7) whose init starts services in foreground."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile["props"]["ro.cpuset.default"] = "/foreground"
    path = tmp_path / "adreno-sd865.yaml"
    path.write_text(yaml.safe_dump(profile))
    return str(path)


def _run_little(phones, tmp_path: Path, name: str) -> tuple[dict, dict[str, float]]:  # type: ignore[no-untyped-def]
    """One fast run pinned to the little cores: its env.json and metrics."""
    results = tmp_path / "results"
    spec = write_experiment(tmp_path, name, fast_lstm(extra="  clocks: {mode: none, affinity: little}\n"))
    done = run_farm(phones.adb_port, results, "run", str(spec), "--no-live")
    assert done.returncode == 0, done.stderr
    with open_store(results) as store:
        (run,) = run_store.list_runs(store, name)
        assert run.state is RunState.DONE
        env = json.loads((results / (run.artifacts_dir or "") / "env.json").read_text())
        return env, {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}


def test_a_narrowed_pin_is_read_back_recorded_and_flagged(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=[_foreground_profile(tmp_path)])
    device = phones[0].device(phones.client())
    assert device.shell("cat /proc/self/cgroup | grep -c foreground").strip() != "0"
    shrunk = device.shell2("su -c 'echo 2-7 > /dev/cpuset/foreground/cpus'", v2=True)
    assert shrunk.returncode == 0, shrunk
    env, metrics = _run_little(phones, tmp_path, "narrow")
    affinity = env["affinity"]
    assert affinity["requested"] == "f" and affinity["effective"] == "c" and affinity["narrowed"] is True
    assert affinity["comm"] == "sh" and affinity["cgroups"], affinity  # the gate, pinned, before the program
    assert any(line.endswith("/affinity-c") for line in affinity["cgroups"]), affinity  # where it ran
    note = "the kernel narrowed the benchmark's CPU mask f (CPUs 0-3) to c (CPUs 2-3)"
    assert any(n.startswith(note) for n in env["notes"]), env["notes"]
    assert metrics["valid_affinity_as_requested"] == 0.0 and metrics["valid"] == 0.0
    out = tmp_path / "report"
    report = run_farm(phones.adb_port, tmp_path / "results", "report", "narrow", "--out", str(out))
    assert report.returncode == 0, report.stderr
    text = "\n".join(p.read_text() for p in out.rglob("*.md"))
    assert note in text


def test_a_pin_the_cpuset_holds_is_as_requested(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-sd865"])
    env, metrics = _run_little(phones, tmp_path, "held")
    assert env["affinity"]["requested"] == env["affinity"]["effective"] == "f"
    assert env["affinity"]["narrowed"] is False
    assert metrics["valid_affinity_as_requested"] == 1.0
