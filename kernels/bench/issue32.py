#!/usr/bin/env python3
"""issue 32's table: farm's lstm, train and gemm before and after against torch, in one run.

Each round runs, in turn, every farm variant of every program and size (the program's own JSON:
median wall and kernel ms per inference / step / product over its iterations) and the torch
references of the same shapes (torch_ref.py: eager and replayed from a CUDA graph, cuBLAS for gemm;
CUDA events for kernel time, host clock around one call then a synchronize for wall time), so load
that drifts over the run hits every variant alike. The table gives the median over rounds of each
run's medians and each farm row's ratio to the best torch row of its program and size. farm runs are
--verify'd (lstm every run, train and gemm the first round). Without torch or CUDA (PoCL) the torch
rows are left out. From the repository root after `make -C kernels`:
  python3 kernels/bench/issue32.py [--device=gpu] [--rounds=5] [--out-json=F] [--out-md=F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass

import gemm_variants  # this folder is on sys.path when run as a script
import lstm_variants
import torch_ref
import train_variants


@dataclass(frozen=True)
class Row:
    program: str
    size: str
    variant: str
    role: str  # "before", "after", "other" (farm) or "torch"


LSTM = {  # role, arguments
    "wave (auto on GPUs)": ("before", ["--gpu-kernel=wave"]),
    "grid": ("after", ["--gpu-kernel=grid"]),
    "persist": ("after", ["--gpu-kernel=persist"]),
    "fused": ("after", ["--gpu-kernel=fused"]),
    "step": ("other", ["--gpu-kernel=step"]),
}
TRAIN = {
    "resident": ("before", ["--buffers=resident"]),
    "device": ("after", ["--buffers=device"]),
}
GEMM = {
    "scalar 128x64x16 8x4": ("before", gemm_variants.VARIANTS["before: scalar 128x64x16 8x4"]),
    "default (float4, 128x128x8 8x8)": ("after", []),
}


def torch_calls(hiddens: list[int], gemm_sizes: list[int]) -> dict[Row, Callable[[], object]] | None:
    """The torch references by row, warmed up; None without torch or a CUDA device."""
    torch = torch_ref.cuda_torch()
    if torch is None:
        return None
    torch.backends.cudnn.allow_tf32 = False
    calls: dict[Row, Callable[[], object]] = {}
    groups: list[tuple[str, str, Callable[[], dict[str, Callable[[], object]]]]] = [
        *[("lstm", f"H={h}", lambda h=h: torch_ref.lstm_variants(h)) for h in hiddens],
        ("train", "784-1024-1024-16 b256", torch_ref.train_variants),
        *[("gemm", f"n={n}", lambda n=n: torch_ref.gemm_variants(n)) for n in gemm_sizes],
    ]
    for program, size, make in groups:
        try:  # a reference that fails (a graph capture, say) costs its rows, not the run
            for name, fn in make().items():
                torch_ref.timed(fn, 5)
                variant = "cuBLAS" if program == "gemm" else "torch " + name.split(" ")[-1]
                variant = "torch cuda graph" if name.endswith("cuda graph") else variant
                calls[Row(program, size, variant, "torch")] = fn
        except Exception as e:
            print(f"torch {program} {size}: {type(e).__name__}: {e}", file=sys.stderr)
    return calls


def size_key(size: str) -> tuple[int, str]:
    """Sizes in numeric order: "n=512" before "n=1024"."""
    digits = "".join(c if c.isdigit() else " " for c in size).split()
    return (int(digits[0]) if digits else 0, size)


def fmt_ms(x: float) -> str:
    return f"{x:.4f}" if x < 10 else f"{x:.1f}"


def table(got: dict[Row, list[tuple[float, float]]], order: list[Row]) -> list[str]:
    lines = [
        "| program | size | variant | role | rounds | wall ms (rounds' range) | kernel ms "
        "| wall / best torch | kernel / best torch | TFLOPS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in order:
        runs = got.get(row, [])
        if not runs:
            lines.append(f"| {row.program} | {row.size} | {row.variant} | {row.role} | 0 | failed | | | | |")
            continue
        walls = [w for w, _ in runs]
        wall, kern = statistics.median(walls), statistics.median(k for _, k in runs)
        refs = [
            (statistics.median(w for w, _ in v), statistics.median(k for _, k in v))
            for r, v in got.items()
            if r.role == "torch" and (r.program, r.size) == (row.program, row.size) and v
        ]
        wr = kr = ""
        if refs and row.role != "torch":
            wr = f"{wall / min(w for w, _ in refs):.2f}"
            kr = f"{kern / min(k for _, k in refs):.2f}"
        tf = ""
        if row.program == "gemm":
            n = int(row.size.removeprefix("n="))
            tf = f"{2.0 * n**3 / kern / 1e9:.3g}"
        lines.append(
            f"| {row.program} | {row.size} | {row.variant} | {row.role} | {len(runs)} "
            f"| {fmt_ms(wall)} ({fmt_ms(min(walls))}-{fmt_ms(max(walls))}) | {fmt_ms(kern)} "
            f"| {wr} | {kr} | {tf} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", default="kernels/build/x86_64")
    ap.add_argument("--device", default="", help="--cl-device of the farm runs (default: the program's)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--hidden", default="128,512", help="lstm hidden sizes (2 layers x 128 steps, batch 1)")
    ap.add_argument("--lstm-iters", type=int, default=20)
    ap.add_argument("--train-steps", type=int, default=50)
    ap.add_argument("--train-layers", default="784,1024,1024,16", help="torch's shape; others: no torch rows")
    ap.add_argument("--train-batch", type=int, default=256)
    ap.add_argument("--gemm-sizes", default="1024,2048,4096")
    ap.add_argument("--torch-iters", type=int, default=50)
    ap.add_argument("--out-json", default="")
    ap.add_argument("--out-md", default="")
    a = ap.parse_args()
    hiddens = [int(h) for h in a.hidden.split(",") if h]
    gemm_sizes = [int(n) for n in a.gemm_sizes.split(",") if n]
    train_size = f"{a.train_layers.replace(',', '-')} b{a.train_batch}"
    calls = torch_calls(hiddens, gemm_sizes) or {}

    farm: dict[Row, Callable[[bool], tuple[float, float]]] = {}
    for h in hiddens:
        for name, (role, args) in LSTM.items():
            farm[Row("lstm", f"H={h}", name, role)] = lambda v, h=h, args=args: lstm_variants.run_once(
                f"{a.bin_dir}/lstm", a.device, h, args, a.lstm_iters
            )
    for name, (role, args) in TRAIN.items():

        def train(v: bool, args: list[str] = args) -> tuple[float, float]:
            r = train_variants.run_once(
                f"{a.bin_dir}/train", a.device, args, a.train_steps, v, a.train_layers, a.train_batch
            )
            return r["ms"], r["kernel_ms"]

        farm[Row("train", train_size, name, role)] = train
    for n in gemm_sizes:
        for name, (role, args) in GEMM.items():
            farm[Row("gemm", f"n={n}", name, role)] = lambda v, n=n, args=args: gemm_variants.farm_run(
                f"{a.bin_dir}/gemm", a.device, n, args, v
            )
    order = sorted(
        [*farm, *calls],
        key=lambda r: (["lstm", "train", "gemm"].index(r.program), size_key(r.size), r.role == "torch"),
    )
    got: dict[Row, list[tuple[float, float]]] = {}
    for rnd in range(a.rounds):
        for row in order:
            try:
                if row in farm:
                    res = farm[row](rnd == 0)
                else:
                    ev, wall = torch_ref.timed(calls[row], a.torch_iters)
                    res = (wall, ev)
            except Exception as e:  # farm's RuntimeError, or torch's errors
                print(f"round {rnd} {row.program} {row.size} {row.variant}: {e}", file=sys.stderr)
                continue
            got.setdefault(row, []).append(res)
        print(f"round {rnd} done", file=sys.stderr, flush=True)
        write(a.out_md, a.out_json, got, order)  # each round: a run cut short keeps what it measured
    print("\n".join(table(got, order)))
    return 0


def write(md: str, js: str, got: dict[Row, list[tuple[float, float]]], order: list[Row]) -> None:
    if md:
        with open(md, "w") as f:
            f.write("\n".join(table(got, order)) + "\n")
    if js:
        with open(js, "w") as f:
            raw = {f"{r.program} {r.size} {r.variant}": v for r, v in got.items()}
            json.dump({"wall_kernel_ms": raw}, f)


if __name__ == "__main__":
    sys.exit(main())
