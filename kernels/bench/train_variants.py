#!/usr/bin/env python3
"""train's buffer strategies against each other: one SGD step of 784-1024-1024-16, batch 256.

Each round runs every variant once in turn (--steps steps after --warmup), so load that drifts
hits every variant alike; the table is the median over rounds of each run's median wall, kernel
and host-to-device time per step. The first round's runs are --verify'd (every step against the
cpu path). From the repository root after `make -C kernels`:
  python3 kernels/bench/train_variants.py [--device=gpu] [--rounds=5] [--steps=50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

VARIANTS = {
    "resident (batch uploaded each step)": ["--buffers=resident"],
    "device (dataset on the device)": ["--buffers=device"],
}


def run_once(
    binary: str, device: str, args: list[str], steps: int, verify: bool,
    layers: str = "784,1024,1024,16", batch: int = 256,
) -> dict[str, float]:  # fmt: skip
    dev = [f"--cl-device={device}"] if device else []
    cmd = [binary, "--backend=gpu", *dev, f"--layers={layers}", f"--batch={batch}", f"--steps={steps}",
           "--warmup=5", *(["--verify"] if verify else []), *args]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    result = next(json.loads(line) for line in out.stdout.splitlines() if '"event":"result"' in line)
    if verify and result.get("verified") is not True:
        raise RuntimeError(f"{' '.join(cmd)}: verified {result.get('verified')}")
    return {k: float(result[f"median_{k}"]) for k in ("ms", "kernel_ms", "h2d_ms")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="kernels/build/x86_64/train")
    ap.add_argument("--device", default="", help="--cl-device of the runs (default: the program's)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    got: dict[str, list[dict[str, float]]] = {}
    for r in range(a.rounds):
        for name, args in VARIANTS.items():
            try:
                got.setdefault(name, []).append(run_once(a.binary, a.device, args, a.steps, r == 0))
            except RuntimeError as e:
                print(f"round {r} {name}: {e}", file=sys.stderr)
    print("| variant | rounds | wall ms / step (rounds' range) | kernel ms / step | h2d ms / step |")
    print("|---|---|---|---|---|")
    for name in VARIANTS:
        runs = got.get(name, [])
        if not runs:
            print(f"| {name} | 0 | failed | | |")
            continue
        wall = [x["ms"] for x in runs]
        med = {k: statistics.median(x[k] for x in runs) for k in ("ms", "kernel_ms", "h2d_ms")}
        print(f"| {name} | {len(runs)} | {med['ms']:.4f} ({min(wall):.4f}-{max(wall):.4f}) | "
              f"{med['kernel_ms']:.4f} | {med['h2d_ms']:.4f} |")  # fmt: skip
    print(json.dumps({"runs": got}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
