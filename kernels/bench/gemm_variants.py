#!/usr/bin/env python3
"""gemm kernel variants against cuBLAS: square n, interleaved rounds, medians (issue 32 item 3).

Each round runs every (n, variant) once in turn (`gemm --kernel=local --transfers=once`, kernel
time from OpenCL event profiling, the run's median), then cuBLAS (torch, TF32 off, CUDA events)
at each n; the table gives the median over rounds as TFLOPS and the share of cuBLAS. Each
variant's first-round run is --verify'd against the cpu path. From the repository root after
`make -C kernels`:
  python3 kernels/bench/gemm_variants.py [--rounds=5] [--sizes=1024,2048,4096] [--variants=a,b]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from gpu_bench import cublas_ms  # this folder is on sys.path when run as a script

TILE_128x64 = ["--tsm=128", "--tsn=64", "--tsk=16", "--wptm=8", "--wptn=4", "--lvw=4"]
TILE_128x128 = ["--tsm=128", "--tsn=128", "--tsk=16", "--wptm=8", "--wptn=8", "--lvw=4"]
TILE_128x128_K8 = ["--tsm=128", "--tsn=128", "--tsk=8", "--wptm=8", "--wptn=8", "--lvw=4"]
VARIANTS = {
    # the defaults before issue 32: scalar global loads, 128x64x16 8x4 (what the old default picked
    # at n = 1024-4096 on a 132-unit H100 or H200)
    "before: scalar 128x64x16 8x4": ["--global-vec=1", *TILE_128x64],
    "default": [],
    "gvec4": ["--global-vec=4"],
    "128x128x16 8x8": TILE_128x128,
    "gvec4 128x128x16 8x8": ["--global-vec=4", *TILE_128x128],
    "gvec4 128x128x8 8x8": ["--global-vec=4", *TILE_128x128_K8],
}


def farm_ms(binary: str, device: str, n: int, args: list[str], verify: bool) -> float:
    return farm_run(binary, device, n, args, verify)[1]


def farm_run(binary: str, device: str, n: int, args: list[str], verify: bool) -> tuple[float, float]:
    """Median wall ms and median kernel ms of one gemm run (10 iterations, operands uploaded once)."""
    dev = [f"--cl-device={device}"] if device else []
    cmd = [binary, "--backend=gpu", "--kernel=local", *dev, f"--m={n}", f"--n={n}", f"--k={n}",
           "--transfers=once", "--iters=10", *(["--verify"] if verify else []), *args]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    result = next(json.loads(line) for line in out.stdout.splitlines() if '"event":"result"' in line)
    if verify and result.get("verify") != "passed":
        raise RuntimeError(f"{' '.join(cmd)}: verify {result.get('verify')}")
    return float(result["median_ms"]), float(result["median_kernel_ms"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="kernels/build/x86_64/gemm")
    ap.add_argument("--device", default="", help="--cl-device of the runs (default: the program's)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names of VARIANTS")
    a = ap.parse_args()
    names = [n for n in a.variants.split(",") if n]
    sizes = [int(n) for n in a.sizes.split(",")]
    ms: dict[tuple[int, str], list[float]] = {}
    for r in range(a.rounds):
        for n in sizes:
            for name in names:
                try:
                    got = farm_ms(a.binary, a.device, n, VARIANTS[name], r == 0)
                    ms.setdefault((n, name), []).append(got)
                except RuntimeError as e:
                    print(f"round {r} n={n} {name}: {e}", file=sys.stderr)
            cb = cublas_ms(n)
            if cb is not None:
                ms.setdefault((n, "cuBLAS"), []).append(cb)
    print("| n | variant | rounds | TFLOPS (rounds' range) | of cuBLAS |")
    print("|---|---|---|---|---|")
    for n in sizes:
        flop = 2.0 * n**3
        ref = ms.get((n, "cuBLAS"))
        ref_tf = flop / statistics.median(ref) / 1e9 if ref else None
        for name in [*names, "cuBLAS"]:
            got = ms.get((n, name), [])
            if not got:
                print(f"| {n} | {name} | 0 | failed | |")
                continue
            tf = flop / statistics.median(got) / 1e9
            spread = f"{flop / max(got) / 1e9:.1f}-{flop / min(got) / 1e9:.1f}"
            share = f"{tf / ref_tf:.0%}" if ref_tf else "n/a"
            print(f"| {n} | {name} | {len(got)} | {tf:.1f} ({spread}) | {share} |")
    print(json.dumps({"kernel_ms": {f"{n} {v}": x for (n, v), x in ms.items()}}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
