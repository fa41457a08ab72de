"""The power HAL of a virtual phone rewrites clock limits on the framework's hints, as Pixel's
libperfmgr does: a touch raises the CPU floor for the boost's duration and then writes the
table's default (not root's pin); deep Doze (`cmd deviceidle force-idle`) caps the maxima until
`unforce`. A hypothetical Dimensity 9200 phone whose HAL also caps in deep Doze (rooted; hints
in its power_hal section): the real one's tables have no idle scenario."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.profile import HintTrigger
from vphone.testing.hypothetical import mode_capping_phone
from vphone.testing.waiting import eventually
from vphone.world import SandboxWorld, make_world
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]
POLICY = "/sys/devices/system/cpu/cpufreq/policy0"


@pytest.fixture
def phone(tmp_path: Path) -> Iterator[WorldThread]:
    world = make_world(str(mode_capping_phone(tmp_path)), "VHAL0001", tmp_path / "p")
    assert isinstance(world, SandboxWorld)
    with WorldThread(world) as w:
        yield w


def _read(w: WorldThread, node: str) -> str:
    return w.sh(f"cat {POLICY}/{node}").stdout.strip()


def test_a_touch_boost_overwrites_a_pinned_floor_and_idle_caps_the_maximum(phone: WorldThread) -> None:
    profile = phone.world.profile
    table = profile.cpu.clusters[0].freqs_khz
    hints = {h.trigger: h for h in profile.power_hal.hints}
    boost, idle = hints[HintTrigger.INTERACTION], hints[HintTrigger.IDLE]
    assert boost.cpu_min_khz is not None and idle.cpu_max_khz is not None
    pin = str(table[-1])
    assert phone.sh(f"su -c 'echo {pin} > {POLICY}/scaling_min_freq'").returncode == 0
    assert _read(phone, "scaling_min_freq") == pin  # the one read-back farm used to trust

    assert phone.sh("input tap 10 10").returncode == 0
    assert eventually(lambda: _read(phone, "scaling_min_freq") == str(boost.cpu_min_khz[0]), 10)
    # EndHint: the node's default, not the pin it had before the boost.
    assert eventually(lambda: _read(phone, "scaling_min_freq") == str(table[0]), 10)

    idled = phone.sh("cmd deviceidle force-idle")
    assert idled.stdout == "Now forced in to deep idle mode\n"
    assert phone.sh("dumpsys deviceidle get deep").stdout == "IDLE\n"
    assert eventually(lambda: _read(phone, "scaling_max_freq") == str(idle.cpu_max_khz[0]), 10)
    assert phone.sh("cmd deviceidle unforce").returncode == 0
    assert eventually(lambda: _read(phone, "scaling_max_freq") == str(table[-1]), 10)
