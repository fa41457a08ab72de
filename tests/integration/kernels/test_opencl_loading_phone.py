"""OpenCL where and as real phones ship it (issue 28, audit finding 2). A Pixel 7 ships both
/vendor/lib64/libOpenCL.so and the Pixel wrapper /vendor/lib64/libOpenCL-pixel.so (pixel7.yaml
[dump]): farm's programs find the standard library first. A hypothetical Pixel with the wrapper
alone (it exports enableOpenCL and loadOpenCLPointer and no OpenCL function, and nothing named
libOpenCL.so is on the linker's path) kills a program linked with -lOpenCL before main, as
Android's linker would. farm's programs load OpenCL at run time, so their cpu backends and `idle`
run on it, and the gpu backend reaches the device through the wrapper's entry points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vphone.testing.hypothetical import PIXEL_WRAPPER_LIBRARY, wrapper_only_pixel

pytestmark = pytest.mark.integration

PHONE_BIN = "/data/local/tmp/farm/bin"
# farm's loader asks for the bare name first (kernels/common/clload.c), which a Pixel 7's linker
# resolves to /vendor/lib64/libOpenCL.so; the full path is the next candidate.
STANDARD_LIBRARIES = {"libOpenCL.so", "/vendor/lib64/libOpenCL.so"}


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _push_programs(adb, serial: str, kernel_build) -> None:  # type: ignore[no-untyped-def]
    assert adb("-s", serial, "shell", f"mkdir -p {PHONE_BIN}").returncode == 0
    for program in ("gemm", "idle"):
        assert adb("-s", serial, "push", str(kernel_build(program)), f"{PHONE_BIN}/{program}").returncode == 0
    assert adb("-s", serial, "shell", f"chmod 755 {PHONE_BIN}/gemm {PHONE_BIN}/idle").returncode == 0


def _gpu_gemm_library(adb, serial: str) -> str:  # type: ignore[no-untyped-def]
    """The library a verified gpu gemm ran through."""
    gemm = f"{PHONE_BIN}/gemm --backend=gpu --m=16 --n=16 --k=16 --iters=1 --verify"
    gpu = adb("-s", serial, "shell", gemm)
    assert gpu.returncode == 0, gpu.stderr
    assert next(e for e in events(gpu.stdout) if e["event"] == "result")["verify"] == "passed"
    return str(next(e for e in events(gpu.stdout) if e["event"] == "info")["opencl_library"])


def _listed_libraries(adb, serial: str) -> set[str]:  # type: ignore[no-untyped-def]
    listed = adb("-s", serial, "shell", f"{PHONE_BIN}/gemm --list-devices")
    assert listed.returncode == 0, listed.stderr
    devices = [e for e in events(listed.stdout) if e["event"] == "device"]
    assert devices, listed.stdout
    return {d["library"] for d in devices}


def test_programs_start_on_a_wrapper_only_pixel_and_reach_opencl_through_its_wrapper(
    virtual_phones, adb_server, kernel_build, tmp_path: Path
):
    (phone,) = virtual_phones(count=1, profiles=[str(wrapper_only_pixel(tmp_path))])
    adb, serial = adb_server.adb, phone.adb_serial
    _push_programs(adb, serial, kernel_build)
    # The hypothetical device ships no libOpenCL.so anywhere its linker looks.
    assert adb("-s", serial, "shell", "ls /vendor/lib64/libOpenCL.so").returncode != 0

    cpu = adb("-s", serial, "shell", f"{PHONE_BIN}/gemm --backend=cpu --m=16 --n=16 --k=16 --iters=1")
    assert cpu.returncode == 0, cpu.stderr
    assert [e for e in events(cpu.stdout) if e["event"] == "result"]
    idle = adb("-s", serial, "shell", f"{PHONE_BIN}/idle --seconds=0.1 --iters=1")
    assert idle.returncode == 0, idle.stderr

    assert _listed_libraries(adb, serial) == {PIXEL_WRAPPER_LIBRARY}
    assert _gpu_gemm_library(adb, serial) == PIXEL_WRAPPER_LIBRARY


def test_on_a_pixel7_farms_loader_finds_libopencl_so_beside_the_wrapper(
    virtual_phones, adb_server, kernel_build
):
    (phone,) = virtual_phones(count=1, profiles=["pixel7"])
    adb, serial = adb_server.adb, phone.adb_serial
    _push_programs(adb, serial, kernel_build)
    shipped = adb("-s", serial, "shell", f"ls /vendor/lib64/libOpenCL.so {PIXEL_WRAPPER_LIBRARY}")
    assert shipped.returncode == 0, shipped.stderr

    assert _listed_libraries(adb, serial) <= STANDARD_LIBRARIES
    assert _gpu_gemm_library(adb, serial) in STANDARD_LIBRARIES
