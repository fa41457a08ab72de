"""gemm and lstm on virtual phones through the real adb server: the x86_64 build runs in the phone's
sandbox on its OpenCL (PoCL), verifies against its CPU path, caches the program binary under
/data/local/tmp/farm/cache, and on a phone without OpenCL exits 3 naming what it looked for."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

PHONE_BIN = "/data/local/tmp/farm/bin"
PHONE_CACHE = "/data/local/tmp/farm/cache"


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_benchmarks_run_verify_and_cache_on_phones(virtual_phones, adb_server, kernel_build):
    phones = virtual_phones(count=2, profiles=["adreno-sd8gen2", "no-opencl"])
    adb = adb_server.adb
    for phone in phones:
        serial = phone.adb_serial
        assert adb("-s", serial, "shell", f"mkdir -p {PHONE_BIN} {PHONE_CACHE}").returncode == 0
        for program in ("gemm", "lstm"):
            assert (
                adb("-s", serial, "push", str(kernel_build(program)), f"{PHONE_BIN}/{program}").returncode
                == 0
            )
        assert adb("-s", serial, "shell", f"chmod 755 {PHONE_BIN}/gemm {PHONE_BIN}/lstm").returncode == 0

    gpu_phone, no_cl_phone = phones[0].adb_serial, phones[1].adb_serial
    gemm = f"{PHONE_BIN}/gemm --backend=gpu --m=33 --n=17 --k=65 --iters=2 --verify --cl-cache={PHONE_CACHE}"
    first, second = (adb("-s", gpu_phone, "shell", gemm) for _ in range(2))
    assert first.returncode == 0, first.stderr
    info1 = next(e for e in events(first.stdout) if e["event"] == "info")
    info2 = next(e for e in events(second.stdout) if e["event"] == "info")
    assert (info1["cache_hit"], info2["cache_hit"]) == (False, True)
    # on a CPU OpenCL device gemm builds its packed kernel's program, named gemm_packed
    assert info2["cache_path"].startswith(f"{PHONE_CACHE}/gemm_packed-")
    assert next(e for e in events(second.stdout) if e["event"] == "result")["verify"] == "passed"
    listing = adb("-s", gpu_phone, "shell", f"ls {PHONE_CACHE}").stdout.split()
    assert len(listing) == 1 and listing[0].startswith("gemm_packed-")

    lstm = adb("-s", gpu_phone, "shell", f"{PHONE_BIN}/lstm --backend=gpu --layers=2 --iters=2 --verify")
    assert lstm.returncode == 0, lstm.stderr
    assert next(e for e in events(lstm.stdout) if e["event"] == "result")["verify"] == "passed"

    no_cl = adb("-s", no_cl_phone, "shell", f"{PHONE_BIN}/gemm --backend=gpu --iters=1")
    assert no_cl.returncode == 3
    error = next(e for e in events(no_cl.stdout) if e["event"] == "error")
    assert "no OpenCL library" in error["message"]  # none ships there, as on a phone without OpenCL
    cpu = adb("-s", no_cl_phone, "shell", f"{PHONE_BIN}/lstm --backend=cpu-mt --iters=1")
    assert cpu.returncode == 0, cpu.stderr  # the CPU backends need no OpenCL
