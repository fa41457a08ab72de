"""Benchmark: training-step time by buffer strategy and SqueezeNet per-layer time by granularity.

1. `train` 784-256-128-16, batch 32 (Das et al.): step time and its h2d / kernel / d2h split for
   the gpu buffer strategies copy, resident and mapped, next to the cpu and cpu-mt backends.
2. `cnn` SqueezeNet v1.0 at 227x227 (Motamedi et al.): per-layer gpu time for several g, the
   best g per layer and the network latency when every layer uses its best g.

Prints both tables and writes results/bench/bench_train.json. On this machine the "gpu" is PoCL on
the host CPU, so the numbers describe the programs, not a phone.
Run: .venv/bin/python tests/bench/bench_train.py
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "kernels" / "build" / platform.machine()
OUT = ROOT / "results" / "bench" / "bench_train.json"

TRAIN_LAYERS = "784,256,128,16"
TRAIN_BATCH = 32
TRAIN_STEPS = 50
TRAIN_CONFIGS = [("cpu", "copy"), ("cpu-mt", "copy"), ("gpu", "copy"), ("gpu", "resident"), ("gpu", "mapped")]
CNN_G_VALUES = [1, 4, 16, 64]
CNN_ITERS = 3


def run(program: str, *args: str, cache: Path) -> list[dict[str, Any]]:
    argv = [str(BUILD / program), *args, f"--cl-cache={cache}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def one(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [e for e in events if e["event"] == kind]
    return found


def bench_train(cache: Path) -> list[dict[str, Any]]:
    rows = []
    for backend, buffers in TRAIN_CONFIGS:
        events = run(
            "train",
            f"--backend={backend}",
            f"--buffers={buffers}",
            f"--layers={TRAIN_LAYERS}",
            f"--batch={TRAIN_BATCH}",
            f"--steps={TRAIN_STEPS}",
            "--warmup=5",
            cache=cache,
        )
        r = one(events, "result")
        keys = ("median_ms", "median_h2d_ms", "median_kernel_ms", "median_d2h_ms", "data_movement_share")
        rows.append(
            {"backend": backend, "buffers": buffers if backend == "gpu" else None}
            | {k: r.get(k) for k in (*keys, "gflops", "gflops_kernel", "loss_first", "loss_last")}
        )
    return rows


def bench_cnn(cache: Path) -> dict[str, Any]:
    per_g: dict[int, dict[str, dict[str, Any]]] = {}
    info: dict[str, Any] = {}
    for g in CNN_G_VALUES:
        events = run(
            "cnn",
            "--backend=gpu",
            "--model=squeezenet1.0",
            f"--g={g}",
            f"--iters={CNN_ITERS}",
            "--warmup=1",
            cache=cache,
        )
        info = one(events, "info")
        per_g[g] = {e["name"]: e for e in events if e["event"] == "layer"}
    cpu = run("cnn", "--backend=cpu", "--model=squeezenet1.0", "--iters=1", "--warmup=0", cache=cache)
    layers = []
    for name, first in per_g[CNN_G_VALUES[0]].items():
        times = {g: per_g[g][name]["time_ns"] for g in CNN_G_VALUES}
        effective = {g: per_g[g][name].get("g") for g in CNN_G_VALUES}
        best = min(times, key=lambda g: times[g])
        layers.append(
            {
                "name": name,
                "kind": first["kind"],
                "flops": first["flops"],
                "time_ns": times,
                "g_effective": effective,
                "best_g": best if first["kind"] == "conv" else None,
            }
        )
    totals = {g: sum(layer["time_ns"][g] for layer in layers) for g in CNN_G_VALUES}
    best_total = sum(min(layer["time_ns"].values()) for layer in layers)
    return {
        "device": info.get("device"),
        "model": "squeezenet1.0",
        "iterations": CNN_ITERS,
        "layers": layers,
        "total_ns_by_g": totals,
        "total_ns_best_g_per_layer": best_total,
        "cpu_median_ms": one(cpu, "result")["median_ms"],
    }


def fmt(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def print_train(rows: list[dict[str, Any]]) -> None:
    print(f"\ntrain {TRAIN_LAYERS}, batch {TRAIN_BATCH}, {TRAIN_STEPS} steps (median per step)")
    head = ("backend", "buffers", "step ms", "h2d ms", "kernel ms", "d2h ms", "moving %", "GFLOPS", "loss")
    print("{:<8} {:<9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>7} {:>13}".format(*head))
    for r in rows:
        share = r["data_movement_share"]
        loss = f"{r['loss_first']:.2f}->{r['loss_last']:.2f}"
        print(
            f"{r['backend']:<8} {fmt(r['buffers']):<9} {fmt(r['median_ms']):>8} {fmt(r['median_h2d_ms']):>8} "
            f"{fmt(r['median_kernel_ms']):>9} {fmt(r['median_d2h_ms']):>8} "
            f"{fmt(None if share is None else 100 * share, 1):>8} {fmt(r['gflops'], 2):>7} {loss:>13}"
        )


def print_cnn(c: dict[str, Any]) -> None:
    print(f"\ncnn {c['model']} 227x227 on gpu ({c['device']}), per-layer median ms by g")
    gs = CNN_G_VALUES
    print(f"{'layer':<20} {'GFLOP':>7} " + " ".join(f"{'g=' + str(g):>8}" for g in gs) + f" {'best g':>7}")
    for layer in c["layers"]:
        times = " ".join(f"{layer['time_ns'][g] / 1e6:>8.3f}" for g in gs)
        print(f"{layer['name']:<20} {layer['flops'] / 1e9:>7.3f} {times} {fmt(layer['best_g']):>7}")
    totals = " ".join(f"{c['total_ns_by_g'][g] / 1e6:>8.2f}" for g in gs)
    print(f"{'total':<20} {'':>7} {totals}")
    best = c["total_ns_best_g_per_layer"] / 1e6
    print(
        f"best g per layer: {best:.2f} ms; cpu (1 thread): {c['cpu_median_ms']:.2f} ms; "
        f"speedup {c['cpu_median_ms'] / best:.1f}x"
    )


def main() -> None:
    subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(ROOT / "kernels"),
            f"build/{platform.machine()}/train",
            f"build/{platform.machine()}/cnn",
        ],
        check=True,
    )
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        train_rows = bench_train(cache)
        print_train(train_rows)
        cnn = bench_cnn(cache)
        print_cnn(cnn)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "bench": "train",
        "machine": platform.node(),
        "seconds": round(time.monotonic() - t0, 1),
        "train": train_rows,
        "cnn": cnn,
    }
    OUT.write_text(json.dumps(doc, indent=1))
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
