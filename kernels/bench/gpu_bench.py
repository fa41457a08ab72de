#!/usr/bin/env python3
"""farm's OpenCL kernels against CLBlast and cuBLAS on whatever OpenCL GPU this machine has.

For people with a desktop GPU (and for the note of issue 15); CI never runs it, nothing depends
on it. Standard library only; torch is used for the cuBLAS column when it is importable with CUDA.

    make -C kernels && make -C kernels bench        # bench/clblast_gemm needs libclblast-dev
    python3 kernels/bench/gpu_bench.py [--out results.json] [--tune-budget-s 40] [--quick]

Prints, all kernel times from OpenCL event profiling (cuBLAS: CUDA events), fp32, same run:
  1. GEMM n = 1024, 2048, 4096: farm `gemm --kernel=local` (defaults, and after --tune), CLBlast
     SGEMM, cuBLAS fp32 with TF32 off;
  2. SqueezeNet 1.0 / 1.1: the whole inference (wall) against the sum of its layer kernels (fused
     fire expand pairs and not, tuned and not, clFlush policies); each fused expand pair against
     the gemm program on its two shapes; each conv layer run apart against the gemm program's
     kernel time for its im2col shape (m, n, k), defaults against defaults and cnn --tune against
     gemm --tune;
  3. train 784-1024-1024-16 batch 256 (resident): kernel time per step (defaults, --tune, the
     simple kernels), against torch's same SGD step, cuBLAS on its GEMMs and the peak fp32 rate;
  4. lstm 2 layers x 128 steps at hidden 128 and 512: kernel and wall time per inference for the
     step, fused, unsplit wave, split wave (default) and --tune choices, against a roofline (peak
     fp32 rate, bytes at copy bandwidth) and the launch floor (launches x a near-empty launch);
  5. fp16 (half arithmetic where the device has cl_khr_fp16): cnn, train and gemm verified against
     their cpu paths, with the tolerance each program states;
  6. `--sections=gather`: the im2col gathers against each other (`--gather=arith|window`,
     defaults, layers run apart and fused), interleaved rounds, each gathering layer's median over
     the rounds against the gemm program on its im2col shape.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch_ref  # this folder is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / platform.machine()
SIZES = (1024, 2048, 4096)


def run(
    prog: str, *args: str, cache: Path, timeout: float = 600, binary: Path | None = None
) -> list[dict[str, Any]]:
    """One run of a kernels/ program (or of `binary`, another build of it) as parsed events."""
    argv = [str(binary or BUILD / prog), *args, f"--cl-cache={cache}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()[:400]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def one(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(e for e in events if e["event"] == kind)


def gpu_selector(cache: Path) -> str:
    devices = [e for e in run("gemm", "--list-devices", cache=cache) if e["event"] == "device"]
    gpus = [d for d in devices if d["type"] == "gpu"]
    if not gpus:
        raise SystemExit(f"no OpenCL GPU among {[d['name'] for d in devices]}")
    return gpus[0]["index"]


def cublas_ms(n: int) -> float | None:
    torch = torch_ref.cuda_torch()
    if torch is None:
        return None
    a = torch.rand(n, n, device="cuda") * 2 - 1
    b = torch.rand(n, n, device="cuda") * 2 - 1
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def torch_train_ms(sizes: list[int], batch: int) -> float | None:
    torch = torch_ref.cuda_torch()
    if torch is None:
        return None
    net, opt, x, y, loss_fn = torch_ref.mlp_problem(sizes, batch)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def torch_train_gemms_ms(sizes: list[int], batch: int) -> float | None:
    """cuBLAS (TF32 off) on exactly the GEMMs of one farm train step: per layer X W^T, dY W
    (not for the first layer) and dY^T X; the sum of their median times."""
    torch = torch_ref.cuda_torch()
    if torch is None:
        return None
    total = 0.0
    for layer in range(len(sizes) - 1):
        nin, nout = sizes[layer], sizes[layer + 1]
        x, w = torch.rand(batch, nin, device="cuda"), torch.rand(nout, nin, device="cuda")
        dy = torch.rand(batch, nout, device="cuda")
        ops = [lambda x=x, w=w: x @ w.t(), lambda x=x, dy=dy: dy.t() @ x]
        if layer > 0:
            ops.append(lambda w=w, dy=dy: dy @ w)
        for op in ops:
            for _ in range(3):
                op()
            times = []
            for _ in range(20):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                op()
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            total += sorted(times)[len(times) // 2]
    return total


def peaks() -> dict[str, float]:
    """Measured ceilings through torch when present: fp32 GEMM TFLOPS (TF32 off), copy GB/s."""
    torch = torch_ref.cuda_torch()
    if torch is None:
        return {}
    n = 8192
    a, b = torch.rand(n, n, device="cuda"), torch.rand(n, n, device="cuda")
    a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        a @ b
    torch.cuda.synchronize()
    tflops = 5 * 2 * n**3 / (time.perf_counter() - t0) / 1e12
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    y.copy_(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        y.copy_(x)
    torch.cuda.synchronize()
    gbs = 10 * 2 * x.numel() / (time.perf_counter() - t0) / 1e9
    return {"fp32_gemm_tflops": tflops, "copy_gbs": gbs, "device": torch.cuda.get_device_name()}


def gemm_section(dev: str, cache: Path, budget: float, out: dict[str, Any], sizes: tuple[int, ...]) -> None:
    rows = []
    for n in sizes:
        common = [f"--cl-device={dev}", f"--m={n}", f"--n={n}", f"--k={n}", "--transfers=once", "--iters=10"]
        flop = 2.0 * n**3
        default = one(run("gemm", *common, "--tuned=ignore", cache=cache), "result")
        tuned_ev = run("gemm", *common, "--tune", f"--tune-budget-s={budget}", cache=cache)
        tuned, info = one(tuned_ev, "result"), one(tuned_ev, "info")
        row: dict[str, Any] = {
            "n": n,
            "farm_default_tflops": flop / default["median_kernel_ms"] / 1e9,
            "farm_tuned_tflops": flop / tuned["median_kernel_ms"] / 1e9,
            "tuned_params": info["tune_params"],
            "tune_candidates": info.get("tune_candidates"),
        }
        if (BUILD / "bench" / "clblast_gemm").exists():
            cb = one(
                run(
                    "bench/clblast_gemm",
                    f"--cl-device={dev}",
                    f"--n={n}",
                    "--iters=5",
                    "--calls=10",
                    cache=cache,
                ),
                "result",
            )
            row["clblast_tflops"] = cb["gflops_calls"] / 1e3
        ms = cublas_ms(n)
        if ms:
            row["cublas_tflops"] = flop / ms / 1e9
        rows.append(row)
        print(json.dumps(row), flush=True)
    out["gemm"] = rows
    print(
        "\nGEMM fp32 TFLOPS (kernel time)\n"
        "| n | farm default | farm tuned | CLBlast | cuBLAS | tuned params |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['n']} | {r['farm_default_tflops']:.1f} | {r['farm_tuned_tflops']:.1f} | "
            f"{r.get('clblast_tflops', float('nan')):.1f} | {r.get('cublas_tflops', float('nan')):.1f} | "
            f"{r['tuned_params']} |"
        )


def gemm_kernel_ms(
    dev: str, cache: Path, mnk: tuple[int, int, int], precision: str, tune_budget: float
) -> tuple[float, float]:
    """The gemm program's kernel time for one shape (median, and the fastest iteration's wall time,
    which on a shared CPU device is the better estimate of a quiet machine): its defaults, or after
    --tune when tune_budget > 0."""
    m, n, k = mnk
    tune = ["--tune", f"--tune-budget-s={tune_budget}"] if tune_budget > 0 else ["--tuned=ignore"]
    ev = run(
        "gemm",
        f"--cl-device={dev}",
        f"--m={m}",
        f"--n={n}",
        f"--k={k}",
        "--transfers=once",
        "--iters=20",
        f"--precision={precision}",
        *tune,
        cache=cache,
    )
    result = one(ev, "result")
    return float(result["median_kernel_ms"]), float(result["min_ms"])


CNN_RUNS = (  # mode, fused?, arguments; the tuned runs after "tuned" read what it stored
    ("default", True, ["--tuned=ignore"]),
    ("tuned", True, ["--tune"]),
    ("default unfused", False, ["--tuned=ignore", "--fuse-expand=0"]),
    ("tuned unfused", False, ["--fuse-expand=0"]),
    ("default flush=0", True, ["--tuned=ignore", "--flush-every=0"]),
    ("default flush=1", True, ["--tuned=ignore", "--flush-every=1"]),
)


def cnn_section(
    dev: str,
    cache: Path,
    out: dict[str, Any],
    tune_budget: float,
    gemm_tune_budget: float,
    precision: str = "fp32",
) -> None:
    """Each conv layer (run apart: --fuse-expand=0) against the gemm kernel on its im2col shape,
    defaults against defaults and cnn --tune (per layer) against gemm --tune (per shape); each fused
    fire expand pair (one launch) against the two GEMMs of its shapes; every run's whole inference
    (wall) against the sum of its layer kernels."""
    gemm_ms: dict[tuple[tuple[int, int, int], bool], tuple[float, float]] = {}

    def gemm_of(shape: tuple[int, int, int], tuned: bool) -> tuple[float, float]:
        if (shape, tuned) not in gemm_ms:
            budget = gemm_tune_budget if tuned else 0.0
            gemm_ms[(shape, tuned)] = gemm_kernel_ms(dev, cache, shape, precision, budget)
        return gemm_ms[(shape, tuned)]

    for model in ("squeezenet1.0", "squeezenet1.1"):
        runs = {}
        for mode, _fused, extra in CNN_RUNS:
            tune = [f"--tune-budget-s={tune_budget}"] if "--tune" in extra else []
            runs[mode] = run(
                "cnn",
                f"--cl-device={dev}",
                f"--model={model}",
                f"--precision={precision}",
                "--iters=30",
                "--verify",
                *extra,
                *tune,
                cache=cache,
            )
        rows = []
        for mode in ("default unfused", "tuned unfused"):
            for layer in (e for e in runs[mode] if e["event"] == "layer" and e["kind"] == "conv"):
                shape = (layer["gemm_m"], layer["gemm_n"], layer["gemm_k"])
                g_med, g_min = gemm_of(shape, mode.startswith("tuned"))
                rows.append(
                    {
                        "mode": mode.split()[0],
                        "layer": layer["name"],
                        "mnk": shape,
                        "conv_ms": layer["time_ns"] / 1e6,
                        "gemm_ms": g_med,
                        "ratio": layer["time_ns"] / 1e6 / g_med,
                        "conv_min_ms": layer["min_ns"] / 1e6,
                        "gemm_min_ms": g_min,
                        "ratio_min": layer["min_ns"] / 1e6 / g_min,
                        "params": layer.get("gemm_params"),
                    }
                )
        pairs = []
        for mode in ("default", "tuned"):
            layers = {e["name"]: e for e in runs[mode] if e["event"] == "layer"}
            for name, e in layers.items():
                if not name.endswith("expand3x3") or "fused_with" not in e:
                    continue
                one_by_one = layers[e["fused_with"]]
                shapes = [(x["gemm_m"], x["gemm_n"], x["gemm_k"]) for x in (one_by_one, e)]
                two = sum(gemm_of(sh, mode == "tuned")[0] for sh in shapes)
                pairs.append(
                    {
                        "mode": mode,
                        "pair": name.split("/")[0],
                        "shapes": shapes,
                        "fused_ms": e["fused_ns"] / 1e6,
                        "two_gemms_ms": two,
                        "ratio": e["fused_ns"] / 1e6 / two,
                        "params": e.get("gemm_params"),
                    }
                )
        summaries = []
        for mode, ev in runs.items():
            result, info = one(ev, "result"), one(ev, "info")
            layers = [e for e in ev if e["event"] == "layer"]
            kernel_sum = sum(layer["time_ns"] for layer in layers) / 1e6
            summaries.append(
                {
                    "model": model,
                    "mode": mode,
                    "precision": precision,
                    "verified": result.get("verified"),
                    "launches": info.get("launches_per_inference"),
                    "wall_median_ms": result["median_ms"],
                    "kernel_sum_ms": kernel_sum,
                    "median_kernel_ms": result["median_kernel_ms"],
                    "h2d_ms": result["median_h2d_ms"],
                    "host_enqueue_ms": result.get("median_host_enqueue_ms"),
                    "host_collect_ms": result.get("median_host_collect_ms"),
                    "wall_over_kernels": result["median_ms"] / kernel_sum,
                    "tune_seconds": info.get("tune_seconds"),
                }
            )
        out.setdefault("cnn", []).append({"summaries": summaries, "layers": rows, "fused_pairs": pairs})
        print(f"\n{model} {precision}: whole inference, wall against the sum of its layer kernels")
        print(
            "| run | launches | wall ms | kernels ms | wall / kernels | h2d ms | host enqueue+wait ms "
            "| host events ms | verified |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for sm in summaries:
            print(
                f"| {sm['mode']} | {sm['launches']} | {sm['wall_median_ms']:.3f} | "
                f"{sm['kernel_sum_ms']:.3f} | "
                f"{sm['wall_over_kernels']:.2f} | {sm['h2d_ms']:.4f} | {sm['host_enqueue_ms']:.3f} | "
                f"{sm['host_collect_ms']:.3f} | {sm['verified']} |"
            )
        print(f"\n{model}: fused fire expand pairs (one launch) against the two GEMMs of their shapes")
        print("| fire | mode | expand1x1 + expand3x3 (m x n x k) | fused ms | two gemms ms | ratio |")
        print("|---|---|---|---|---|---|")
        for p in pairs:
            sh = " + ".join("x".join(map(str, x)) for x in p["shapes"])
            print(
                f"| {p['pair']} | {p['mode']} | {sh} | {p['fused_ms']:.4f} | {p['two_gemms_ms']:.4f} | "
                f"{p['ratio']:.2f} |"
            )
        print(f"\n{model}: each conv layer run apart (--fuse-expand=0) against the gemm kernel on its shape")
        print(
            "| layer | m x n x k | conv ms (default) | gemm ms | ratio | conv ms (tuned) | gemm ms (tuned) "
            "| ratio |"
        )
        print("|---|---|---|---|---|---|---|---|")
        tuned = {r["layer"]: r for r in rows if r["mode"] == "tuned"}
        for r in (r for r in rows if r["mode"] == "default"):
            m, n, k = r["mnk"]
            t = tuned[r["layer"]]
            print(
                f"| {r['layer']} | {m}x{n}x{k} | {r['conv_ms']:.4f} | {r['gemm_ms']:.4f} | "
                f"{r['ratio']:.2f} | "
                f"{t['conv_ms']:.4f} | {t['gemm_ms']:.4f} | {t['ratio']:.2f} |"
            )
        best_of = (
            f"{r['layer']}={r['ratio_min']:.2f},{tuned[r['layer']]['ratio_min']:.2f}"
            for r in rows
            if r["mode"] == "default"
        )
        print("best-of ratios (fastest iteration of each; default, tuned): " + "; ".join(best_of))
        print("tuned per layer: " + "; ".join(f"{r['layer']}={r['params']}" for r in tuned.values()))
        tries: dict[str, int] = {}
        for e in (e for e in runs["tuned"] if e["event"] == "tune"):
            tries[e["workload"]] = tries.get(e["workload"], 0) + 1
        info = one(runs["tuned"], "info")
        print(
            f"tuner: {info.get('tune_seconds')} s, candidates tried per layer shape: "
            + "; ".join(f"{w.split(' window')[0]}: {n}" for w, n in tries.items())
        )
        out["cnn"][-1]["tune_tries"] = tries


def train_section(
    dev: str, cache: Path, out: dict[str, Any], pk: dict[str, float], tune_budget: float
) -> None:
    sizes, batch = [784, 1024, 1024, 16], 256
    rows = []
    for fc, extra in (
        # --verify checks every step against a cpu step from the same weights, ReLU decisions within
        # the rounding bound taken from the gpu (kernels/train/README.md)
        ("tiled", ["--tuned=ignore", "--verify"]),
        ("tiled", ["--tune", f"--tune-budget-s={tune_budget}", "--verify"]),
        ("simple", []),
    ):
        ev = run(
            "train",
            f"--cl-device={dev}",
            f"--layers={','.join(map(str, sizes))}",
            f"--batch={batch}",
            "--buffers=resident",
            "--steps=20",
            f"--fc-kernel={fc}",
            *extra,
            cache=cache,
        )
        r, info = one(ev, "result"), one(ev, "info")
        rows.append(
            {
                "fc_kernel": fc + (" tuned" if "--tune" in extra else ""),
                "kernel_ms": r["median_kernel_ms"],
                "wall_ms": r["median_ms"],
                "flops": info["flops_per_step"],
                "params": info.get("tune_params"),
                "verified": r.get("verified"),
                "relu_ambiguous": r.get("verify_relu_ambiguous"),
                "max_abs_err": r.get("max_abs_err"),
            }
        )
    torch_ms = torch_train_ms(sizes, batch)
    gemms_ms = torch_train_gemms_ms(sizes, batch)
    out["train"] = {"rows": rows, "torch_step_ms": torch_ms, "cublas_gemms_ms": gemms_ms, "peaks": pk}
    print("\ntrain 784-1024-1024-16 b256 resident, per step")
    for r in rows:
        tf = r["flops"] / r["kernel_ms"] / 1e9
        roof = r["flops"] / (pk["fp32_gemm_tflops"] * 1e9) if pk else float("nan")
        print(
            f"  {r['fc_kernel']}: kernels {r['kernel_ms']:.4f} ms ({tf:.2f} TFLOPS), "
            f"wall {r['wall_ms']:.4f} ms, "
            f"roofline (peak fp32 GEMM rate) {roof:.4f} ms; verified {r['verified']} "
            f"(ReLU decisions within the rounding bound: {r['relu_ambiguous']}, "
            f"max abs err {r['max_abs_err']}); "
            f"{r['params'] or ''}"
        )
    best = min(r["kernel_ms"] for r in rows[:2])
    if torch_ms:
        print(
            f"  torch (cuBLAS) same step: {torch_ms:.4f} ms; "
            f"farm best / torch throughput {torch_ms / best:.2f}"
        )
    if gemms_ms:
        print(
            f"  cuBLAS on the step's GEMM shapes alone: {gemms_ms:.4f} ms; "
            "farm's kernels (default, tuned) reach "
            f"{gemms_ms / rows[0]['kernel_ms']:.2f}, {gemms_ms / rows[1]['kernel_ms']:.2f} of that throughput"
        )


def lstm_flops_bytes(
    hidden: int, layers: int, seq_len: int, input_dim: int = 9, classes: int = 6
) -> tuple[float, float]:
    """FLOPs of one inference (2 per multiply-add) and the fewest bytes it must read (weights once, fp32)."""
    weights = sum((input_dim if layer == 0 else hidden) + hidden for layer in range(layers)) * 4 * hidden
    flops = 2.0 * weights * seq_len + 2.0 * hidden * classes
    return flops, 4.0 * (weights + 4 * hidden * layers + hidden * classes + seq_len * input_dim)


def lstm_section(
    dev: str, cache: Path, out: dict[str, Any], pk: dict[str, float], tune_budget: float
) -> None:
    rows = []
    base = ["--layers=2", "--seq-len=128", "--iters=20", "--verify"]
    floor = one(
        run(
            "lstm",
            f"--cl-device={dev}",
            "--hidden=1",
            "--input-dim=1",
            "--classes=1",
            "--layers=1",
            "--seq-len=256",
            "--gpu-kernel=wave",
            "--ks=1",
            "--iters=20",
            cache=cache,
        ),
        "result",
    )
    launch_kernel_us, launch_wall_us = 1e3 * floor["median_kernel_ms"] / 257, 1e3 * floor["median_ms"] / 257
    for hidden in (128, 512):
        for label, args in (
            ("step", ["--gpu-kernel=step"]),
            ("fused", ["--gpu-kernel=fused"]),
            ("wave ks=1", ["--gpu-kernel=wave", "--ks=1"]),
            ("default", ["--tuned=ignore"]),
            ("tuned", ["--tune", f"--tune-budget-s={tune_budget}"]),
        ):
            try:
                ev = run("lstm", f"--cl-device={dev}", f"--hidden={hidden}", *base, *args, cache=cache)
            except RuntimeError as err:
                print(f"  lstm {label} H={hidden}: {err}")
                continue
            r, info = one(ev, "result"), one(ev, "info")
            rows.append(
                {
                    "hidden": hidden,
                    "kernel": label,
                    "params": info.get("tune_params"),
                    "kernel_ms": r["median_kernel_ms"],
                    "wall_ms": r["median_ms"],
                    "launches": info["launches_per_inference"],
                    "verify": r["verify"],
                }
            )
    out["lstm"] = {
        "rows": rows,
        "launch_floor_kernel_us": launch_kernel_us,
        "launch_floor_wall_us": launch_wall_us,
    }
    print(
        f"\nlstm 2 layers x 128 steps, batch 1 (a near-empty launch: {launch_kernel_us:.1f} us kernel, "
        f"{launch_wall_us:.1f} us wall)"
    )
    print(
        "| H | kernel | params | launches | kernel ms | wall ms | roofline ms (flops, bytes) "
        "| launch floor ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        flops, nbytes = lstm_flops_bytes(r["hidden"], 2, 128)
        roof = (
            f"{flops / (pk['fp32_gemm_tflops'] * 1e9):.4f}, {nbytes / (pk['copy_gbs'] * 1e6):.4f}"
            if pk
            else "n/a"
        )
        print(
            f"| {r['hidden']} | {r['kernel']} | {r['params']} | {r['launches']} | {r['kernel_ms']:.3f} | "
            f"{r['wall_ms']:.3f} | {roof} | {r['launches'] * launch_kernel_us / 1e3:.3f} |"
        )


def fp16_section(dev: str, cache: Path, out: dict[str, Any]) -> None:
    rows = []
    checks = [
        ("gemm", ["--m=1024", "--n=1024", "--k=1024", "--precision=fp16", "--verify", "--iters=5"]),
        ("cnn", ["--precision=fp16", "--verify", "--iters=5"]),
        (
            "train",
            [
                "--layers=784,1024,1024,16",
                "--batch=256",
                "--buffers=resident",
                "--precision=fp16",
                "--verify",
                "--steps=5",
            ],
        ),
    ]
    for prog, args in checks:
        try:
            ev = run(prog, f"--cl-device={dev}", *args, cache=cache)
            info, r = one(ev, "info"), one(ev, "result")
            rows.append(
                {
                    "program": prog,
                    "precision_mode": info.get("precision_mode"),
                    "verify": r.get("verify", r.get("verified")),
                    "max_abs_err": r.get("max_abs_err"),
                    "kernel_ms": r.get("median_kernel_ms"),
                }
            )
        except RuntimeError as err:
            rows.append({"program": prog, "error": str(err)})
    out["fp16"] = rows
    print("\nfp16")
    for r in rows:
        print("  " + json.dumps(r))


def gather_section(
    dev: str,
    cache: Path,
    out: dict[str, Any],
    rounds: int,
    gather_names: list[str],
    iters: int = 30,
    baseline: Path | None = None,
) -> None:
    """Each gathering conv layer (k > 1) and fused pair under each gather, defaults, `rounds`
    interleaved rounds (the medians of single runs swing by 10-20% on a GPU shared by nobody
    else, more on PoCL): per layer the median over rounds of its per-run median kernel time, and
    the gemm program on its im2col shape once per round too (its medians swing as much).
    `baseline`: another build of cnn (an earlier revision), run with each gather in the same
    rounds, its columns labelled "<gather> base"."""
    variants = [(g, g, None) for g in gather_names]
    if baseline is not None:
        variants += [(f"{g} base", g, baseline) for g in gather_names]
    gathers = [label for label, _, _ in variants]
    for model in ("squeezenet1.0", "squeezenet1.1"):
        conv: dict[tuple[str, str], list[float]] = {}
        fused: dict[tuple[str, str], list[float]] = {}
        shapes: dict[str, tuple[int, int, int]] = {}
        walls: dict[tuple[str, bool], list[float]] = {}
        gemm_ms: dict[tuple[int, int, int], list[float]] = {}
        for _ in range(rounds):
            for shape in sorted(set(shapes.values())):  # known after the first round's runs
                gemm_ms.setdefault(shape, []).append(gemm_kernel_ms(dev, cache, shape, "fp32", 0.0)[0])
            for gather, gather_arg, binary in variants:
                for fuse in (False, True):
                    ev = run(
                        "cnn",
                        f"--cl-device={dev}",
                        f"--model={model}",
                        f"--iters={iters}",
                        "--verify",
                        "--tuned=ignore",
                        f"--gather={gather_arg}",
                        f"--fuse-expand={int(fuse)}",
                        cache=cache,
                        binary=binary,
                    )
                    if one(ev, "result").get("verified") is not True:
                        raise SystemExit(f"cnn {model} {gather} did not verify")
                    walls.setdefault((gather, fuse), []).append(float(one(ev, "result")["median_ms"]))
                    for layer in (e for e in ev if e["event"] == "layer" and e["kind"] == "conv"):
                        if fuse and "fused_ns" in layer and layer["name"].endswith("expand3x3"):
                            fused.setdefault((layer["name"], gather), []).append(layer["fused_ns"] / 1e6)
                        elif not fuse and ("3x3" in layer["name"] or layer["name"] == "conv1"):
                            shapes[layer["name"]] = (layer["gemm_m"], layer["gemm_n"], layer["gemm_k"])
                            conv.setdefault((layer["name"], gather), []).append(layer["time_ns"] / 1e6)
        for shape in set(shapes.values()):  # the first round's gemm runs
            while len(gemm_ms.setdefault(shape, [])) < rounds:
                gemm_ms[shape].append(gemm_kernel_ms(dev, cache, shape, "fp32", 0.0)[0])
        median = statistics.median
        print(
            f"\n{model}: conv1 and the 3x3 layers run apart, median over {rounds} rounds (ms, ratio to gemm)"
        )
        print("| layer | m x n x k | gemm ms | " + " | ".join(f"{g} ms | {g} ratio" for g in gathers) + " |")
        print("|---|---|---|" + "---|---|" * len(gathers))
        rows = []
        for name, shape in shapes.items():
            g = median(gemm_ms[shape])
            cells = [(median(conv[(name, gather)]), median(conv[(name, gather)]) / g) for gather in gathers]
            rows.append(
                {
                    "model": model,
                    "layer": name,
                    "mnk": shape,
                    "gemm_ms": g,
                    "conv_ms": dict(zip(gathers, cells, strict=True)),
                }
            )
            text = " | ".join(f"{c:.4f} | {r:.2f}" for c, r in cells)
            print(f"| {name} | {'x'.join(map(str, shape))} | {g:.4f} | {text} |")
        print(f"\n{model}: fused expand pairs, median over rounds (ms)")
        print("| pair | " + " | ".join(gathers) + " |")
        print("|---|" + "---|" * len(gathers))
        for name in sorted({n for n, _ in fused}):
            print(f"| {name} | " + " | ".join(f"{median(fused[(name, gt)]):.4f}" for gt in gathers) + " |")
        print(f"\n{model}: whole inference wall ms, median over rounds")
        for (gather, fuse), values in sorted(walls.items()):
            print(f"  {gather} {'fused' if fuse else 'unfused'}: {median(values):.4f}")
        out.setdefault("gather", []).append(
            {"layers": rows, "fused": {f"{n} {g}": v for (n, g), v in fused.items()}}
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="write every number as JSON here")
    ap.add_argument("--tune-budget-s", type=float, default=40.0, help="gemm --tune budget per size")
    ap.add_argument("--quick", action="store_true", help="GEMM at 1024 only, no fp16 checks")
    ap.add_argument("--cnn-tune-budget-s", type=float, default=40.0, help="cnn --tune budget per model")
    ap.add_argument(
        "--gemm-shape-tune-budget-s", type=float, default=2.0, help="gemm --tune per conv layer shape"
    )
    ap.add_argument("--small-tune-budget-s", type=float, default=15.0, help="train and lstm --tune budgets")
    ap.add_argument("--sections", default="gemm,cnn,train,lstm,fp16")
    ap.add_argument("--cl-device", default=None, help="OpenCL device P:D (default: the first GPU)")
    ap.add_argument("--gather-rounds", type=int, default=3, help="interleaved rounds of the gather section")
    ap.add_argument("--gathers", default="arith,window", help="gathers the gather section compares")
    ap.add_argument(
        "--cnn-iters", type=int, default=30, help="measured inferences of each gather-section run"
    )
    ap.add_argument(
        "--baseline-cnn",
        type=Path,
        default=None,
        help="gather section: another cnn build (an earlier revision) run in the same rounds",
    )
    args = ap.parse_args()
    cache = Path(os.environ.get("FARM_CL_CACHE") or tempfile.mkdtemp(prefix="farm-gpu-bench-"))
    dev = args.cl_device or gpu_selector(cache)
    out: dict[str, Any] = {"device_index": dev}
    pk = peaks()
    out["peaks"] = pk
    print("peaks:", json.dumps(pk), flush=True)
    sections = set(args.sections.split(","))
    if "gemm" in sections:
        gemm_section(dev, cache, args.tune_budget_s, out, (1024,) if args.quick else SIZES)
    if "cnn" in sections:
        cnn_section(dev, cache, out, args.cnn_tune_budget_s, args.gemm_shape_tune_budget_s)
    if "train" in sections:
        train_section(dev, cache, out, pk, args.small_tune_budget_s)
    if "lstm" in sections:
        lstm_section(dev, cache, out, pk, args.small_tune_budget_s)
    if "gather" in sections:
        gather_section(
            dev, cache, out, args.gather_rounds, args.gathers.split(","), args.cnn_iters, args.baseline_cnn
        )
    if "fp16" in sections and not args.quick:
        fp16_section(dev, cache, out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
