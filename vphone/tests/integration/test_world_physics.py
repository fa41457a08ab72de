"""Telemetry physics driven by real work: an OpenCL busy loop (PoCL) on one of two phones."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.groundtruth import read_ground_truth
from vphone.testing.hypothetical import WRAPPER_ONLY_PIXEL, wrapper_only_pixel
from vphone.testing.socphone import install
from vphone.world import SandboxWorld, make_world
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("bwrap") is None or shutil.which("gcc") is None, reason="needs bwrap, gcc"
    ),
]
GPUBUSY = "/sys/class/kgsl/kgsl-3d0/gpubusy"


@pytest.fixture(scope="module")
def cl_busy(cl_busy_binary: Path) -> Path:
    return cl_busy_binary


def _start(tmp_path: Path, profile: str, serial: str) -> WorldThread:
    world = make_world(profile, serial, tmp_path / serial)
    assert isinstance(world, SandboxWorld)
    return WorldThread(world)


@pytest.fixture
def two_phones(tmp_path: Path) -> Iterator[tuple[WorldThread, WorldThread]]:
    with (
        _start(tmp_path, "adreno-sd8gen2", "VPHYS01") as a,
        _start(tmp_path, "adreno-sd8gen2", "VPHYS02") as b,
    ):
        yield a, b


def _gpubusy(w: WorldThread) -> float:
    if w.world.profile.gpu is not None and w.world.profile.gpu.kind.value == "mali":
        return int(w.sh("cat /sys/class/misc/mali0/device/utilization").stdout) / 100
    busy, total = (int(x) for x in w.sh(f"cat {GPUBUSY}").stdout.split())
    return busy / total if total else 0.0


def _install(w: WorldThread, binary: Path) -> None:
    install(w, binary, "cl_busy")
    assert w.sh("test -x /data/local/tmp/cl_busy").returncode == 0


def test_gpu_busy_follows_opencl_work_on_this_phone_only(
    two_phones: tuple[WorldThread, WorldThread], cl_busy: Path
) -> None:
    a, b = two_phones
    time.sleep(1.2)  # one closed gpubusy window at idle
    assert _gpubusy(a) < 0.05 and _gpubusy(b) < 0.05
    idle_power_mw = a.world.physics.last_power_mw
    idle_temp_mc = int(a.sh("cat /sys/class/thermal/thermal_zone0/temp").stdout)
    _install(a, cl_busy)
    run = subprocess.Popen(
        a.world.shell_argv("/data/local/tmp/cl_busy --seconds=4"),
        env=a.world.shell_env(None),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert run.stdout is not None and "start" in run.stdout.readline()  # compiled, looping now
        time.sleep(2.2)
        # gpubusy and gpu_busy_percentage of the same window: one read of both (two commands
        # could straddle the physics' window boundary, once 93 against 88).
        busy, total, pct = (
            int(x)
            for x in a.sh(f"cat {GPUBUSY} /sys/class/kgsl/kgsl-3d0/gpu_busy_percentage").stdout.split()[:3]
        )
        busy_a, busy_b = busy / total if total else 0.0, _gpubusy(b)
        loaded_power_mw = a.world.physics.last_power_mw
        gpu_hz = int(a.sh("cat /sys/class/kgsl/kgsl-3d0/devfreq/cur_freq").stdout)
    finally:
        run.wait(30)
    assert run.returncode == 0
    assert busy_a > 0.5, busy_a
    assert abs(pct - round(busy_a * 100)) <= 1
    assert busy_b < 0.05, busy_b
    assert loaded_power_mw > idle_power_mw + 1000
    assert a.world.profile.gpu is not None
    assert gpu_hz > a.world.profile.gpu.freqs_hz[0]  # the GPU's governor follows its load
    temp_mc = int(a.sh("cat /sys/class/thermal/thermal_zone0/temp").stdout)
    assert temp_mc > idle_temp_mc + 300  # R*C = 48 s: a few seconds at +2.6 W is > +0.3 C
    rows = read_ground_truth(a.world.sandbox.layout.ground_truth)
    assert max(r.gpu_busy for r in rows) > 0.8
    assert max(r.gpu_busy for r in read_ground_truth(b.world.sandbox.layout.ground_truth)) < 0.05
    assert all(r2.t_ns > r1.t_ns for r1, r2 in itertools.pairwise(rows))
    assert time.monotonic_ns() - rows[-1].t_ns < 1_000_000_000  # same clock as the phone's programs


@pytest.mark.parametrize("profile", ["no-opencl", WRAPPER_ONLY_PIXEL])
def test_a_program_linked_with_libopencl_does_not_start_without_libopencl_so(
    tmp_path: Path, cl_busy: Path, profile: str
) -> None:
    """cl_busy is linked with -lOpenCL. A phone with no libOpenCL.so on its linker's paths (none at
    all, or a hypothetical Pixel 7 with libOpenCL-pixel.so only) kills it before main, as Android's
    linker does."""
    name = str(wrapper_only_pixel(tmp_path)) if profile == WRAPPER_ONLY_PIXEL else profile
    with _start(tmp_path, name, "VPHYS03") as w:
        _install(w, cl_busy)
        res = w.sh("/data/local/tmp/cl_busy --seconds=1")
        assert res.returncode == 127 and "libOpenCL" in res.stderr and res.stdout == ""


def test_a_program_linked_with_libopencl_starts_on_a_pixel7(tmp_path: Path, cl_busy: Path) -> None:
    """The Pixel 7 ships /vendor/lib64/libOpenCL.so beside its wrapper (pixel7.yaml [dump]), where
    the linker of a program in /data/local/tmp looks: a -lOpenCL build starts and runs there."""
    with _start(tmp_path, "pixel7", "VPHYS06") as w:
        _install(w, cl_busy)
        res = w.sh("/data/local/tmp/cl_busy --seconds=1")
    assert res.returncode == 0, res.stderr


PIXEL_CLIENT = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
typedef int (*platforms_fn)(unsigned, void *, unsigned *);
int main(void) {
    void *h = dlopen("/vendor/lib64/libOpenCL-pixel.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("no-library\n"); return 1; }
    void *(*load)(const char *) = (void *(*)(const char *))dlsym(h, "loadOpenCLPointer");
    void (*enable)(void) = (void (*)(void))dlsym(h, "enableOpenCL");
    printf("dlsym:%s\n", dlsym(h, "clGetPlatformIDs") ? "yes" : "no");
    printf("before-enable:%s\n", load("clGetPlatformIDs") ? "yes" : "no");
    enable();
    platforms_fn get = (platforms_fn)load("clGetPlatformIDs");
    unsigned n = 0;
    printf("platforms:%u\n", get && get(0, NULL, &n) == 0 ? n : 0);
    return 0;
}
"""


