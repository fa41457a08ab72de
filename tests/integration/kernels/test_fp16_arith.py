"""Half arithmetic (`-DFARM_HALF_ARITH`, built only for a device that reports cl_khr_fp16) against
fp32, on whichever OpenCL device of this machine reports the extension. Neither PoCL here nor the
H200's NVIDIA OpenCL (driver 580) does, so on those the tests skip and say why; phones with Adreno
or Mali GPUs report it and run them.

gemm: the product of the device's half arithmetic against numpy's float64 product of the fp32
inputs, within the tolerance kernels/README.md states for half arithmetic (2e-2 |ref| + 2e-3 K).
cnn: the program's own --verify against its cpu path (fp32 arithmetic on the same half-stored
tensors), within the 6e-2 (relative to the largest output) kernels/cnn/README.md states for half
arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def fp16_device(kernel_program) -> str:
    """The first OpenCL device that reports cl_khr_fp16, as P:D; skips when none does."""
    run = kernel_program("gemm").run("--list-devices")
    if run.returncode != 0:
        pytest.skip(f"no OpenCL platform here: {run.stderr.strip()}")
    devices = run.of("device")
    with_fp16 = [d for d in devices if d["fp16"]]
    if not with_fp16:
        names = "; ".join(f"{d['index']} {d['name']}" for d in devices)
        pytest.skip(f"no OpenCL device reports cl_khr_fp16 ({names}): half arithmetic cannot run here")
    return str(with_fp16[0]["index"])


def test_gemm_half_arithmetic_against_fp32(kernel_program, fp16_device, tmp_path) -> None:
    m, n, k = 65, 130, 257
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "c.npy"
    run = kernel_program("gemm").run(
        "--backend=gpu", f"--cl-device={fp16_device}", "--kernel=local", "--precision=fp16",
        f"--a={tmp_path / 'a.npy'}", f"--b={tmp_path / 'b.npy'}", "--iters=1", "--warmup=0",
        f"--dump-output={out}",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.one("info")["precision_mode"] == "fp16"  # half arithmetic, not only half storage
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = np.load(out).astype(np.float64)
    assert np.all(np.abs(got - ref) <= 2e-2 * np.abs(ref) + 2e-3 * k)


def test_cnn_half_arithmetic_verifies(kernel_program, fp16_device) -> None:
    run = kernel_program("cnn").run(
        "--backend=gpu", f"--cl-device={fp16_device}", "--precision=fp16", "--model=squeezenet1.1",
        "--input-size=64", "--iters=1", "--warmup=0", "--verify", timeout_s=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.one("info")["precision_mode"] == "fp16"
    assert run.one("result")["verified"] is True
