"""The `gemm` benchmark binary against numpy, on all three backends.

Inputs are written by the test as .npy (--a, --b), the product comes back through --dump-output.
Tolerances (also in kernels/README.md): fp32 |got-ref| <= 1e-4*|ref| + 1e-5*K (summation order
differs from numpy's); fp16 storage (inputs and output rounded to half, fp32 accumulation) against
numpy's float32 product of the unrounded inputs: 1e-2*|ref| + 2e-3*sqrt(K).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

BACKENDS = ["cpu", "cpu-mt", "gpu"]
ODD_SIZES = [(1, 1, 1), (17, 33, 65), (127, 255, 63)]


def write_inputs(
    tmp_path: Path, m: int, n: int, k: int, seed: int
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    return a, b, [f"--a={tmp_path / 'a.npy'}", f"--b={tmp_path / 'b.npy'}"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("m", "n", "k"), ODD_SIZES)
def test_fp32_matches_numpy_at_sizes_off_the_tile(kernel_program, tmp_path, backend, m, n, k):
    a, b, args = write_inputs(tmp_path, m, n, k, seed=m * 1000 + k)
    out = tmp_path / "c.npy"
    run = kernel_program("gemm").run(
        *args, f"--backend={backend}", "--threads=2", "--warmup=0", "--iters=1", f"--dump-output={out}"
    )
    assert run.returncode == 0, run.stderr
    got = np.load(out)
    ref = a @ b
    assert got.shape == (m, n)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * k)
    result = run.one("result")
    assert result["checksum"] == pytest.approx(float(got.astype(np.float64).sum()), rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp16_storage_within_the_looser_tolerance(kernel_program, tmp_path, backend):
    m, n, k = 33, 70, 129
    a, b, args = write_inputs(tmp_path, m, n, k, seed=7)
    out = tmp_path / "c.npy"
    run = kernel_program("gemm").run(
        *args, f"--backend={backend}", "--precision=fp16", "--iters=1", "--warmup=0", f"--dump-output={out}"
    )
    assert run.returncode == 0, run.stderr
    got = np.load(out)
    np.testing.assert_allclose(got, a @ b, rtol=1e-2, atol=2e-3 * math.sqrt(k))
    # The output really went through half storage: every value is representable in fp16.
    np.testing.assert_array_equal(got, got.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("kernel", ["regblock", "packed", "local"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_gpu_kernels_pass_their_own_verification(kernel_program, kernel, precision):
    run = kernel_program("gemm").run(
        "--backend=gpu", f"--kernel={kernel}", f"--precision={precision}", "--m=70", "--n=45", "--k=33",
        "--iters=1", "--warmup=0", "--verify",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    info, result = run.one("info"), run.one("result")
    assert info["kernel"] == kernel
    assert result["verify"] == "passed"
    assert result["mismatches"] == 0


@pytest.mark.parametrize(("kernel", "vecs"), [("regblock", 1), ("packed", 1), ("packed", 2)])
@pytest.mark.parametrize(("tile_m", "vec", "wg"), [(1, 2, 0), (3, 4, 2), (6, 16, 0), (5, 8, 3)])
def test_register_blocking_knobs_keep_results_exact(kernel_program, tmp_path, kernel, vecs, tile_m, vec, wg):
    m, n, k = 29, 51, 23
    a, b, args = write_inputs(tmp_path, m, n, k, seed=tile_m + vec)
    out = tmp_path / "c.npy"
    wg_args = [f"--wg-m={wg}", f"--wg-n={wg}"] if wg else []
    run = kernel_program("gemm").run(
        *args, "--backend=gpu", f"--kernel={kernel}", f"--tile-m={tile_m}", f"--vec={vec}", f"--vecs={vecs}",
        *wg_args, "--iters=1", "--warmup=0", f"--dump-output={out}",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    np.testing.assert_allclose(np.load(out), a @ b, rtol=1e-4, atol=1e-5 * k)
    if wg:
        assert (run.one("info")["wg_m"], run.one("info")["wg_n"]) == (wg, wg)


# --global-vec=4: the local kernel's operand tiles loaded as float4 (gemm_tiled.cl TILED_GVEC4).
# Sizes off every tile and every multiple of 4 (the host pads to whole tiles); tiles where each
# work-item loads one or several float4s of each operand, and one whose B tile (8 x 4 = 8 float4s
# for 16 work-items) does not split into whole float4s, which falls back to scalar loads.
@pytest.mark.parametrize(
    ("tile", "vec_loads"),
    [
        (["--tsm=32", "--tsn=32", "--tsk=8", "--wptm=4", "--wptn=4", "--lvw=4"], 4),
        (["--tsm=64", "--tsn=64", "--tsk=16", "--wptm=4", "--wptn=4", "--lvw=4"], 4),
        (["--tsm=64", "--tsn=32", "--tsk=16", "--wptm=4", "--wptn=4", "--lvw=2"], 4),
        (["--tsm=16", "--tsn=4", "--tsk=8", "--wptm=1", "--wptn=4", "--lvw=1"], 1),
    ],
    ids=["32x32x8", "64x64x16", "64x32x16-lvw2", "no-fit"],
)
def test_float4_global_loads_match_numpy(kernel_program, tmp_path, tile, vec_loads):
    m, n, k = 77, 45, 70
    a, b, args = write_inputs(tmp_path, m, n, k, seed=len(tile) + vec_loads)
    out = tmp_path / "c.npy"
    run = kernel_program("gemm").run(
        *args, "--backend=gpu", "--kernel=local", "--global-vec=4", *tile, "--iters=1", "--warmup=0",
        f"--dump-output={out}",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.one("info")["global_vec"] == vec_loads
    np.testing.assert_allclose(np.load(out), a @ b, rtol=1e-4, atol=1e-5 * k)


def test_global_vec_other_than_1_or_4_is_refused(kernel_program):
    run = kernel_program("gemm").run("--backend=gpu", "--kernel=local", "--global-vec=2", "--iters=1")
    assert run.returncode == 2
    expected = "gemm: --global-vec=2: use 1 (scalar loads) or 4 (float4 loads)"
    assert run.stderr.strip().splitlines() == [expected]


def test_verification_failure_exits_4_with_one_line(kernel_program):
    run = kernel_program("gemm").run("--backend=gpu", "--m=16", "--iters=1", "--verify", "--corrupt-output")
    assert run.returncode == 4
    assert run.one("result")["verify"] == "failed"
    assert "verification failed" in run.one("error")["message"]
    assert len(run.stderr.strip().splitlines()) == 1


def test_result_reports_gflops_and_the_transfer_split(kernel_program):
    run = kernel_program("gemm").run("--backend=gpu", "--m=64", "--n=64", "--k=64", "--iters=3", "--warmup=1")
    assert run.returncode == 0, run.stderr
    iters = run.of("iter")
    assert len(iters) == 3
    for it in iters:
        assert it["t_end_ns"] >= it["t_start_ns"]
        assert it["kernel_ns"] > 0 and it["h2d_ns"] > 0 and it["d2h_ns"] > 0
    result = run.one("result")
    flop = 2 * 64**3
    assert result["gflops"] == pytest.approx(flop / (result["median_ms"] * 1e6), rel=1e-6)
    assert result["gflops_kernel"] >= result["gflops"]


def test_transfers_once_copies_outside_the_measured_iterations(kernel_program, tmp_path):
    a, b, args = write_inputs(tmp_path, 20, 30, 40, seed=3)
    out = tmp_path / "c.npy"
    run = kernel_program("gemm").run(
        *args, "--backend=gpu", "--transfers=once", "--iters=2", "--warmup=1", f"--dump-output={out}"
    )
    assert run.returncode == 0, run.stderr
    assert all(it["h2d_ns"] == 0 and it["d2h_ns"] == 0 for it in run.of("iter"))
    np.testing.assert_allclose(np.load(out), a @ b, rtol=1e-4, atol=1e-5 * 40)


def test_mismatched_input_shapes_are_bad_arguments(kernel_program, tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((3, 4), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((5, 6), np.float32))
    run = kernel_program("gemm").run(
        f"--a={tmp_path / 'a.npy'}", f"--b={tmp_path / 'b.npy'}", "--backend=cpu"
    )
    assert run.returncode == 2
    assert "inner dimensions differ" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
