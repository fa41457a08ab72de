"""The benchmark's wrapper (farm.engine.lifecycle.gated_argv), run by a real shell: it waits for
the memory sampler, then execs the program in place, so the pid the sampler watches is the
program's from its first instruction."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from farm.engine.lifecycle import gated_argv
from farm.engine.onphone import RunDir


def test_the_benchmark_waits_for_its_memory_sampler_then_execs_in_place(tmp_path: Path) -> None:
    run_dir = RunDir(str(tmp_path))
    (tmp_path / "mem.bin").write_text("header\n")  # the sampler is watching
    argv = gated_argv(["sh", "-c", "echo $$"], run_dir)
    wrapper = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    out, _ = wrapper.communicate(timeout=10)
    assert int(out) == wrapper.pid  # the watched pid became the program


def test_without_a_sampler_the_benchmark_starts_on_the_hosts_go(tmp_path: Path) -> None:
    run_dir = RunDir(str(tmp_path))
    wrapper = subprocess.Popen(gated_argv(["echo", "ran"], run_dir), stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    assert wrapper.poll() is None  # still waiting for mem.bin or go
    (tmp_path / "bench.go").touch()
    out, _ = wrapper.communicate(timeout=10)
    assert out.strip() == "ran"
