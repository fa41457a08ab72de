"""Benchmark: the kernels/ programs on this machine's OpenCL device (PoCL on the CPU here).

GEMM GFLOPS at n = 512, 1024, 2048: farm's gemm (gpu backend, inputs resident: --transfers=once,
fp32 and fp16 storage) against CLBlast's SGEMM on the same OpenCL device (kernels/bench/
clblast_gemm) and numpy/OpenBLAS on the CPU, same run. All GFLOPS are 2n^3 / median wall time of
one call. LSTM latency (MobiRNN: 128 steps x 9 inputs, 1 layer, batch 1) per backend over hidden
sizes. The host is shared and noisy: every contender runs ROUNDS times, interleaved with the
others, and the tables show the best round (the least disturbed); the JSON keeps every round.
Prints tables and writes results/bench/bench_kernels.json.
Run: .venv/bin/python tests/bench/bench_kernels.py
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "kernels" / "build" / platform.machine()
OUT = ROOT / "results" / "bench" / "bench_kernels.json"
GEMM_SIZES = (512, 1024, 2048)
LSTM_HIDDEN = (32, 64, 128, 256)
LSTM_BACKENDS = ("cpu", "cpu-mt", "gpu")
ROUNDS = 3
TARGET_VS_CLBLAST = 3.0  # at n = 1024
TARGET_VS_OPENBLAS = 0.4


def iters_for(n: int) -> int:
    return 10 if n <= 512 else 5 if n <= 1024 else 3


def run_program(binary: Path, *args: str, cache: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [str(binary), *args, f"--cl-cache={cache}"], capture_output=True, text=True, timeout=600, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{binary.name} {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    result = next(e for e in events if e["event"] == "result")
    result["info"] = next(e for e in events if e["event"] == "info")
    return result


def numpy_gflops(n: int) -> float:
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a @ b  # warm-up: thread pool start, page faults
    times = []
    for _ in range(iters_for(n)):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times) / 1e9


def gemm_round(n: int, cache: Path) -> dict[str, float]:
    common = [f"--m={n}", f"--n={n}", f"--k={n}", f"--iters={iters_for(n)}", "--warmup=1"]
    gemm = BUILD / "gemm"
    return {
        "farm_gpu_fp32_gflops": run_program(gemm, "--backend=gpu", "--transfers=once", *common, cache=cache)[
            "gflops"
        ],
        "farm_gpu_fp16_gflops": run_program(
            gemm, "--backend=gpu", "--transfers=once", "--precision=fp16", *common, cache=cache
        )["gflops"],
        "farm_gpu_fp32_with_copies_gflops": run_program(
            gemm, "--backend=gpu", "--transfers=each", *common, cache=cache
        )["gflops"],
        "clblast_gflops": run_program(
            BUILD / "bench" / "clblast_gemm", f"--n={n}", f"--iters={iters_for(n)}", "--warmup=1", cache=cache
        )["gflops"],
        "openblas_gflops": numpy_gflops(n),
    }


def bench_gemm(cache: Path) -> list[dict[str, Any]]:
    rows = []
    for n in GEMM_SIZES:
        rounds = [gemm_round(n, cache) for _ in range(ROUNDS)]
        best = {key: max(r[key] for r in rounds) for key in rounds[0]}
        info = run_program(BUILD / "gemm", "--backend=gpu", "--m=64", "--iters=1", cache=cache)["info"]
        rows.append(
            {
                "n": n,
                **best,
                "rounds": rounds,
                "farm_kernel": {k: info[k] for k in ("kernel", "tile_m", "vec", "wg_m", "wg_n")},
            }
        )
    return rows


def bench_lstm(cache: Path) -> list[dict[str, Any]]:
    rows = []
    for hidden in LSTM_HIDDEN:
        rounds: dict[str, list[float]] = {backend: [] for backend in LSTM_BACKENDS}
        for _ in range(ROUNDS):
            for backend in LSTM_BACKENDS:
                res = run_program(
                    BUILD / "lstm", f"--backend={backend}", f"--hidden={hidden}", "--iters=10", "--warmup=2",
                    cache=cache,
                )  # fmt: skip
                rounds[backend].append(res["median_ms"])
        row: dict[str, Any] = {"hidden": hidden, "rounds_ms": rounds}
        row.update({f"{b}_ms": min(rounds[b]) for b in LSTM_BACKENDS})
        rows.append(row)
    return rows


def main() -> None:
    subprocess.run(["make", "-s", "-C", str(ROOT / "kernels"), "programs", "bench"], check=True)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="farm-bench-clcache-") as tmp:
        cache = Path(tmp)
        gemm = bench_gemm(cache)
        lstm = bench_lstm(cache)

    print(
        f"\nGEMM GFLOPS (median wall time per call, best of {ROUNDS} rounds; OpenCL device: PoCL on this CPU)"
    )
    print(f"{'n':>6} {'farm fp32':>10} {'farm fp16':>10} {'+copies':>8} {'CLBlast':>8} {'OpenBLAS':>9} "
          f"{'xCLBlast':>9} {'%OpenBLAS':>10}")  # fmt: skip
    for r in gemm:
        print(
            f"{r['n']:>6} {r['farm_gpu_fp32_gflops']:>10.1f} {r['farm_gpu_fp16_gflops']:>10.1f} "
            f"{r['farm_gpu_fp32_with_copies_gflops']:>8.1f} {r['clblast_gflops']:>8.1f} "
            f"{r['openblas_gflops']:>9.1f} {r['farm_gpu_fp32_gflops'] / r['clblast_gflops']:>8.1f}x "
            f"{100 * r['farm_gpu_fp32_gflops'] / r['openblas_gflops']:>9.0f}%"
        )
    at_1024 = next(r for r in gemm if r["n"] == 1024)
    vs_clblast = at_1024["farm_gpu_fp32_gflops"] / at_1024["clblast_gflops"]
    vs_openblas = at_1024["farm_gpu_fp32_gflops"] / at_1024["openblas_gflops"]
    print(
        f"n=1024 targets: >= {TARGET_VS_CLBLAST:.0f}x CLBlast: {vs_clblast:.1f}x "
        f"({'met' if vs_clblast >= TARGET_VS_CLBLAST else 'missed'}); >= {TARGET_VS_OPENBLAS:.0%} of "
        f"OpenBLAS: {vs_openblas:.0%} ({'met' if vs_openblas >= TARGET_VS_OPENBLAS else 'missed'})"
    )
    print(
        f"\nLSTM latency, median ms per inference, best of {ROUNDS} rounds "
        "(128 steps x 9 inputs, 1 layer, batch 1)"
    )
    print(f"{'hidden':>7} " + " ".join(f"{b:>8}" for b in LSTM_BACKENDS))
    for r in lstm:
        print(f"{r['hidden']:>7} " + " ".join(f"{r[f'{b}_ms']:>8.2f}" for b in LSTM_BACKENDS))

    OUT.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": "kernels",
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
        "load_average_before_after": [load_before, os.getloadavg()],
        "rounds": ROUNDS,
        "gemm": gemm,
        "gemm_targets_at_1024": {"x_clblast": vs_clblast, "fraction_of_openblas": vs_openblas},
        "lstm": lstm,
    }
    OUT.write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
