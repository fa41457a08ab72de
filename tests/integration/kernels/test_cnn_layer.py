"""The cnn program's single-layer mode (--model=layer) against numpy: every kernel type the sampling
experiment measures, on the cpu path and the gpu path (PoCL), in float64 references written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.integration.kernels.test_cnn import TOL_FP32, _close, cnn, conv, maxpool_ceil  # noqa: F401


def depthwise(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::stride, ::stride]
    return np.maximum(np.einsum("chwij,cij->chw", win, w[:, 0]) + b[:, None, None], 0.0)


CASES = [  # (kind, channels, size, out_channels, kernel, stride, pad)
    ("conv", 5, 13, 7, 3, 2, 1),
    ("conv", 8, 9, 6, 1, 1, 0),  # pointwise
    ("conv", 3, 15, 4, 5, 3, 2),
    ("dwconv", 6, 11, 6, 3, 2, 1),
    ("dwconv", 4, 8, 4, 5, 1, 2),
    ("maxpool", 3, 10, 3, 3, 2, 0),
    ("maxpool", 2, 9, 2, 2, 2, 0),
    ("avgpool", 5, 7, 5, 1, 1, 0),
    ("fc", 6, 4, 9, 4, 1, 0),
    ("add", 4, 6, 4, 1, 1, 0),
]


def reference(kind: str, x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, k: int, s: int, p: int):
    x64 = x.astype(np.float64)
    if kind in ("conv", "fc"):
        assert w is not None and b is not None
        return conv(x64, w.astype(np.float64), b.astype(np.float64), s, p)
    if kind == "dwconv":
        assert w is not None and b is not None
        return depthwise(x64, w.astype(np.float64), b.astype(np.float64), s, p)
    if kind == "maxpool":
        return maxpool_ceil(x64, k, s)
    if kind == "avgpool":
        return x64.mean(axis=(1, 2))
    return 2.0 * x64  # add: the input and its copy


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c))
def test_single_layer_matches_numpy(cnn, tmp_path: Path, backend: str, case: tuple) -> None:  # noqa: F811
    kind, c, n, cout, k, s, p = case
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (c, n, n)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    w = b = None
    if kind in ("conv", "fc", "dwconv"):
        kk = n if kind == "fc" else k
        w = rng.uniform(-0.5, 0.5, (cout, 1 if kind == "dwconv" else c, kk, kk)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        (tmp_path / "w").mkdir()
        np.save(tmp_path / "w" / "layer.weight.npy", w)
        np.save(tmp_path / "w" / "layer.bias.npy", b)
    out = tmp_path / "out.npy"
    r = cnn("--model=layer", f"--layer={kind}", f"--channels={c}", f"--out-channels={cout}", f"--kernel={k}",
            f"--stride={s}", f"--pad={p}", f"--input={tmp_path / 'x.npy'}", f"--backend={backend}",
            "--warmup=0", "--iters=2", f"--dump-output={out}",
            *([f"--weights-dir={tmp_path / 'w'}"] if w is not None else []))  # fmt: skip
    assert r.returncode == 0, r.stderr
    _close(np.load(out), reference(kind, x, w, b, k, s, p), TOL_FP32)
    (layer,) = r.of("layer")
    assert layer["name"] == "layer"
    assert layer["kind"] == {"fc": "conv"}.get(kind, kind)
    assert layer["time_ns"] > 0


def test_single_layer_verify_on_gpu_and_bad_kind(cnn) -> None:  # noqa: F811
    r = cnn("--model=layer", "--layer=dwconv", "--channels=16", "--input-size=20", "--kernel=3", "--stride=2",
            "--pad=1", "--backend=gpu", "--verify", "--warmup=0", "--iters=1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.of("result")[0]["verified"] is True
    bad = cnn(
        "--model=layer", "--layer=conv", "--channels=3", "--input-size=2", "--kernel=5", "--backend=cpu"
    )
    assert bad.returncode == 2
    assert "too small" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
