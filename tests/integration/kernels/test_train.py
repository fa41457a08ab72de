"""The `train` benchmark binary against a numpy MLP training step.

The test writes initial weights and one batch as .npy (kernels/train/README.md), runs one step,
and compares the dumped weights and the reported loss with numpy in float64; then checks that the
loss falls on the synthetic task and that the buffer strategies report the h2d/kernel/d2h split.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / "kernels" / "build" / platform.machine() / "train"
SIZES = [20, 16, 12, 4]
BATCH = 8
LAYERS = f"--layers={','.join(map(str, SIZES))}"
LR = 0.5  # large, so one step moves the weights far beyond float32 rounding

Params = list[tuple[np.ndarray, np.ndarray]]


def _no_nan(token: str) -> None:
    raise ValueError(f"{token} is not JSON: the events must parse anywhere")


@dataclass(frozen=True)
class Run:
    returncode: int
    events: list[dict]
    stderr: str

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == kind]


@pytest.fixture(scope="module")
def train(tmp_path_factory: pytest.TempPathFactory):
    # make is a no-op when the binary is up to date, and rebuilds a stale one
    subprocess.run(
        ["make", "-s", "-C", str(ROOT / "kernels"), f"build/{platform.machine()}/train"], check=True
    )
    cache = tmp_path_factory.mktemp("clcache")

    def run(*args: str, env: dict[str, str] | None = None) -> Run:
        env = {**os.environ, "FARM_CL_CACHE": str(cache), **(env or {})}
        p = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120, env=env)
        events = [json.loads(line, parse_constant=_no_nan) for line in p.stdout.splitlines() if line.strip()]
        return Run(p.returncode, events, p.stderr)

    return run


def numpy_step(params: Params, x: np.ndarray, y: np.ndarray, lr: float) -> tuple[float, Params, Params]:
    """Loss, gradients and updated parameters of one SGD step (float64)."""
    params = [(w.astype(np.float64), b.astype(np.float64)) for w, b in params]
    acts = [x.astype(np.float64)]
    for i, (w, b) in enumerate(params):
        z = acts[-1] @ w.T + b
        acts.append(np.maximum(z, 0.0) if i + 1 < len(params) else z)
    z = acts[-1]
    zmax = z.max(axis=1, keepdims=True)
    logsum = np.log(np.exp(z - zmax).sum(axis=1)) + zmax[:, 0]
    rows = np.arange(len(y))
    loss = float(np.mean(logsum - z[rows, y]))
    d = np.exp(z - logsum[:, None])
    d[rows, y] -= 1.0
    d /= len(y)
    grads: Params = []
    for i in reversed(range(len(params))):
        w, _ = params[i]
        grads.insert(0, (d.T @ acts[i], d.sum(axis=0)))
        if i > 0:
            d = (d @ w) * (acts[i] > 0)
    new = [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads, strict=True)]
    return loss, grads, new


@pytest.fixture(scope="module")
def problem(tmp_path_factory: pytest.TempPathFactory):
    rng = np.random.default_rng(3)
    d = tmp_path_factory.mktemp("train")
    params: Params = []
    for i, (nin, nout) in enumerate(itertools.pairwise(SIZES)):
        bound = np.sqrt(6.0 / nin)
        w = rng.uniform(-bound, bound, (nout, nin)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, nout).astype(np.float32)
        np.save(d / f"fc{i + 1}.weight.npy", w)
        np.save(d / f"fc{i + 1}.bias.npy", b)
        params.append((w, b))
    x = rng.uniform(-1, 1, (BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y.astype(np.float32))
    return params, x, y, d


def _load(d: Path) -> Params:
    n = len(SIZES) - 1
    return [(np.load(d / f"fc{i}.weight.npy"), np.load(d / f"fc{i}.bias.npy")) for i in range(1, n + 1)]


@pytest.mark.parametrize("backend", ["cpu", "cpu-mt", "gpu"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_one_step_matches_numpy(train, problem, tmp_path: Path, backend: str, precision: str) -> None:
    params, x, y, d = problem
    r = train(
        f"--backend={backend}", f"--precision={precision}", "--threads=2", LAYERS, f"--batch={BATCH}",
        f"--lr={LR}", "--steps=1", "--warmup=0", f"--init-weights={d}", f"--data-dir={d}",
        f"--dump-weights={tmp_path}",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    loss, grads, want = numpy_step(params, x, y, LR)
    got = _load(tmp_path)
    (it,) = r.of("iter")
    if precision == "fp32":
        assert it["loss"] == pytest.approx(loss, rel=1e-5)
        for (w0, b0), (w1, b1), (gw, gb), (ww, wb) in zip(params, got, grads, want, strict=True):
            np.testing.assert_allclose(w1, ww, rtol=0, atol=1e-5)
            np.testing.assert_allclose(b1, wb, rtol=0, atol=1e-5)
            # the gradient itself, recovered from the update, to 1e-3 of its largest entry
            np.testing.assert_allclose((w0 - w1) / LR, gw, rtol=0, atol=1e-3 * np.abs(gw).max())
            np.testing.assert_allclose((b0 - b1) / LR, gb, rtol=0, atol=1e-3 * np.abs(gb).max())
    else:
        # half storage: every weight and activation carries a relative error up to 2^-11
        assert it["loss"] == pytest.approx(loss, rel=1e-2)
        for (w1, b1), (ww, wb) in zip(got, want, strict=True):
            np.testing.assert_allclose(w1, ww, rtol=0, atol=3e-3 * np.abs(ww).max())
            np.testing.assert_allclose(b1, wb, rtol=0, atol=3e-3 * np.abs(ww).max())
            assert np.array_equal(w1, w1.astype(np.float16).astype(np.float32))  # really stored as half


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_loss_falls_on_the_synthetic_task(train, tmp_path: Path, backend: str) -> None:
    out = tmp_path / "loss.npy"
    r = train(f"--backend={backend}", "--layers=64,32,8", "--steps=60", "--warmup=0", "--lr=0.3",
              f"--dump-output={out}")  # fmt: skip
    assert r.returncode == 0, r.stderr
    losses = [e["loss"] for e in r.of("iter")]
    assert len(losses) == 60 and [e["step"] for e in r.of("iter")] == list(range(60))
    np.testing.assert_allclose(np.load(out), losses, rtol=1e-6)
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10])
    (result,) = r.of("result")
    assert result["loss_first"] == losses[0] and result["loss_last"] == losses[-1]


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_divergence_exits_5_naming_the_remedy(train, backend: str) -> None:
    r = train(f"--backend={backend}", "--layers=64,32,8", "--lr=1000", "--steps=50", "--warmup=0")
    assert r.returncode == 5
    m = re.fullmatch(r"train: loss diverged \((NaN|infinite)\) at step (\d+): lower --lr", r.stderr.strip())
    assert m, r.stderr
    assert len(r.of("iter")) == int(m.group(2)) and not r.of("result")


def test_cpu_mt_equals_cpu_exactly(train) -> None:
    def losses(backend: str) -> list[float]:
        r = train(f"--backend={backend}", "--threads=2", "--layers=64,48,8", "--steps=5", "--warmup=0")
        assert r.returncode == 0, r.stderr
        return [e["loss"] for e in r.of("iter")] + [r.of("result")[0]["checksum"]]

    assert losses("cpu") == losses("cpu-mt")  # threads split outputs, never a sum


@pytest.mark.parametrize("buffers", ["copy", "resident", "mapped"])
def test_buffer_strategies_split_time_and_agree(train, buffers: str) -> None:
    r = train(
        "--backend=gpu", f"--buffers={buffers}", "--layers=64,32,8", "--steps=3", "--warmup=1", "--verify"
    )
    assert r.returncode == 0, r.stderr
    iters = r.of("iter")
    assert len(iters) == 3
    assert all(e["h2d_ns"] > 0 and e["kernel_ns"] > 0 and e["d2h_ns"] > 0 for e in iters)
    (result,) = r.of("result")
    assert result["buffers"] == buffers and result["verified"] is True
    # over the measured steps only (the warm-up step is left out): their iter events are the truth
    moved = sum(e["h2d_ns"] + e["d2h_ns"] for e in iters)
    share = moved / (moved + sum(e["kernel_ns"] for e in iters))
    assert 0.0 < result["data_movement_share"] < 1.0
    assert result["data_movement_share"] == pytest.approx(share, rel=1e-6)
    assert result["gflops_kernel"] > 0 and result["steps_total"] == 4
    # same arithmetic whatever moves the data: same trained weights as the copy strategy
    ref = train("--backend=gpu", "--buffers=copy", "--layers=64,32,8", "--steps=3", "--warmup=1")
    assert result["checksum"] == ref.of("result")[0]["checksum"]


def test_device_buffers_move_nothing_host_to_device_inside_a_step(train) -> None:
    # --samples=96, batch 32: three batches, so 7 steps wrap around the dataset twice
    common = ["--backend=gpu", "--layers=64,32,8", "--batch=32", "--samples=96", "--steps=6", "--warmup=1"]
    r = train(*common, "--buffers=device", "--verify")
    assert r.returncode == 0, r.stderr
    iters = r.of("iter")
    assert len(iters) == 6
    # the dataset went up once, before the steps: inside a step only the losses come back
    assert all(e["h2d_ns"] == 0 and e["kernel_ns"] > 0 and e["d2h_ns"] > 0 for e in iters)
    (result,) = r.of("result")
    assert result["buffers"] == "device" and result["verified"] is True
    # the same batches in the same order as when the host uploads each one
    ref = train(*common, "--buffers=resident")
    assert result["checksum"] == ref.of("result")[0]["checksum"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--buffers=pinned"], "buffers"),
        (["--layers=784"], "layers"),
        (["--layers=784,x,16"], "layers"),
        (["--batch=0"], "batch"),
        (["--samples=33"], "multiple"),
        (["--lr=-1"], "lr"),
        (["--init-weights=/nonexistent"], "fc1.weight.npy"),
        (["--verify", "--backend=cpu"], "verify"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(train, args: list[str], needle: str) -> None:
    r = train("--layers=16,8,4", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("train: ") and needle in lines[0]
    assert [e["exit_code"] for e in r.of("error")] == [2] and not r.of("result")


def test_no_opencl_device_exits_3_and_cpu_needs_none(train, tmp_path: Path) -> None:
    no_vendors = {"OCL_ICD_VENDORS": str(tmp_path)}
    r = train("--backend=gpu", "--iters=1", "--warmup=0", env=no_vendors)
    assert r.returncode == 3 and "OpenCL" in r.stderr
    r = train("--backend=cpu", "--iters=1", "--warmup=0", env=no_vendors)
    assert r.returncode == 0, r.stderr


def test_help_teaches_with_an_example() -> None:
    p = subprocess.run([str(BIN), "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "example:\n  train --" in p.stdout and "--precision=S" in p.stdout


def test_files_of_wrong_shape_are_named(train, problem, tmp_path: Path) -> None:
    *_, d = problem
    np.save(tmp_path / "x.npy", np.zeros((BATCH, SIZES[0] + 1), np.float32))
    np.save(tmp_path / "y.npy", np.zeros(BATCH, np.float32))
    layers = LAYERS
    r = train(layers, f"--batch={BATCH}", f"--data-dir={tmp_path}", "--backend=cpu")
    assert r.returncode == 2 and "x.npy" in r.stderr and "expected shape" in r.stderr
    r = train("--layers=20,16,12,5", f"--init-weights={d}", "--backend=cpu")
    assert r.returncode == 2 and "fc3.weight.npy" in r.stderr
    np.save(tmp_path / "x.npy", np.zeros((BATCH, SIZES[0]), np.float32))
    np.save(tmp_path / "y.npy", np.full(BATCH, SIZES[-1], np.float32))  # label out of range
    r = train(layers, f"--batch={BATCH}", f"--data-dir={tmp_path}", "--backend=cpu")
    assert r.returncode == 2 and "y.npy" in r.stderr


CLANG = shutil.which("clang-15") or shutil.which("clang")


@pytest.mark.skipif(CLANG is None, reason="needs clang to check OpenCL C without a device")
@pytest.mark.parametrize("defines", [[], ["-DFARM_FP16"], ["-DFARM_FP16", "-DFARM_HALF_ARITH"]])
def test_kernels_compile_in_every_precision(defines: list[str]) -> None:
    """PoCL here lacks cl_khr_fp16, so the half-arithmetic variant that phones run is only
    type-checked: clang's OpenCL front end with the SPIR target (which has fp16)."""
    source = ROOT / "kernels" / "train" / "train.cl"
    opencl_c = ["-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header", "-target", "spir64"]
    argv = [str(CLANG), *opencl_c, "-fsyntax-only", "-Werror", *defines, str(source)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_verify_checks_every_step_of_a_long_run(train) -> None:
    """Many steps: each checked against a cpu step from the gpu's own weights before it, so a
    near-zero ReLU decision that rounding flips cannot compound over later steps."""
    r = train("--backend=gpu", "--layers=64,48,32,8", "--batch=16", "--steps=30", "--warmup=2", "--verify")
    assert r.returncode == 0, r.stderr
    (result,) = r.of("result")
    assert result["verified"] is True and result["verify_method"] == "stepwise-guided"
    assert result["verify_relu_mismatched"] == 0 and result["verify_replay_max_diff"] == 0
    assert result["mismatches"] == 0 and result["max_abs_err"] < 1e-3


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("weight", r"train: verify: step 0: 1 values differ from the cpu path beyond 0\.001 \(first at 0\)"),
        (
            "activation",
            r"train: verify: \d+ ReLU decisions differ from the cpu path's beyond the rounding bound, "
            r"the first at step 0 \(layer 1, element 0\)",
        ),
    ],
)
def test_verify_catches_one_wrong_value_on_the_device(train, what: str, message: str) -> None:
    """--corrupt writes one wrong weight (after the update) or hidden activation (after the first
    layer's forward) every step: verification must fail with exit 4, naming step and place."""
    r = train(
        "--backend=gpu", "--layers=64,48,32,8", "--batch=16", "--steps=3", "--verify", f"--corrupt={what}"
    )
    assert r.returncode == 4, r.stderr
    assert re.fullmatch(message, r.stderr.strip()), r.stderr
    (result,) = r.of("result")
    assert result["verified"] is False and result["verify_bad_step"] == 0
