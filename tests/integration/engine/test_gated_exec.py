"""The benchmark's wrapper (farm.engine.runscript.gated_argv), run by a real shell: it waits for
the memory sampler, then execs the program in place, so the pid the sampler watches is the
program's from its first instruction."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from farm.engine.onphone import RunDir
from farm.engine.runscript import gated_argv


def test_the_benchmark_waits_for_its_memory_sampler_then_execs_in_place(tmp_path: Path) -> None:
    run_dir = RunDir(str(tmp_path))
    (tmp_path / "mem.bin").write_text("header\n")  # the sampler is watching
    argv = gated_argv(["sh", "-c", "echo $$"], run_dir)
    wrapper = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    out, _ = wrapper.communicate(timeout=10)
    assert int(out) == wrapper.pid  # the watched pid became the program


# The program reports when it runs (/proc/uptime) and when its process began (/proc/self/stat
# field 22, kept across exec): how long the wrapper held it back, measured by the kernel.
_REPORT_START = 'cut -d" " -f1 /proc/uptime; cut -d" " -f22 /proc/$$/stat'
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _held_back_s(out: str) -> float:
    uptime_s, started_ticks = out.split()
    return float(uptime_s) - int(started_ticks) / _TICKS_PER_S


def _uptime_s() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def test_without_a_sampler_the_benchmark_waits_its_bound_then_starts(tmp_path: Path) -> None:
    run_dir = RunDir(str(tmp_path))
    wrapper = subprocess.Popen(
        gated_argv(["sh", "-c", _REPORT_START], run_dir, wait_s=1.0), stdout=subprocess.PIPE, text=True
    )
    out, _ = wrapper.communicate(timeout=30)
    # 100 polls of at least 10 ms each: a loaded machine can only make it longer
    assert _held_back_s(out) >= 0.99, out


def test_without_a_sampler_the_benchmark_starts_on_the_hosts_go(tmp_path: Path) -> None:
    run_dir = RunDir(str(tmp_path))
    wrapper = subprocess.Popen(
        gated_argv(["sh", "-c", _REPORT_START], run_dir, wait_s=600.0), stdout=subprocess.PIPE, text=True
    )
    go_at_s = _uptime_s()
    (tmp_path / "bench.go").touch()
    out, _ = wrapper.communicate(timeout=30)  # far less than its 600 s bound: the go released it
    ran_at_s = float(out.split()[0])
    assert ran_at_s >= go_at_s - 0.01, (out, go_at_s)  # not before the go (uptime has 10 ms steps)
