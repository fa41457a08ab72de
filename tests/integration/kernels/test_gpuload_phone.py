"""gpuload on a virtual phone, through the real adb server: it holds 30/50/70/90% within +-5
percentage points as read from the phone's own busy counter (kgsl gpubusy), averaged over 5 s,
after settling in <= 2 s.

The phone's counter is its physics: CPU time (and runqueue wait) of PoCL worker threads over
~1 s windows, so the average is taken over the windows that start after the 2 s of settling.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PHONE_BIN = "/data/local/tmp/farm/bin"
PHONE_CACHE = "/data/local/tmp/farm/cache"
GPUBUSY = "/sys/class/kgsl/kgsl-3d0/gpubusy"
SETTLE_S = 2.0
HOLD_S = 5.0
WINDOW_S = 1.0  # the counter publishes 1 s windows
SAMPLE_EVERY_S = 0.25


def read_counter(adb, serial: str) -> float:
    busy, total = (int(x) for x in adb("-s", serial, "shell", f"cat {GPUBUSY}").stdout.split())
    return busy / total if total else 0.0


TARGETS = (0.3, 0.5, 0.7, 0.9)


def hold(adb, adb_port: int, serial: str, target: float) -> float:
    """Runs gpuload at `target` on the phone; the counter's mean over the 5 s after settling."""
    proc = subprocess.Popen(
        ["adb", "-P", str(adb_port), "-s", serial, "shell",
         f"echo $$; exec {PHONE_BIN}/gpuload --target={target} --busy-path={GPUBUSY} "
         f"--cl-cache={PHONE_CACHE} --period-ms=500"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        assert '"mode":"closed-loop"' in proc.stdout.readline()  # info: running now
        started = time.monotonic()
        samples = []
        while (elapsed := time.monotonic() - started) < SETTLE_S + WINDOW_S + HOLD_S:
            if elapsed >= SETTLE_S + WINDOW_S:  # windows that began after settling
                samples.append(read_counter(adb, serial))
            time.sleep(SAMPLE_EVERY_S)
        adb("-s", serial, "shell", f"kill -TERM {pid}")
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert '"stopped_by":"signal"' in out
    return statistics.mean(samples)


@pytest.mark.serial  # holds busy targets within 5 points: needs the host's cores
@pytest.mark.slow
def test_gpuload_holds_targets_on_the_phones_busy_counter(virtual_phones, adb_server, kernel_build):
    phones = virtual_phones(count=1, profiles=["adreno-sd8gen2"])
    serial = phones[0].adb_serial
    binary: Path = kernel_build("gpuload")
    adb = adb_server.adb
    assert adb("-s", serial, "shell", f"mkdir -p {PHONE_BIN} {PHONE_CACHE}").returncode == 0
    assert adb("-s", serial, "push", str(binary), f"{PHONE_BIN}/gpuload").returncode == 0
    assert adb("-s", serial, "shell", f"chmod 755 {PHONE_BIN}/gpuload").returncode == 0
    # Build the OpenCL program once so the timed runs start from the phone's binary cache.
    warm = adb(
        "-s", serial, "shell", f"{PHONE_BIN}/gpuload --target=0 --duration-s=0.1 --cl-cache={PHONE_CACHE}"
    )
    assert warm.returncode == 0, warm.stderr
    held = {}
    for target in TARGETS:
        held[target] = hold(adb, adb_server.port, serial, target)
        time.sleep(WINDOW_S)  # let the counter's window forget this run
    off = {t: round(m, 3) for t, m in held.items() if abs(m - t) > 0.05}
    assert not off, f"counter means off target by more than 5 points: {off} (all: {held})"
