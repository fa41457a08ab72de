"""procscan tells PoCL's worker threads from a process's other threads: a program that loads
OpenCL and then computes on its own CPU threads (llama-bench's CPU backend, built with its OpenCL
backend) keeps the "GPU" idle. Independent truth: the threads that appeared while the process
called clGetDeviceIDs (PoCL creates its pthread device's workers there), as the process itself
reports them, and its spinning thread, which it names."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from vphone.procscan import ProcScanner, pocl_ranges, waits_in

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(ctypes.util.find_library("OpenCL") is None, reason="needs an OpenCL ICD loader"),
]

# Prints: its pid, the tids created by clGetDeviceIDs, then the tid of a thread that spins on
# the CPU for as long as the process lives.
PROGRAM = r"""
import ctypes, os, threading, time
def tasks():
    return {int(t) for t in os.listdir("/proc/self/task")}
cl = ctypes.CDLL("libOpenCL.so.1")
count = ctypes.c_uint()
platforms = (ctypes.c_void_p * 4)()
assert cl.clGetPlatformIDs(4, platforms, ctypes.byref(count)) == 0 and count.value >= 1
before = tasks()
devices = (ctypes.c_void_p * 4)()
assert cl.clGetDeviceIDs(ctypes.c_void_p(platforms[0]), ctypes.c_ulonglong(0xFFFFFFFF), 4, devices,
                         ctypes.byref(count)) == 0
workers = sorted(tasks() - before)
spinner = []
def spin():
    spinner.append(threading.get_native_id())
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
while not spinner:
    time.sleep(0.001)
print(os.getpid(), ",".join(map(str, workers)), spinner[0], flush=True)
time.sleep(120)
"""


@pytest.fixture
def opencl_process() -> Iterator[tuple[int, set[int], int]]:
    """(pid, the workers clGetDeviceIDs created, the spinning thread) of a running process."""
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pid, workers, spinner = proc.stdout.readline().split()
        yield int(pid), {int(t) for t in workers.split(",")}, int(spinner)
    finally:
        proc.kill()
        proc.wait()


def _on_cpu_ns(pid: int, tid: int) -> int:
    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


def _scan_until(scanner: ProcScanner, done, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    scanner.scan(time.monotonic(), 0)
    while True:
        time.sleep(0.1)
        sample = scanner.scan(time.monotonic(), 0)
        if done(sample) or time.monotonic() > deadline:
            return sample


def test_workers_are_found_by_where_they_wait_and_cpu_threads_are_not_gpu(
    opencl_process: tuple[int, set[int], int],
) -> None:
    pid, workers, spinner = opencl_process
    assert workers and spinner not in workers
    scanner = ProcScanner(os.readlink(f"/proc/{pid}/ns/pid"), candidates=lambda: [pid])
    sample = _scan_until(scanner, lambda s: set(s.pocl_tids) >= workers)
    assert set(sample.pocl_tids) == workers  # the spinner and the main thread are not "GPU"
    # Over a further second the spinner's CPU time (its own schedstat) is CPU time, and the
    # idle workers' "GPU" time is a small part of it (before: all of it was "GPU").
    spun_before = _on_cpu_ns(pid, spinner)
    time.sleep(1.0)
    sample = scanner.scan(time.monotonic(), 0)
    spun = _on_cpu_ns(pid, spinner) - spun_before
    assert spun > 0.05e9
    assert sample.other_ns >= 0.9 * spun, (sample, spun)
    assert sample.pocl_ns < 0.05 * spun, (sample, spun)


def test_wait_address_parsing() -> None:
    maps = (
        "7f00000000-7f00010000 r-xp 00002000 fe:00 1 /usr/lib/pocl/libpocl-devices-pthread.so\n"
        "7f00010000-7f00012000 rw-p 00005000 fe:00 1 /usr/lib/pocl/libpocl-devices-pthread.so\n"
        "7f10000000-7f10001000 rw-p 00000000 00:00 0 \n"
        "7f20000000-7f20001000 r-xp 00000000 fe:00 2 /usr/lib/x86_64-linux-gnu/libgomp.so.1\n"
    )
    ranges = pocl_ranges(maps)
    assert ranges == ((0x7F00000000, 0x7F00010000), (0x7F00010000, 0x7F00012000))
    assert waits_in("202 0x7f00010128 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd 0x7fd9", ranges)
    assert not waits_in("202 0x7f10000128 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd 0x7fd9", ranges)  # heap
    assert not waits_in("230 0x7f00010128 0x1 0x0 0x0 0x0 0x0 0x7ffd 0x7fd9", ranges)  # not futex
    assert not waits_in("running", ranges)
    assert not waits_in("-1 0x7ffd 0x7fd9", ranges)
