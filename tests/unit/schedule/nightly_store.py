"""Stored nightlies for tests that read history from a real SQLite store (no phones)."""

from __future__ import annotations

from farm.engine.runner import spec_json
from farm.experiment import load_text
from farm.store import Metric, Store
from farm.store import runs as run_store
from farm.store.runs import PlannedRun

SPEC = """\
name: tiny
benchmark:
  program: lstm
  params: {hidden: 8, layers: 1, seq_len: 4, input_dim: 3, classes: 2, batch: 1}
measurement: {iterations: ITERS, repetitions: 2}
"""


def store_night(
    store: Store,
    name: str,
    latencies: dict[str, list[float]],
    iters: int = 5,
    state: str = "DONE",
    metric: str = "latency_median_ms",
) -> None:
    """One stored nightly: per phone, one run per repetition with its latency."""
    text, digest = spec_json(load_text(SPEC.replace("ITERS", str(iters)), "tiny.yaml"))
    run_store.save_experiment(store, name, text, digest, "tiny.yaml")
    for device, values in latencies.items():
        planned = [
            PlannedRun(
                f"{name}-{device}-{rep}".replace("/", "_"), "cell8", (("hidden", 8),), rep, device, rep
            )
            for rep in range(len(values))
        ]
        run_store.insert_planned(store, name, planned)
        for run, value in zip(planned, values, strict=True):
            store.execute("UPDATE runs SET state = ? WHERE run_id = ?", (state, run.run_id))
            run_store.put_metrics(store, run.run_id, [Metric(metric, value, "ms")])
