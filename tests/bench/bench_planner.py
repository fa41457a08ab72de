"""Benchmark: how long loading an experiment and planning it takes as the lab grows.

farm plans every run before touching a phone (and on every resume), so planning must stay far
below a second for a few hundred phones. Plans experiments/lstm_gpu_load.yaml (120 cells x 3
repetitions) pinned to 1..300 phones, and the same spread over them; prints a table and writes
results/bench/bench_planner.json.
Run: .venv/bin/python tests/bench/bench_planner.py
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "lstm_gpu_load.yaml"
OUT = ROOT / "results" / "bench" / "bench_planner.json"
PHONE_COUNTS = (1, 10, 100, 300)
REPEATS = 3


def best_of(action: Callable[[], Any]) -> float:
    """Fastest of REPEATS calls, in milliseconds (the least disturbed by other work)."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000.0)
    return min(times)


def main() -> None:
    if str(ROOT) not in sys.path:  # run as a script from a checkout without `pip install -e .`
        sys.path.insert(0, str(ROOT))
    from farm.engine.planner import plan, render_plan
    from farm.experiment import load

    load_ms = best_of(lambda: load(EXPERIMENT))
    experiment = load(EXPERIMENT)
    spread = experiment.model_copy(update={"devices": experiment.devices.model_copy(update={"spread": True})})
    rows = []
    for count in PHONE_COUNTS:
        phones = [f"lab{i // 12}/phone{i:03d}" for i in range(count)]
        planned = plan(experiment, phones)
        rows.append(
            {
                "phones": count,
                "runs": len(planned.runs),
                "plan_ms": round(best_of(lambda p=phones: plan(experiment, p)), 2),
                "render_ms": round(best_of(lambda pl=planned: render_plan(pl)), 2),
                "spread_plan_ms": round(best_of(lambda p=phones: plan(spread, p)), 2),
            }
        )
    print(f"load {EXPERIMENT.name}: {load_ms:.1f} ms (validation of the file and its variants)")
    print(f"{'phones':>7} {'runs':>8} {'plan ms':>9} {'render ms':>10} {'spread plan ms':>15}")
    for row in rows:
        print(
            f"{row['phones']:>7} {row['runs']:>8} {row['plan_ms']:>9.1f} {row['render_ms']:>10.1f} "
            f"{row['spread_plan_ms']:>15.1f}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"load_ms": round(load_ms, 2), "plans": rows}, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
