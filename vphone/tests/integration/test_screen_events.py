"""A key that wakes or sleeps the screen is in force when its command returns (PowerManagerService
wakes the display before `input keyevent` exits), so the screen's power and the ground-truth log
follow at once, not at the next ~1 s state tick: a run that switches charging off right after
its wake-up key measured a phone whose truth still said "screen off" (test_discharge_proof).

Through Debian's adb client and the phone's own toybox `input`.
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from vphone.groundtruth import read_ground_truth
from vphone.testing.phones import PhoneFactory, VirtualPhone
from vphone.testing.waiting import eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
]


def _shell(phone: VirtualPhone, port: int, command: str) -> None:
    argv = ["adb", "-P", str(port), "-s", phone.adb_serial, "shell", command]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result


def _first_row_after(phone: VirtualPhone, t_ns: int) -> bool:
    """The screen in the first ground-truth row the physics wrote after `t_ns` (waits for it)."""

    def later() -> list[bool]:
        return [r.screen_on for r in read_ground_truth(phone.ground_truth) if r.t_ns > t_ns]

    assert eventually(lambda: bool(later()), timeout_s=20), "no ground-truth row after the key"
    return later()[0]


def test_the_screen_follows_each_key_in_the_next_tick(module_virtual_phones: PhoneFactory) -> None:
    phones = module_virtual_phones(count=1, profiles=["adreno-sd865"])
    phone, port = phones[0], phones.adb_port
    # Four toggles: a state tick (~1 s) falling between a key and the next row lets one pass by
    # luck (p ~ 0.1 each), not four.
    for key, on in (("KEYCODE_SLEEP", False), ("KEYCODE_WAKEUP", True)) * 2:
        _shell(phone, port, f"input keyevent {key}")
        assert _first_row_after(phone, time.monotonic_ns()) is on, key
