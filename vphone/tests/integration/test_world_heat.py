"""Heat that throttles: a sustained load on the hot profile crosses its trip within seconds, the
caps show in cpufreq, the cooling devices, the CPU quota and `dumpsys thermalservice`, and they
lift again as the phone cools (each step waited for, with a deadline, on the phone's own nodes)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from vphone.testing.socphone import budgeted, phone, read, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"),
]
PRIME = "/sys/devices/system/cpu/cpufreq/policy7"
DEADLINE_S = 90.0  # a busy loop gets a fraction of a core on a loaded host: heat comes slower


def _status(text: str) -> int:
    m = re.search(r"^Thermal Status: (\d)$", text, re.M)
    assert m is not None, text
    return int(m.group(1))


def test_hot_profile_throttles_under_sustained_load_and_recovers(tmp_path: Path) -> None:
    with phone(budgeted("adreno-sd888-hot"), "VPHEAT1", tmp_path) as w:
        top_khz = int(read(w, f"{PRIME}/cpuinfo_max_freq"))
        trip_mc = int(read(w, "/sys/class/thermal/thermal_zone0/trip_point_0_temp"))
        assert read(w, f"{PRIME}/scaling_max_freq") == f"{top_khz}\n"
        assert int(read(w, "/sys/class/thermal/thermal_zone0/temp")) < trip_mc
        assert _status(w.sh("dumpsys thermalservice").stdout) == 0
        # Two busy shells: a sustained heavy load (two cores of demand).
        load = subprocess.Popen(
            w.world.shell_argv("while :; do :; done & while :; do :; done"),
            env=w.world.shell_env(None),
            start_new_session=True,
        )
        try:
            took_s = wait_until(
                lambda: int(read(w, f"{PRIME}/scaling_max_freq")) < top_khz, "a thermal cap", DEADLINE_S
            )
            # Each sign of the throttling shows (step_wise moves the caps every poll: wait for each).
            wait_until(lambda: int(read(w, "/sys/class/thermal/thermal_zone0/temp")) >= trip_mc, "the trip")
            wait_until(
                lambda: int(read(w, "/sys/class/thermal/cooling_device2/cur_state")) > 0, "cpufreq-cpu7"
            )
            wait_until(
                lambda: _status(w.sh("dumpsys thermalservice").stdout) >= 1, "LIGHT status", DEADLINE_S
            )
            busy_device = re.compile(r"CoolingDevice\{mValue=[1-9]\d*, mType=2, mName=cpufreq-cpu7\}")
            wait_until(lambda: bool(busy_device.search(w.sh("dumpsys thermalservice").stdout)), "HAL cooling")
            cg = w.world.cgroups
            if cg is not None:  # the cap is a real slowdown: the CPU quota follows it down
                budget = w.world.profile.cpu.budget_cores
                wait_until(lambda: (cg.quota_cores("cpu") or budget) < budget, "a lower CPU quota")
        finally:
            os.killpg(load.pid, signal.SIGKILL)
            load.wait(10)
        wait_until(
            lambda: read(w, f"{PRIME}/scaling_max_freq") == f"{top_khz}\n", "the cap to lift", DEADLINE_S
        )
        wait_until(lambda: _status(w.sh("dumpsys thermalservice").stdout) == 0, "NONE status", DEADLINE_S)
        assert took_s < DEADLINE_S
