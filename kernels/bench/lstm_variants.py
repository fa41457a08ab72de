"""lstm GPU strategies against each other: 2 layers x 128 steps, batch 1, interleaved rounds.

Each round runs every (hidden, variant) once in turn (--iters inferences after one warm-up), so
load that drifts over time hits every variant alike; the table is the median over rounds of each
run's median wall and kernel time per inference, and per step (/ seq_len). Every run is verified
against the cpu path (--verify). Usage, from the repository root after `make -C kernels`:
  python3 kernels/bench/lstm_variants.py [--device=gpu] [--rounds=5] [--iters=5] [--hidden=128,512]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

VARIANTS = {
    "step": ["--gpu-kernel=step"],
    "fused": ["--gpu-kernel=fused"],
    "wave": ["--gpu-kernel=wave"],
    "wave split 32x32": ["--gpu-kernel=wave", "--wg=32", "--ks=32"],
    "persist 32x1": ["--gpu-kernel=persist", "--wg=32", "--ks=1"],
    "persist 32x4": ["--gpu-kernel=persist", "--wg=32", "--ks=4"],
    "persist 32x32": ["--gpu-kernel=persist", "--wg=32", "--ks=32"],
    "persist 64x16": ["--gpu-kernel=persist", "--wg=64", "--ks=16"],
    "persist 128x8": ["--gpu-kernel=persist", "--wg=128", "--ks=8"],
    "grid 8x32": ["--gpu-kernel=grid", "--wg=8", "--ks=32"],
    "grid 4x32": ["--gpu-kernel=grid", "--wg=4", "--ks=32"],
    "grid 4x64": ["--gpu-kernel=grid", "--wg=4", "--ks=64"],
    "grid 2x64": ["--gpu-kernel=grid", "--wg=2", "--ks=64"],
    "grid 16x16": ["--gpu-kernel=grid", "--wg=16", "--ks=16"],
}


def run_once(binary: str, device: str, hidden: int, args: list[str], iters: int) -> tuple[float, float]:
    dev = [f"--cl-device={device}"] if device else []
    cmd = [binary, "--backend=gpu", *dev, f"--hidden={hidden}", "--layers=2",
           "--seq-len=128", "--batch=1", f"--iters={iters}", "--warmup=1", "--verify", *args]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    result = next(json.loads(line) for line in out.stdout.splitlines() if '"event":"result"' in line)
    return float(result["median_ms"]), float(result["median_kernel_ms"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="kernels/build/x86_64/lstm")
    ap.add_argument("--device", default="", help="--cl-device of the runs (default: the program's)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--hidden", default="128,512")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names of VARIANTS")
    a = ap.parse_args()
    names = [n for n in a.variants.split(",") if n]
    hiddens = [int(h) for h in a.hidden.split(",")]
    wall: dict[tuple[int, str], list[float]] = {}
    kern: dict[tuple[int, str], list[float]] = {}
    for r in range(a.rounds):
        for h in hiddens:
            for n in names:
                try:
                    w, k = run_once(a.binary, a.device, h, VARIANTS[n], a.iters)
                except RuntimeError as e:
                    print(f"round {r} H={h} {n}: {e}", file=sys.stderr)
                    continue
                wall.setdefault((h, n), []).append(w)
                kern.setdefault((h, n), []).append(k)
    print("| H | variant | rounds | wall ms / inference (min-max) | kernel ms / inference | wall us / step |")
    print("|---|---|---|---|---|---|")
    for h in hiddens:
        for n in names:
            ws, ks = wall.get((h, n), []), kern.get((h, n), [])
            if not ws:
                print(f"| {h} | {n} | 0 | failed | | |")
                continue
            mw, mk = statistics.median(ws), statistics.median(ks)
            spread = f"{min(ws):.3f}-{max(ws):.3f}"
            print(f"| {h} | {n} | {len(ws)} | {mw:.3f} ({spread}) | {mk:.3f} | {mw / 128 * 1e3:.1f} |")
    print(json.dumps({"wall_ms": {f"{h} {n}": v for (h, n), v in wall.items()}}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