def test_the_pixel_wrapper_gives_opencl_only_through_its_entry_points(tmp_path: Path) -> None:
    source, binary = tmp_path / "pixel_client.c", tmp_path / "pixel_client"
    source.write_text(PIXEL_CLIENT)
    subprocess.run(["gcc", "-O1", "-o", str(binary), str(source), "-ldl"], check=True)
    with _start(tmp_path, "pixel7", "VPHYS05") as w:
        install(w, binary, "pixel_client")
        res = w.sh("/data/local/tmp/pixel_client")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == ["dlsym:no", "before-enable:no"]
    assert int(lines[2].removeprefix("platforms:")) >= 1


def test_current_now_quirks_and_charging_node(tmp_path: Path) -> None:
    with _start(tmp_path, "adreno-nexus6p", "VPHYS04") as w:
        world = w.world
        assert isinstance(world, SandboxWorld)
        assert world.physics.profile.battery.fuel_gauge_interval_s >= 10  # current_now holds between updates
        charging_ua = int(w.sh("cat /sys/class/power_supply/battery/current_now").stdout)
        assert w.sh("su -c 'echo 0 > /sys/class/power_supply/battery/charging_enabled'").returncode == 0
        time.sleep(0.5)
        status = w.sh("cat /sys/class/power_supply/battery/status").stdout.strip()
        # charging_enabled=0 on qpnp-smbcharger suspends the USB input (smbchg_usb_en): the
        # battery feeds the phone (a battery-idle switch would read "Not charging")
        assert status == "Discharging"
        held_ua = int(w.sh("cat /sys/class/power_supply/battery/current_now").stdout)
        assert held_ua == charging_ua  # slow fuel gauge: not refreshed yet
        assert charging_ua < 0  # Nexus convention: charging shows negative (positive = discharging)
