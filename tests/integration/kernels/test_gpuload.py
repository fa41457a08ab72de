"""The `gpuload` program on this host: open loop on its own duty, closed loop on a test-owned busy
counter file, prompt exit on SIGTERM.

The closed-loop test writes the counter the way a virtual phone does: time the program's worker
threads (PoCL runs the kernels on them) spent running or runnable, per unit of wall time, over a
sliding ~1 s window refreshed 20x/s, in kgsl `gpubusy` "busy total" format. Counting runnable time
keeps the target reachable when other work shares the host's cores.
"""

from __future__ import annotations

import contextlib
import json
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

COUNTER_WINDOW_S = 1.0
COUNTER_RATE_HZ = 20


def worker_busy_ns(pid: int) -> int:
    """Running + runnable ns of every thread but the main one (/proc/PID/task/TID/schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        if task.name == str(pid):
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):  # thread exited meanwhile
            run_ns, wait_ns = (task / "schedstat").read_text().split()[:2]
            total += int(run_ns) + int(wait_ns)
    return total


class ProcessBusyCounter:
    """Writes "busy total" (ns over the last window) for one process, like a virtual phone's kgsl."""

    def __init__(self, path: Path, pid: int) -> None:
        self.path = path
        self.pid = pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.readings: list[tuple[float, float]] = []  # (monotonic s, utilisation)

    def __enter__(self) -> ProcessBusyCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        history: list[tuple[int, int]] = []
        while not self._stop.wait(1.0 / COUNTER_RATE_HZ):
            try:
                now_ns, busy_ns = time.monotonic_ns(), worker_busy_ns(self.pid)
            except OSError:
                return
            history.append((now_ns, busy_ns))
            while history and now_ns - history[0][0] > COUNTER_WINDOW_S * 1e9:
                history.pop(0)
            t0, b0 = history[0]
            total = now_ns - t0  # one "GPU core", as the virtual phones' profiles
            busy = min(busy_ns - b0, total)
            if total <= 0:
                continue
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(f"{busy} {total}\n")
            tmp.replace(self.path)
            self.readings.append((now_ns / 1e9, busy / total))


def start(program, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(program.path), f"--cl-cache={program.cache_dir}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=program.env,
    )


def events_of(stdout: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, stdout.splitlines()) if e["event"] == kind]


def test_open_loop_holds_its_own_duty_without_a_counter(kernel_program, tmp_path):
    program = kernel_program("gpuload")
    missing = tmp_path / "no-such-counter"
    run = program.run(
        "--target=0.4", f"--busy-path={missing}", "--duration-s=2.5", "--period-ms=250", timeout_s=30
    )
    assert run.returncode == 0, run.stderr
    info = run.of("info")[0]
    assert info["mode"] == "open-loop" and info["target"] == 0.4
    loads = run.of("load")
    assert len(loads) >= 6
    assert all(e["source"] == "own-duty" and e["counter"] is None for e in loads)
    settled = [e["achieved"] for e in loads[2:]]
    assert statistics.mean(settled) == pytest.approx(0.4, abs=0.05)
    assert run.one("result")["stopped_by"] == "duration"


@pytest.mark.parametrize(("counter_text", "direction"), [("90 %\n", "down"), ("0 1000\n", "up")])
def test_closed_loop_moves_the_duty_against_the_counter(kernel_program, tmp_path, counter_text, direction):
    counter = tmp_path / "gpubusy"
    counter.write_text(counter_text)
    run = kernel_program("gpuload").run(
        "--target=0.5", f"--busy-path={counter}", "--duration-s=2.5", "--period-ms=250", timeout_s=30
    )
    assert run.returncode == 0, run.stderr
    assert run.of("info")[0]["mode"] == "closed-loop"
    loads = run.of("load")
    assert all(e["source"] == "busy-counter" for e in loads)
    assert loads[0]["counter"] == pytest.approx(0.9 if direction == "down" else 0.0)
    duties = [e["duty_cmd"] for e in loads]
    if direction == "down":
        assert duties[-1] < 0.2 and duties[-1] < duties[0]
    else:
        assert duties[-1] > 0.8 and duties[-1] > duties[0]


