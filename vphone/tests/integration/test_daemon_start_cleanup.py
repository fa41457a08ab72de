"""A daemon whose start fails leaves nothing mounted (issue #27). The launcher gave up on a slow
start with SIGKILL: the daemon could not stop its phones, and their userdata partitions (a loop
device each, with the /data, /sdcard and /dev/.farm binds) stayed mounted on the host."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from vphone.daemon import PHONES_DIR
from vphone.errors import EnvironmentProblem
from vphone.testing.stalled_world import STALLED_MARKER

from vphone import control, userdata

pytestmark = pytest.mark.integration

STALLED_FACTORY = "vphone.testing.stalled_world:make_world"
START_WAIT_S = 30.0  # far more than a partition's mount takes; the boot after it never ends


def mounted_below(top: Path) -> list[str]:
    """Mount points at or below `top`, from the kernel's table (/proc/self/mountinfo)."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [point for point in points if point == str(top) or point.startswith(f"{top}/")]


def loop_devices(image: Path) -> str:
    return subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True, check=True).stdout


def test_a_start_that_times_out_leaves_no_mount_behind(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    phones_dir = state_dir / PHONES_DIR
    try:
        with pytest.raises(EnvironmentProblem, match="did not start within"):
            control.start_daemon(
                state_dir,
                ["adreno-sd8gen2", "adreno-sd8gen2"],
                world_factory=STALLED_FACTORY,
                timeout_s=START_WAIT_S,
            )
        phones = [d for d in phones_dir.iterdir() if d.is_dir()]
        assert len(phones) == 2
        assert all((d / STALLED_MARKER).exists() for d in phones), "the start timed out before it mounted"
        assert mounted_below(state_dir) == []
        images = sorted(phones_dir.glob("*.userdata.img"))
        assert len(images) == 2 and all(loop_devices(image) == "" for image in images)
    finally:  # the old code's leftovers, so that a failure leaves the host clean
        for phone in phones_dir.glob("*"):
            if phone.is_dir():
                userdata.unmount(phone)
