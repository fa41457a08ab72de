"""Recovery on a real virtual phone: stale farm programs (and their wrappers) are killed, and
charging left off by a dead farm process is restored."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from farm.device.session import DeviceSession
from farm.engine.onphone import RunDir
from farm.engine.recovery import kill_stale_processes, restore_charging_marker
from farm.engine.runscript import gated_argv
from farm.store import Store
from farm.store import devices as device_store

pytestmark = pytest.mark.integration
NODE = "/sys/class/power_supply/battery/charging_enabled"  # adreno-nexus6p, rooted
# pids of the processes whose process group is $1
_GROUP = (
    'for p in /proc/[0-9]*; do [ "$(cut -d" " -f5 "$p/stat" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"; '
    "done; true"
)


def _wait_group_gone(session: DeviceSession, pgid: int, timeout_s: float = 30.0) -> None:
    """Until no process of the group exists any more (a killed process may linger a moment)."""
    deadline = time.monotonic() + timeout_s
    while (left := session.script(_GROUP, str(pgid)).stdout.split()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"still running in group {pgid}: {left}"


def test_stale_program_and_its_wrapper_are_killed_before_writing_an_exit_code(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    session = DeviceSession(phones[0].device(phones.client()), "local/x", default_timeout_s=20)
    # A real executable (the phone runs this machine's binaries), so argv[0] is its farm path as
    # for the benchmarks; a script's argv[0] would be its interpreter.
    sleeper = tmp_path / "sleeper"
    sleeper.write_bytes(Path(shutil.which("sleep") or "/bin/sleep").read_bytes())
    path, _ = session.push_cached(sleeper)
    session.shell(["mkdir", "-p", "/data/local/tmp/farm/runs/r"], check=True)
    exit_file = "/data/local/tmp/farm/runs/r/exit"
    pid = session.start(
        [path, "60"], workdir="/data/local/tmp/farm/runs/r", stdout="o", stderr="e", exit_file=exit_file
    )
    assert session.is_running(pid)  # a 60 s sleep
    assert kill_stale_processes(session)
    _wait_group_gone(session, pid)  # the wrapper (group leader) and everything in its group
    # nothing of that group is left that could still write it:
    assert session.read_text(exit_file) is None  # so it never wrote a stale exit code


def test_a_benchmark_wrapper_still_waiting_for_its_sampler_is_killed(virtual_phones) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    session = DeviceSession(phones[0].device(phones.client()), "local/x", default_timeout_s=20)
    run_dir = RunDir.of("gated")
    run_dir.create(session)
    argv = gated_argv(["sh", "-c", "echo started > started"], run_dir)
    pid = session.start(argv, workdir=run_dir.path, stdout="o", stderr="e", exit_file=run_dir.file("exit"))
    assert session.is_running(pid)  # waiting for a memory sampler that never comes (farm died)
    assert kill_stale_processes(session)
    _wait_group_gone(session, pid)
    # with its whole process group gone, no one is left to start the benchmark on the go
    session.script('touch "$1"', run_dir.file("bench.go"))
    assert session.read_text(run_dir.file("started")) is None  # the benchmark never ran


def test_a_farm_script_run_by_its_interpreter_is_killed(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # farm-run.sh runs as `sh BIN_DIR/<hash>/farm-run.sh ...`: argv[0] is the shell, not a farm path.
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    session = DeviceSession(phones[0].device(phones.client()), "local/x", default_timeout_s=20)
    script = tmp_path / "farm-run.sh"
    script.write_text("sleep 60\n")
    path, _ = session.push_cached(script)
    session.shell(["mkdir", "-p", "/data/local/tmp/farm/runs/s"], check=True)
    pid = session.start(
        ["sh", path], workdir="/data/local/tmp/farm/runs/s", stdout="o", stderr="e", exit_file="exit"
    )
    assert session.is_running(pid)
    assert kill_stale_processes(session)
    _wait_group_gone(session, pid)


def test_charging_marker_left_by_a_dead_farm_is_restored(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-nexus6p"])
    session = DeviceSession(phones[0].device(phones.client()), "local/x", default_timeout_s=20)
    assert session.shell(["su", "-c", f"echo 0 > {NODE}"]).ok  # as a crashed farm would leave it
    with Store(tmp_path / "farm.db") as store:
        device_store.mark_charging_disabled(store, "local/x", NODE, "1")
        assert restore_charging_marker(store, session, "local/x")
        assert device_store.charging_markers(store) == []
    assert (session.read_text(NODE) or "").strip() == "1"
