"""The `cnn` benchmark binary against an independent numpy SqueezeNet.

Weights and the input image are written as .npy by the test (kernels/cnn/README.md names and
layouts), the binary dumps the output of the layers it ran (--dump-output), numpy computes the same
layers in float64. Small inputs keep every run well under a second of compute.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / "kernels" / "build" / platform.machine() / "cnn"
INPUT_SIZE = 32  # smallest side where SqueezeNet 1.0/1.1 still end with a 1x1 map

# Tolerances relative to the largest |reference| value of the compared tensor: fp32 paths sum in a
# different order than numpy's float64; fp16 stores every layer's output with 11 significant bits.
TOL_FP32 = 1e-4
TOL_FP16 = 3e-2

FIRE = {  # index -> (squeeze, expand)
    2: (16, 64), 3: (16, 64), 4: (32, 128), 5: (32, 128),
    6: (48, 192), 7: (48, 192), 8: (64, 256), 9: (64, 256),
}  # fmt: skip


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # conv | maxpool | avgpool | fire-end (the concat after expand3x3)
    cin: int = 0
    cout: int = 0
    k: int = 0
    stride: int = 1
    pad: int = 0


def squeezenet_ops(model: str) -> list[Op]:
    """Layer list as the binary names and orders it (one op per `layer` event)."""
    v10 = model == "squeezenet1.0"
    ops = [
        Op("conv1", "conv", 3, 96, 7, 2) if v10 else Op("conv1", "conv", 3, 64, 3, 2),
        Op("pool1", "maxpool"),
    ]
    c = 96 if v10 else 64
    for f, (s, e) in FIRE.items():
        ops += [
            Op(f"fire{f}/squeeze1x1", "conv", c, s, 1),
            Op(f"fire{f}/expand1x1", "conv", s, e, 1),
            Op(f"fire{f}/expand3x3", "conv", s, e, 3, 1, 1),
        ]
        c = 2 * e
        if (v10 and f in (4, 8)) or (not v10 and f in (3, 5)):
            ops.append(Op(f"pool{f}", "maxpool"))
    return [*ops, Op("conv10", "conv", c, 1000, 1), Op("pool10", "avgpool")]


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    return np.maximum(np.einsum("chwij,ocij->ohw", win, w) + b[:, None, None], 0.0)


def maxpool_ceil(x: np.ndarray, k: int = 3, stride: int = 2) -> np.ndarray:
    _, h, w = x.shape
    ho, wo = -(-(h - k) // stride) + 1, -(-(w - k) // stride) + 1
    need_h, need_w = (ho - 1) * stride + k, (wo - 1) * stride + k
    xp = np.pad(x, ((0, 0), (0, need_h - h), (0, need_w - w)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    return win.max(axis=(3, 4))


def reference(
    model: str, x: np.ndarray, params: dict[str, tuple[np.ndarray, np.ndarray]], limit: int
) -> np.ndarray:
    """Output of the first `limit` ops (after an expand1x1: only its maps, as the binary dumps)."""
    x = x.astype(np.float64)
    squeezed = x
    e1 = None
    for op in squeezenet_ops(model)[:limit]:
        if op.kind == "maxpool":
            x = maxpool_ceil(x)
        elif op.kind == "avgpool":
            x = x.mean(axis=(1, 2))
        else:
            w, b = (p.astype(np.float64) for p in params[op.name])
            if op.name.endswith("squeeze1x1"):
                x = squeezed = conv(x, w, b, op.stride, op.pad)
            elif op.name.endswith("expand1x1"):
                x = e1 = conv(squeezed, w, b, op.stride, op.pad)
            elif op.name.endswith("expand3x3"):
                x = np.concatenate([e1, conv(squeezed, w, b, op.stride, op.pad)])
            else:
                x = conv(x, w, b, op.stride, op.pad)
    return x


def make_params(model: str, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    params = {}
    for op in squeezenet_ops(model):
        if op.kind == "conv":
            bound = np.sqrt(6.0 / (op.cin * op.k * op.k))
            w = rng.uniform(-bound, bound, (op.cout, op.cin, op.k, op.k)).astype(np.float32)
            params[op.name] = (w, rng.uniform(-0.1, 0.1, op.cout).astype(np.float32))
    return params


def write_params(params: dict[str, tuple[np.ndarray, np.ndarray]], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, (w, b) in params.items():
        np.save(directory / f"{name.replace('/', '.')}.weight.npy", w)
        np.save(directory / f"{name.replace('/', '.')}.bias.npy", b)


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
def cnn(tmp_path_factory: pytest.TempPathFactory):
    # make is a no-op when the binary is up to date, and rebuilds a stale one
    subprocess.run(["make", "-s", "-C", str(ROOT / "kernels"), f"build/{platform.machine()}/cnn"], check=True)
    cache = tmp_path_factory.mktemp("clcache")

    def run(*args: str, env: dict[str, str] | None = None) -> Run:
        env = {**os.environ, "FARM_CL_CACHE": str(cache), **(env or {})}
        p = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120, env=env)
        events = [json.loads(line, parse_constant=_no_nan) for line in p.stdout.splitlines() if line.strip()]
        return Run(p.returncode, events, p.stderr)

    return run


@pytest.fixture(scope="module", params=["squeezenet1.0", "squeezenet1.1"])
def net(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    model = request.param
    rng = np.random.default_rng(7)
    params = make_params(model, rng)
    d = tmp_path_factory.mktemp(model)
    write_params(params, d / "w")
    x = rng.uniform(0, 1, (3, INPUT_SIZE, INPUT_SIZE)).astype(np.float32)
    np.save(d / "x.npy", x)
    return model, params, x, d


def _close(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    assert got.shape == want.shape
    scale = float(np.abs(want).max())
    assert scale > 0
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


def _infer(cnn, net, tmp_path: Path, *extra: str) -> tuple[Run, np.ndarray]:
    model, _, _, d = net
    out = tmp_path / "out.npy"
    r = cnn(f"--model={model}", f"--weights-dir={d / 'w'}", f"--input={d / 'x.npy'}", "--warmup=0",
            "--iters=1", f"--dump-output={out}", *extra)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r, np.load(out)


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5])  # conv1, pool1, squeeze, expand1x1, fire concat
def test_layers_match_numpy_on_gpu(cnn, net, tmp_path: Path, limit: int) -> None:
    model, params, x, _ = net
    r, got = _infer(cnn, net, tmp_path, "--backend=gpu", f"--layers-limit={limit}")
    _close(got, reference(model, x, params, limit), TOL_FP32)
    layers = r.of("layer")
    assert [e["name"] for e in layers] == [op.name for op in squeezenet_ops(model)[:limit]]


@pytest.mark.parametrize("backend", ["cpu", "cpu-mt", "gpu"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_reduced_network_matches_numpy(cnn, net, tmp_path: Path, backend: str, precision: str) -> None:
    model, params, x, _ = net
    r, got = _infer(cnn, net, tmp_path, f"--backend={backend}", f"--precision={precision}", "--threads=2")
    want = reference(model, x, params, 99)
    _close(got, want, TOL_FP32 if precision == "fp32" else TOL_FP16)
    if precision == "fp16":
        # half storage really happens: not bit-identical to the fp32 result
        assert not np.allclose(got, want, rtol=0, atol=1e-6 * float(np.abs(want).max()))
    (result,) = r.of("result")
    assert result["checksum"] == pytest.approx(float(got.astype(np.float64).sum()), rel=1e-5)
    probs = [t["prob"] for t in result["top5"]]
    assert probs == sorted(probs, reverse=True) and sum(probs) < 1.0
    if precision == "fp32":  # fp16 rounding may reorder near-equal scores
        assert [t["class"] for t in result["top5"]] == list(np.argsort(-want, kind="stable")[:5])


def test_layer_events_carry_time_flops_bytes(cnn, net, tmp_path: Path) -> None:
    model, *_ = net
    r, _ = _infer(cnn, net, tmp_path, "--backend=gpu", "--g=4")
    layers = r.of("layer")
    ops = squeezenet_ops(model)
    assert [e["name"] for e in layers] == [op.name for op in ops]
    conv1 = layers[0]
    out_hw = (INPUT_SIZE - ops[0].k) // ops[0].stride + 1
    assert conv1["flops"] == 2 * ops[0].cout * out_hw * out_hw * 3 * ops[0].k ** 2
    assert all(e["time_ns"] > 0 and e["bytes"] > 0 for e in layers)
    assert {e["g"] for e in layers if e["kind"] == "conv"} == {4}
    (it,) = r.of("iter")
    assert it["kernel_ns"] == pytest.approx(sum(e["time_ns"] for e in layers), rel=1e-6)
    params = sum(op.cout * (op.cin * op.k * op.k + 1) for op in ops if op.kind == "conv")
    assert r.of("info")[0]["weights_bytes"] == 4 * params


def test_granularity_changes_work_split_not_result(cnn, net, tmp_path: Path) -> None:
    _, base = _infer(cnn, net, tmp_path, "--backend=gpu", "--g=1")
    r, got = _infer(cnn, net, tmp_path, "--backend=gpu", "--g=64,conv1:2,fire2/expand3x3:16", "--wg=0")
    _close(got, base, 1e-5)
    assert r.of("info")[0]["wg"] == 0  # driver's choice instead of padded 64-pixel groups
    by_name = {e["name"]: e for e in r.of("layer")}
    assert by_name["conv1"]["g"] == 2
    assert by_name["fire2/expand3x3"]["g"] == 16
    assert by_name["fire2/squeeze1x1"]["g"] == 16  # 64 does not divide 16 maps: largest that does
    assert (by_name["conv10"]["g"], by_name["conv10"]["g_requested"]) == (8, 64)  # 1000 maps


def test_verify_passes_and_reports_error(cnn, net) -> None:
    model, _, _, d = net
    r = cnn(
        f"--model={model}", f"--input={d / 'x.npy'}", "--backend=gpu", "--verify", "--iters=1", "--warmup=0"
    )
    assert r.returncode == 0, r.stderr
    (result,) = r.of("result")
    assert result["verified"] is True and result["mismatches"] == 0
    assert result["max_abs_err"] < 1e-3


def test_non_finite_output_stays_valid_json(cnn, tmp_path: Path) -> None:
    x = np.random.default_rng(1).uniform(0, 1, (3, INPUT_SIZE, INPUT_SIZE)).astype(np.float32)
    x[1, 5, 5] = np.nan
    np.save(tmp_path / "x.npy", x)
    r = cnn(f"--input={tmp_path / 'x.npy'}", "--backend=cpu", "--iters=1", "--warmup=0")
    assert r.returncode == 0, r.stderr
    (result,) = r.of("result")
    assert result["checksum"] is None and {t["prob"] for t in result["top5"]} == {None}


def test_seeded_weights_are_deterministic_and_seed_dependent(cnn) -> None:
    def checksum(seed: int) -> float:
        r = cnn("--backend=cpu", "--input-size=32", f"--seed={seed}", "--iters=1", "--warmup=0")
        assert r.returncode == 0, r.stderr
        return r.of("result")[0]["checksum"]

    assert checksum(1) == checksum(1) != checksum(2)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--bogus=1"], "bogus"),
        (["--model=alexnet"], "model"),
        (["--g=3"], "--g"),
        (["--g=conv1:5"], "--g"),
        (["--g=conv1:64"], "does not divide"),
        (["--g=nolayer:4"], "nolayer"),
        (["--input-size=8"], "too small"),
        (["--weights-dir=/nonexistent"], "conv1.weight.npy"),
        (["--verify", "--backend=cpu"], "verify"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(cnn, args: list[str], needle: str) -> None:
    r = cnn("--input-size=32", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cnn: ") and needle in lines[0]
    assert [e["exit_code"] for e in r.of("error")] == [2] and not r.of("result")


def test_no_opencl_device_exits_3_and_cpu_needs_none(cnn, tmp_path: Path) -> None:
    no_vendors = {"OCL_ICD_VENDORS": str(tmp_path)}
    r = cnn("--backend=gpu", "--input-size=32", "--iters=1", "--warmup=0", env=no_vendors)
    assert r.returncode == 3 and "OpenCL" in r.stderr
    r = cnn("--backend=cpu", "--input-size=32", "--iters=1", "--warmup=0", env=no_vendors)
    assert r.returncode == 0, r.stderr


def test_help_teaches_with_an_example() -> None:
    p = subprocess.run([str(BIN), "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "example:\n  cnn --" in p.stdout and "--precision=S" in p.stdout


def test_weights_of_wrong_shape_are_named(cnn, net, tmp_path: Path) -> None:
    model, params, _, _ = net
    write_params(params, tmp_path)
    np.save(tmp_path / "fire2.squeeze1x1.weight.npy", np.zeros((16, 3, 1, 1), np.float32))
    r = cnn(f"--model={model}", "--input-size=32", f"--weights-dir={tmp_path}", "--backend=cpu")
    assert r.returncode == 2
    assert "fire2.squeeze1x1.weight.npy" in r.stderr and "expected shape" in r.stderr


CLANG = shutil.which("clang-15") or shutil.which("clang")


@pytest.mark.skipif(CLANG is None, reason="needs clang to check OpenCL C without a device")
@pytest.mark.parametrize("defines", [[], ["-DFARM_FP16"], ["-DFARM_FP16", "-DFARM_HALF_ARITH"]])
def test_kernels_compile_in_every_precision(defines: list[str]) -> None:
    """PoCL here lacks cl_khr_fp16, so the half-arithmetic variant that phones run is only
    type-checked: clang's OpenCL front end with the SPIR target (which has fp16)."""
    source = ROOT / "kernels" / "cnn" / "cnn.cl"
    opencl_c = ["-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header", "-target", "spir64"]
    argv = [str(CLANG), *opencl_c, "-fsyntax-only", "-Werror", *defines, str(source)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("cap", [60, 7])
def test_layer_medians_cover_the_measured_inferences_only_in_bounded_memory(cnn, net, cap: int) -> None:
    """A layer's time_ns is the median over the measured inferences (warm-up left out), from at most
    --exact-iterations kept times, then from a log histogram (within half a bin: 0.54%). With one
    layer, each inference's kernel_ns in its `iter` event is that layer's time: the truth."""
    model, _, _, d = net
    r = cnn(f"--model={model}", f"--weights-dir={d / 'w'}", f"--input={d / 'x.npy'}", "--backend=gpu",
            "--layers-limit=1", "--warmup=5", "--iters=60", "--iteration-events=0",
            f"--exact-iterations={cap}")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (layer,) = r.of("layer")
    kernel_ns = np.sort([e["kernel_ns"] for e in r.of("iter")])
    assert layer["iterations"] == len(kernel_ns) == 60
    assert layer["quantiles"] == ("exact" if cap >= 60 else "histogram")
    assert layer["min_ns"] == kernel_ns[0]
    if cap >= 60:
        assert layer["time_ns"] == (kernel_ns[29] + kernel_ns[30]) // 2
    else:
        mid = 2.0 ** ((np.floor(64 * np.log2(kernel_ns[29:31].astype(float))) + 0.5) / 64)
        assert layer["time_ns"] == int(np.floor(mid.mean()))
