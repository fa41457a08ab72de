"""Every read of a node whose value changes by itself is a snapshot of one value, as sysfs's is
(kernfs fills a page with show() at a read at offset 0 and continues from it), on every path the
phone's processes read by: the shell's cat, an agent that keeps the node open and re-reads it
with pread at offset 0 (farm-sampler), and adb pull's open through the sync file service.

Deterministic, no race: the daemon's writer is HELD between its two steps (pwrite of the new
text, then ftruncate to its length) by wrapping os.ftruncate for the one write that shrinks
policy0's scaling_cur_freq (1804800 -> 300000 kHz), and the reads are made while it is held. On
plain files (the old code) every one of them reads "300000\\n\\n": the new digits, then the old
value's last byte, as CI once saw time_in_state with an empty line in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from vphone.profiles import load_profile
from vphone.testing.socphone import phone, read, su, wait_until
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
    pytest.mark.skipif(not os.access("/dev/fuse", os.R_OK | os.W_OK), reason="needs /dev/fuse"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting FUSE needs root"),
]
POLICY = "/sys/devices/system/cpu/cpufreq/policy0"
NODE = f"{POLICY}/scaling_cur_freq"
TOP_KHZ, MIN_KHZ = "1804800", "300000"  # adreno-sd865 policy0's table ends
HOLD_TIMEOUT_S = 60.0


class HeldWrite:
    """Wraps os.ftruncate: the first call that shrinks `host_path` waits until `release()`."""

    def __init__(self, host_path: Path, real: Callable[[int, int], None]) -> None:
        self.host_path = str(host_path)
        self.real = real
        self.held = threading.Event()
        self._go = threading.Event()

    def ftruncate(self, fd: int, length: int) -> None:
        if (
            not self.held.is_set()
            and os.readlink(f"/proc/self/fd/{fd}") == self.host_path
            and os.fstat(fd).st_size > length
        ):
            self.held.set()
            self._go.wait(HOLD_TIMEOUT_S)
        self.real(fd, length)

    def release(self) -> None:
        self._go.set()


@pytest.fixture
def rooted(tmp_path: Path) -> Iterator[WorldThread]:
    with phone(load_profile("adreno-sd865"), "VPSNAP01", tmp_path) as w:
        yield w


def _cat(w: WorldThread, path: str) -> str:
    """The shell's cat, without the world loop (which the held writer may be blocking)."""
    done = subprocess.run(
        w.world.shell_argv(f"cat {path}"),
        env=w.world.shell_env(None),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_read_while_the_writer_is_between_its_steps_sees_one_whole_value(
    rooted: WorldThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = rooted
    assert su(w, f"echo {TOP_KHZ} > {POLICY}/scaling_min_freq").returncode == 0
    wait_until(lambda: read(w, NODE) == f"{TOP_KHZ}\n", "policy0 to run at its top clock")
    host_path = Path(os.path.realpath(w.world.physics.files.root / NODE.removeprefix("/sys/")))
    files = w.call(w.world.open_files())  # adb pull's way in
    kept = files.open_read(NODE)  # an agent's: opened once, re-read at offset 0
    hold = HeldWrite(host_path, os.ftruncate)
    monkeypatch.setattr(os, "ftruncate", hold.ftruncate)
    # The write that lets the clock fall runs in the phone's root shell; it returns once the
    # daemon has taken it, which may be after the held write: so it runs beside the reads.
    pin = f"echo {MIN_KHZ} > {POLICY}/scaling_min_freq; echo {MIN_KHZ} > {POLICY}/scaling_max_freq"
    lower = subprocess.Popen(
        w.world.shell_argv(f"su -c '{pin}'"),
        env=w.world.shell_env(None),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert hold.held.wait(HOLD_TIMEOUT_S), "the daemon never shrank scaling_cur_freq"
        whole = {f"{TOP_KHZ}\n", f"{MIN_KHZ}\n"}
        seen = {
            "shell cat": _cat(w, NODE),
            "pread at 0 of a kept descriptor": os.pread(kept, 4096, 0).decode(),
        }
        pulled = files.open_read(NODE)
        try:
            seen["adb pull's open"] = os.read(pulled, 4096).decode()
        finally:
            os.close(pulled)
        torn = {how: text for how, text in seen.items() if text not in whole}
        assert not torn, f"reads mixing two values while the writer was held: {torn}"
    finally:
        hold.release()
        monkeypatch.undo()
        _, err = lower.communicate(timeout=HOLD_TIMEOUT_S)
    try:
        assert lower.returncode == 0, err
        # The kept descriptor sees the new value at its next read at offset 0, as sysfs regenerates.
        new = f"{MIN_KHZ}\n".encode()
        wait_until(lambda: os.pread(kept, 4096, 0) == new, "the kept descriptor to show the fall")
    finally:
        os.close(kept)
        files.close()