@pytest.mark.serial  # holds a busy target within 5 points of its own CPU time: needs the host's cores
def test_closed_loop_holds_target_on_a_cpu_time_counter(kernel_program, tmp_path):
    program = kernel_program("gpuload")
    counter = tmp_path / "gpubusy"
    counter.write_text("0 1\n")
    target = 0.4
    proc = start(program, f"--target={target}", f"--busy-path={counter}", "--period-ms=250")
    try:
        with ProcessBusyCounter(counter, proc.pid) as busy:
            time.sleep(5.0)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert events_of(out, "info")[0]["mode"] == "closed-loop"
    t_start = busy.readings[0][0]
    # Settled within 2 s: average the counter (what the phone would report) over the rest.
    settled = [u for t, u in busy.readings if t - t_start >= 2.0 + COUNTER_WINDOW_S]
    assert len(settled) >= 20
    assert statistics.mean(settled) == pytest.approx(target, abs=0.05)


def _events_until(proc: subprocess.Popen[str], done: Any, timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Read the program's JSON lines as they come until `done(event)` (a generous deadline)."""
    assert proc.stdout is not None
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, f"the program ended before the expected event: {seen}"
        seen.append(json.loads(line))
        if done(seen[-1]):
            return seen
    raise AssertionError(f"no expected event within {timeout_s:g} s: {seen}")


def test_sigterm_stops_it_with_a_result(kernel_program):
    """A signal ends the run at once (not at the end of --duration-s) with its result. How fast is
    a speed goal: `make bench` measures it (tests/bench/bench_gpuload_stop.py, 0.1 s contract)."""
    program = kernel_program("gpuload")
    for target in ("1.0", "0.5", "0.0"):
        proc = start(program, f"--target={target}", "--period-ms=100", "--duration-s=600")
        _events_until(proc, lambda event: event["event"] == "load")  # running: a period went by
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)  # far less than the 600 s it was asked to run
        assert proc.returncode == 0, err
        (result,) = events_of(rest, "result")
        assert result["stopped_by"] == "signal" and result["duration_s"] < 600


def test_memory_intensity_runs(kernel_program):
    run = kernel_program("gpuload").run(
        "--target=0.3", "--intensity=memory", "--duration-s=1", "--period-ms=250"
    )
    assert run.returncode == 0, run.stderr
    assert run.of("info")[0]["intensity"] == "memory"
    assert sum(e["kernels"] for e in run.of("load")) > 0


@pytest.mark.parametrize("bad", ["--target=1.5", "--intensity=heavy", "--period-ms=0"])
def test_bad_arguments_exit_2(kernel_program, bad):
    run = kernel_program("gpuload").run(bad)
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1


def test_counter_vanishing_mid_run_falls_back_to_open_loop(kernel_program, tmp_path):
    counter = tmp_path / "gpubusy"
    counter.write_text("50 %\n")
    proc = start(
        kernel_program("gpuload"),
        "--target=0.3",
        f"--busy-path={counter}",
        "--duration-s=600",
        "--period-ms=200",
    )
    try:
        # each step waits for the program's own events, not a sleep racing PoCL's start-up
        before = _events_until(proc, lambda e: e["event"] == "load" and e["source"] == "busy-counter")
        counter.unlink()
        after = _events_until(proc, lambda e: e["event"] == "load" and e["source"] == "own-duty")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    events = before + after + [json.loads(line) for line in out.splitlines()]
    infos = [e for e in events if e["event"] == "info"]
    assert infos[0]["mode"] == "closed-loop"
    assert infos[-1]["mode"] == "open-loop" and "unreadable" in infos[-1]["reason"]
    loads = [e for e in events if e["event"] == "load"]
    assert loads[0]["source"] == "busy-counter" and loads[-1]["source"] == "own-duty"
