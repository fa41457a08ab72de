#!/usr/bin/env python3
"""torch references for issue 32's goals: the lstm inference and the MLP training step of the
kernels/ programs, eager and replayed from a CUDA graph, fp32 with TF32 off.

    python3 kernels/bench/torch_ref.py [--rounds=5] [--iters=50] [--out=FILE.json]

lstm: torch.nn.LSTM(input 9, hidden H, 2 layers) over 128 steps, batch 1, then Linear(H, 6) on
the last step (the shape of `lstm --layers=2 --seq-len=128 --batch=1`), H = 128 and 512.
train: Linear 784-1024-1024-16 with ReLU, softmax cross-entropy, plain SGD, batch 256 (the
shape of gpu_bench.py's train section). Per variant: kernel time (CUDA events around the work,
no host sync inside) and wall time (host clock, one inference or step then a synchronize), the
median of each round's median, rounds interleaved over the variants.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def cuda_torch() -> Any | None:
    """torch with CUDA and fp32 matmuls in fp32 (TF32 off), or None without torch or a device."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def timed(fn: Callable[[], object], iters: int) -> tuple[float, float]:
    """Median event ms and median wall ms of `iters` calls of fn (each synchronized)."""
    import torch

    ev: list[float] = []
    wall: list[float] = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        ev.append(s.elapsed_time(e))
    return statistics.median(ev), statistics.median(wall)


def graphed(fn: Callable[[], object]) -> Callable[[], object]:
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def with_graph(name: str, fn: Callable[[], object]) -> dict[str, Callable[[], object]]:
    """{name: fn captured in a CUDA graph}, or {} with the reason on stderr where capture fails."""
    try:
        return {name: graphed(fn)}
    except RuntimeError as e:
        print(f"torch_ref: {name}: capture failed: {e}", file=sys.stderr)
        return {}


def lstm_variants(hidden: int) -> dict[str, Callable[[], object]]:
    import torch

    torch.manual_seed(hidden)
    rnn = torch.nn.LSTM(9, hidden, num_layers=2, batch_first=True).cuda().eval()
    head = torch.nn.Linear(hidden, 6).cuda().eval()
    x = torch.rand(1, 128, 9, device="cuda") * 2 - 1

    def infer() -> object:
        with torch.no_grad():
            out, _ = rnn(x)
            return head(out[:, -1])

    return {f"lstm H={hidden} eager": infer, **with_graph(f"lstm H={hidden} cuda graph", infer)}


def mlp_problem(sizes: list[int], batch: int) -> tuple[Any, Any, Any, Any, Any]:
    """farm's train program as torch on CUDA: (net, SGD at lr 0.1, inputs in [-1, 1), labels,
    cross-entropy), a Linear per layer with ReLU between them (gpu_bench.py's reference too)."""
    import torch

    layers: list[Any] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.rand(batch, sizes[0], device="cuda") * 2 - 1
    y = torch.randint(0, sizes[-1], (batch,), device="cuda")
    return net, opt, x, y, torch.nn.CrossEntropyLoss()


def train_variants() -> dict[str, Callable[[], object]]:
    net, opt, x, y, loss_fn = mlp_problem([784, 1024, 1024, 16], 256)

    def eager() -> object:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        eager()
    # The whole step in one graph (PyTorch's "whole network capture"): gradients are set to None
    # before capture, so the captured backward writes them rather than accumulating.
    opt.zero_grad(set_to_none=True)

    def captured() -> object:
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return {"train eager": eager, **with_graph("train cuda graph", captured)}


def gemm_variants(n: int) -> dict[str, Callable[[], object]]:
    """cuBLAS through torch: one n x n x n fp32 product (TF32 off), operands resident."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(n, n, device="cuda") * 2 - 1
    b = torch.rand(n, n, device="cuda") * 2 - 1
    return {f"gemm n={n} cuBLAS": lambda: a @ b}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("torch_ref: torch sees no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    variants: dict[str, Callable[[], object]] = {}
    for h in (128, 512):
        variants.update(lstm_variants(h))
    variants.update(train_variants())
    for fn in variants.values():
        timed(fn, 5)
    ev: dict[str, list[float]] = {n: [] for n in variants}
    wall: dict[str, list[float]] = {n: [] for n in variants}
    for _ in range(a.rounds):
        for n, fn in variants.items():
            e, w = timed(fn, a.iters)
            ev[n].append(e)
            wall[n].append(w)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    print("| torch variant | event ms | wall ms (rounds' range) |")
    print("|---|---|---|")
    for n in variants:
        print(f"| {n} | {statistics.median(ev[n]):.4f} | {statistics.median(wall[n]):.4f} "
              f"({min(wall[n]):.4f}-{max(wall[n]):.4f}) |")  # fmt: skip
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"event_ms": ev, "wall_ms": wall, "device": torch.cuda.get_device_name()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
