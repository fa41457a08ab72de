"""The charging switch is a kernel store, not a file (issue 28, finding 1 of
shared/reference/real-phone-audit.md): each write(2) is judged on its own, as
power_supply_store_property judges it with kstrtol. So toybox 0.8.9's `printf "%s\\n"` (Android
12-14: the value and the newline as two write(2)s) switches charging off and then fails on the
lone newline; the shell's echo writes once and succeeds; a lone newline changes nothing.

Through the Debian adb client and the phone's own mksh/toybox (`su -c`), as a tool would.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from vphone.testing.phones import PhoneFactory, VirtualPhone
from vphone.testing.waiting import eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
]
NODE = "/sys/class/power_supply/battery/input_suspend"  # the sd865 profile's switch


@dataclass(frozen=True)
class Adb:
    phone: VirtualPhone
    adb_port: int

    def su(self, command: str) -> subprocess.CompletedProcess[str]:
        quoted = "su -c '" + command.replace("'", "'\\''") + "'"
        argv = ["adb", "-P", str(self.adb_port), "-s", self.phone.adb_serial, "shell", quoted]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

    def read(self) -> str:
        result = self.su(f"cat {NODE}")
        assert result.returncode == 0, result
        return result.stdout.strip()


@pytest.fixture(scope="module")
def rooted(module_virtual_phones: PhoneFactory) -> Iterator[Adb]:
    phones = module_virtual_phones(count=1, profiles=["adreno-sd865"])
    log = (phones.state_dir / "daemon.log").read_text(encoding="utf-8", errors="replace")
    if "clock nodes served over FUSE" not in log:
        pytest.skip("FUSE is not usable here: the nodes are plain files (see daemon.log)")
    yield Adb(phones[0], phones.adb_port)


def test_printf_takes_the_value_then_fails_on_the_lone_newline(rooted: Adb) -> None:
    adb = rooted
    assert adb.read() == "0"
    result = adb.su(f'printf "%s\\n" 1 > {NODE}')
    assert result.returncode == 1 and "Invalid argument" in result.stderr, result
    assert adb.read() == "1"  # the first write(2) took: charging is off although printf failed
    assert adb.su(f"echo 0 > {NODE}").returncode == 0
    assert adb.read() == "0"


def test_a_lone_newline_or_a_word_is_refused_and_changes_nothing(rooted: Adb) -> None:
    adb = rooted
    assert adb.su(f"echo 1 > {NODE}").returncode == 0 and adb.read() == "1"
    for bad in ("echo", "echo off", "echo 1x"):
        result = adb.su(f"{bad} > {NODE}")
        assert result.returncode == 1 and "Invalid argument" in result.stderr, (bad, result)
        assert adb.read() == "1", bad
    assert adb.su(f"echo 0 > {NODE}").returncode == 0 and adb.read() == "0"


def _wakefulness(adb: Adb) -> str:
    out = adb.su("dumpsys power").stdout
    return next((line.split("=", 1)[1] for line in out.split() if line.startswith("mWakefulness=")), "")


def test_unplug_or_input_suspend_ends_stay_on_and_the_screen_times_out(rooted: Adb) -> None:
    """`svc power stayon` holds the screen only while BatteryService sees USB power (audit
    finding 3): a faked unplug ends the hold, and so does an input-suspend switch, which takes
    the USB input offline; the screen then goes off at the user-activity timeout."""
    adb = rooted
    setup = (
        "svc power stayon true && settings put system screen_off_timeout 500 && input keyevent KEYCODE_WAKEUP"
    )
    assert adb.su(setup).returncode == 0
    assert _wakefulness(adb) == "Awake"
    assert adb.su("dumpsys battery unplug").returncode == 0
    assert eventually(lambda: _wakefulness(adb) == "Asleep", 30.0)
    assert adb.su("dumpsys battery reset && input keyevent KEYCODE_WAKEUP").returncode == 0
    assert _wakefulness(adb) == "Awake"
    assert adb.su(f"echo 1 > {NODE}").returncode == 0  # input suspended: USB offline
    assert eventually(lambda: _wakefulness(adb) == "Asleep", 30.0)
    assert adb.su(f"echo 0 > {NODE} && settings delete system screen_off_timeout").returncode == 0
