"""The `lstm` benchmark binary against a numpy LSTM that reads the same .npy weights.

Layout (kernels/README.md): lstm{l}_kernel.npy (D_l + H, 4H) with gate blocks i, f, g, o along
the columns, lstm{l}_bias.npy (4H,), dense_kernel.npy (H, classes), dense_bias.npy (classes,),
inputs (batch, seq_len, input_dim). Tolerance on logits: fp32 1e-4 abs + 1e-3 rel; fp16 storage
(weights and inputs rounded to half, fp32 state) against the unrounded float64 model: 2e-2 abs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

BACKENDS = ["cpu", "cpu-mt", "gpu"]
# (backend, extra args): both GPU strategies must compute the same network
VARIANTS = [("cpu", []), ("cpu-mt", []), ("gpu", ["--gpu-kernel=fused"]), ("gpu", ["--gpu-kernel=step"]),
            ("gpu", ["--gpu-kernel=fused", "--wg=16"]), ("gpu", ["--gpu-kernel=persist"]),
            ("gpu", ["--gpu-kernel=persist", "--wg=8", "--ks=3"])]  # fmt: skip
# persist --wg=8 --ks=3: hidden 45 leaves a partial chunk of units and 3 slices share the 4 gates' sums


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(weights: dict[str, np.ndarray], x: np.ndarray, layers: int) -> np.ndarray:
    batch, seq_len, _ = x.shape
    hidden = weights["lstm0_bias"].shape[0] // 4
    h = [np.zeros((batch, hidden)) for _ in range(layers)]
    c = [np.zeros((batch, hidden)) for _ in range(layers)]
    for t in range(seq_len):
        inp = x[:, t, :].astype(np.float64)
        for layer in range(layers):
            z = np.concatenate([inp, h[layer]], axis=1) @ weights[f"lstm{layer}_kernel"]
            z += weights[f"lstm{layer}_bias"]
            i, f, g, o = np.split(z, 4, axis=1)
            c[layer] = sigmoid(f) * c[layer] + sigmoid(i) * np.tanh(g)
            h[layer] = sigmoid(o) * np.tanh(c[layer])
            inp = h[layer]
    return h[-1] @ weights["dense_kernel"] + weights["dense_bias"]


def write_model(
    root: Path, *, input_dim: int, hidden: int, layers: int, classes: int, batch: int, seq_len: int, seed: int
) -> tuple[dict[str, np.ndarray], np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    scale = 1.5 / np.sqrt(hidden)  # large enough that gates saturate differently per unit
    weights: dict[str, np.ndarray] = {}
    for layer in range(layers):
        d = input_dim if layer == 0 else hidden
        weights[f"lstm{layer}_kernel"] = rng.uniform(-scale, scale, (d + hidden, 4 * hidden))
        weights[f"lstm{layer}_bias"] = rng.uniform(-scale, scale, 4 * hidden)
    weights["dense_kernel"] = rng.uniform(-scale, scale, (hidden, classes))
    weights["dense_bias"] = rng.uniform(-scale, scale, classes)
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    wdir = root / "weights"
    wdir.mkdir()
    for name, value in weights.items():
        np.save(wdir / f"{name}.npy", value)
    x = rng.uniform(-1, 1, (batch, seq_len, input_dim)).astype(np.float32)
    np.save(root / "x.npy", x)
    args = [
        f"--weights={wdir}", f"--input={root / 'x.npy'}", f"--input-dim={input_dim}", f"--hidden={hidden}",
        f"--layers={layers}", f"--classes={classes}", f"--batch={batch}", f"--seq-len={seq_len}",
    ]  # fmt: skip
    return {k: v.astype(np.float64) for k, v in weights.items()}, x, args


@pytest.mark.parametrize(
    ("backend", "extra"), VARIANTS, ids=lambda v: v if isinstance(v, str) else "-".join(v)
)
@pytest.mark.parametrize(("hidden", "layers", "batch"), [(32, 1, 1), (45, 3, 3)])
def test_logits_match_numpy_lstm(kernel_program, tmp_path, backend, extra, hidden, layers, batch):
    weights, x, args = write_model(
        tmp_path, input_dim=9, hidden=hidden, layers=layers, classes=6, batch=batch, seq_len=24, seed=hidden
    )
    out = tmp_path / "logits.npy"
    run = kernel_program("lstm").run(
        *args,
        f"--backend={backend}",
        *extra,
        "--threads=2",
        "--iters=1",
        "--warmup=0",
        f"--dump-output={out}",
    )
    assert run.returncode == 0, run.stderr
    got = np.load(out)
    assert got.shape == (batch, 6)
    np.testing.assert_allclose(got, numpy_lstm(weights, x, layers), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fp16_storage_within_looser_tolerance(kernel_program, tmp_path, backend):
    weights, x, args = write_model(
        tmp_path, input_dim=9, hidden=40, layers=2, classes=6, batch=2, seq_len=16, seed=5
    )
    out = tmp_path / "logits.npy"
    run = kernel_program("lstm").run(
        *args, f"--backend={backend}", "--precision=fp16", "--iters=1", "--warmup=0", f"--dump-output={out}"
    )
    assert run.returncode == 0, run.stderr
    ref = numpy_lstm(weights, x, 2)
    got = np.load(out)
    np.testing.assert_allclose(got, ref, atol=2e-2)
    assert not np.allclose(got, ref, atol=1e-7, rtol=0)  # the half rounding did happen


def test_gpu_verify_and_default_mobirnn_shape(kernel_program):
    prog = kernel_program("lstm")
    run = prog.run("--backend=gpu", "--iters=1", "--warmup=0", "--verify", "--layers=2", "--gpu-kernel=step")
    assert run.returncode == 0, run.stderr
    info, result = run.one("info"), run.one("result")
    assert (info["seq_len"], info["input_dim"], info["classes"], info["hidden"]) == (128, 9, 6, 32)
    # one cell launch per (step, layer) plus the dense layer: never one per gate or element
    assert info["launches_per_inference"] == 128 * 2 + 1
    fused = prog.run(
        "--backend=gpu", "--iters=1", "--warmup=0", "--verify", "--layers=2", "--gpu-kernel=fused"
    )
    assert fused.one("info")["launches_per_inference"] == 1
    assert fused.one("result")["verify"] == "passed"
    persist = prog.run(
        "--backend=gpu", "--iters=1", "--warmup=0", "--verify", "--layers=2", "--gpu-kernel=persist", "--ks=2"
    )
    assert persist.returncode == 0, persist.stderr
    assert (persist.one("info")["launches_per_inference"], persist.one("info")["ks"]) == (1, 2)
    assert persist.one("result")["verify"] == "passed"
    assert result["verify"] == "passed"
    it = run.one("iter")
    assert it["kernel_ns"] > 0 and it["h2d_ns"] > 0 and it["d2h_ns"] > 0


def test_seeded_runs_are_reproducible_across_backends(kernel_program, tmp_path):
    prog = kernel_program("lstm")
    outs = []
    for backend in BACKENDS:
        out = tmp_path / f"{backend}.npy"
        run = prog.run(f"--backend={backend}", "--seed=42", "--hidden=64", "--seq-len=32", "--iters=1",
                       f"--dump-output={out}")  # fmt: skip
        assert run.returncode == 0, run.stderr
        outs.append(np.load(out))
    for other in outs[1:]:
        np.testing.assert_allclose(other, outs[0], rtol=1e-3, atol=1e-5)
    different_seed = tmp_path / "seed43.npy"
    prog.run("--backend=cpu", "--seed=43", "--hidden=64", "--seq-len=32", "--iters=1",
             f"--dump-output={different_seed}")  # fmt: skip
    assert not np.allclose(np.load(different_seed), outs[0])


# grid spreads each layer's units over work-groups that meet at a barrier across the grid, one
# per compute unit at most (PoCL here: 2). (45, 3, 1): a 3-layer pipeline over 2 groups of 23 and
# 22 units; (45, 2, 2): one group per batch element; --wg=16 --ks=3 at hidden 64: 32 units per
# group in two chunks of 16 lanes, 3 slices sharing the 4 gates' sums.
@pytest.mark.parametrize(
    ("hidden", "layers", "batch", "extra"),
    [(45, 3, 1, []), (45, 2, 2, []), (64, 2, 1, ["--wg=16", "--ks=3"])],
    ids=["3-layers", "batch-2", "chunks"],
)
def test_grid_logits_match_numpy_lstm(kernel_program, tmp_path, hidden, layers, batch, extra):
    weights, x, args = write_model(
        tmp_path, input_dim=9, hidden=hidden, layers=layers, classes=6, batch=batch, seq_len=24, seed=hidden
    )
    out = tmp_path / "logits.npy"
    run = kernel_program("lstm").run(
        *args, "--backend=gpu", "--gpu-kernel=grid", *extra, "--iters=2", "--warmup=0", f"--dump-output={out}"
    )
    assert run.returncode == 0, run.stderr
    info = run.one("info")
    assert info["launches_per_inference"] == 1
    # as many groups as chunks of wg units, at most one per compute unit over the batch
    assert info["groups_per_batch_element"] == min(-(-hidden // info["ju"]), info["compute_units"] // batch)
    np.testing.assert_allclose(np.load(out), numpy_lstm(weights, x, layers), rtol=1e-3, atol=1e-4)


def test_grid_refuses_more_batch_elements_than_compute_units(kernel_program):
    run = kernel_program("lstm").run("--backend=gpu", "--iters=1", "--gpu-kernel=grid", "--batch=100000")
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1
    assert "--gpu-kernel=grid: --batch=100000" in run.stderr and "compute units" in run.stderr


def test_persist_beyond_the_work_group_limit_says_what_to_lower(kernel_program):
    too_big = ("--gpu-kernel=persist", "--wg=4096", "--ks=256")
    run = kernel_program("lstm").run("--backend=gpu", "--iters=1", *too_big)
    assert run.returncode == 2
    assert "--gpu-kernel=persist" in run.stderr and "lower --wg or --ks" in run.stderr
    assert "Traceback" not in run.stderr


def test_weight_file_with_wrong_shape_names_the_file(kernel_program, tmp_path):
    _, _, args = write_model(
        tmp_path, input_dim=9, hidden=16, layers=1, classes=6, batch=1, seq_len=4, seed=1
    )
    run = kernel_program("lstm").run(*[a for a in args if not a.startswith("--hidden")], "--hidden=17")
    assert run.returncode == 2
    line = run.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "lstm0_kernel.npy" in line and "expected shape (26, 68)" in line


def test_fp16_reports_half_storage_and_whether_the_device_has_half_arithmetic(kernel_program):
    prog = kernel_program("lstm")
    devices = {d["name"]: d["fp16"] for d in prog.run("--list-devices").of("device")}
    run = prog.run("--backend=gpu", "--precision=fp16", "--iters=1", "--warmup=0", "--seq-len=4")
    assert run.returncode == 0, run.stderr
    info = run.one("info")
    # the same answer as the device list's (clGetDeviceInfo's extension string)
    assert info["cl_khr_fp16"] is devices[info["device"]]
    assert info["precision_mode"] == "fp16-storage"
