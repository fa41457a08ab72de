"""OpenCL where and as real phones ship it (issue 28, audit finding 2). A virtual Pixel 7 has
only /vendor/lib64/libOpenCL-pixel.so, which exports enableOpenCL and loadOpenCLPointer and no
OpenCL function, and no libOpenCL.so on the linker's path: a program linked with -lOpenCL dies
before main there, as Android's linker kills it. farm's programs load OpenCL at run time, so
their cpu backends and `idle` run on it, and the gpu backend reaches the device through the
Pixel wrapper's entry points."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

PHONE_BIN = "/data/local/tmp/farm/bin"
PIXEL_LIBRARY = "/vendor/lib64/libOpenCL-pixel.so"


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_programs_start_on_a_pixel_and_reach_opencl_through_its_wrapper(
    virtual_phones, adb_server, kernel_build
):
    (phone,) = virtual_phones(count=1, profiles=["pixel7"])
    adb, serial = adb_server.adb, phone.adb_serial
    assert adb("-s", serial, "shell", f"mkdir -p {PHONE_BIN}").returncode == 0
    for program in ("gemm", "idle"):
        assert adb("-s", serial, "push", str(kernel_build(program)), f"{PHONE_BIN}/{program}").returncode == 0
    assert adb("-s", serial, "shell", f"chmod 755 {PHONE_BIN}/gemm {PHONE_BIN}/idle").returncode == 0
    # The phone ships no libOpenCL.so anywhere its linker looks.
    assert adb("-s", serial, "shell", "ls /vendor/lib64/libOpenCL.so").returncode != 0

    cpu = adb("-s", serial, "shell", f"{PHONE_BIN}/gemm --backend=cpu --m=16 --n=16 --k=16 --iters=1")
    assert cpu.returncode == 0, cpu.stderr
    assert [e for e in events(cpu.stdout) if e["event"] == "result"]
    idle = adb("-s", serial, "shell", f"{PHONE_BIN}/idle --seconds=0.1 --iters=1")
    assert idle.returncode == 0, idle.stderr

    listed = adb("-s", serial, "shell", f"{PHONE_BIN}/gemm --list-devices")
    assert listed.returncode == 0, listed.stderr
    devices = [e for e in events(listed.stdout) if e["event"] == "device"]
    assert devices and {d["library"] for d in devices} == {PIXEL_LIBRARY}

    gemm = f"{PHONE_BIN}/gemm --backend=gpu --m=16 --n=16 --k=16 --iters=1 --verify"
    gpu = adb("-s", serial, "shell", gemm)
    assert gpu.returncode == 0, gpu.stderr
    info = next(e for e in events(gpu.stdout) if e["event"] == "info")
    assert info["opencl_library"] == PIXEL_LIBRARY
    assert next(e for e in events(gpu.stdout) if e["event"] == "result")["verify"] == "passed"
