"""Per-layer results of a run (the `layers` table, migration 6): what programs that report layers
(cnn's `layer` events) measured of each layer. Written once per run beside its metrics; read by
reports (farm.report.layers) and the resource model (farm.analysis.resource_data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from farm.store.db import Store


@dataclass(frozen=True)
class LayerResult:
    """One layer of one run, as the program reported it (times: median and min over the run's
    measured iterations). Conv layers carry their im2col GEMM shape; direct convs their g."""

    index: int
    name: str
    kind: str  # conv | maxpool | avgpool
    time_ms: float
    min_ms: float | None = None
    flops: float | None = None
    bytes_moved: float | None = None
    g: int | None = None
    conv_path: str | None = None
    gemm_m: int | None = None
    gemm_n: int | None = None
    gemm_k: int | None = None
    fused_with: str | None = None

    @property
    def gemm_mnk(self) -> tuple[int, int, int] | None:
        if self.gemm_m is None or self.gemm_n is None or self.gemm_k is None:
            return None
        return self.gemm_m, self.gemm_n, self.gemm_k


# Column of each field (`index` is a keyword in SQL).
_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (f.name, "layer_index" if f.name == "index" else f.name) for f in fields(LayerResult)
)


def _put(conn: Any, run_id: str, layers: Sequence[LayerResult]) -> None:
    columns = ", ".join(column for _, column in _COLUMNS)
    marks = ", ".join("?" for _ in range(len(_COLUMNS) + 1))
    updates = ", ".join(f"{c} = excluded.{c}" for _, c in _COLUMNS if c != "layer_index")
    conn.executemany(
        f"INSERT INTO layers (run_id, {columns}) VALUES ({marks}) "
        f"ON CONFLICT (run_id, layer_index) DO UPDATE SET {updates}",
        [(run_id, *(getattr(layer, name) for name, _ in _COLUMNS)) for layer in layers],
    )


def put_layers(store: Store, run_id: str, layers: Sequence[LayerResult]) -> None:
    """Insert or replace a run's layers: storing the same result twice leaves one row each."""
    if not layers:
        return
    with store.transaction(exclusive=False) as conn:
        _put(conn, run_id, layers)


def experiment_layers(store: Store, experiment: str) -> dict[str, tuple[LayerResult, ...]]:
    """run_id -> its layers in index order, for the runs of `experiment` that have any."""
    columns = ", ".join(f"l.{column}" for _, column in _COLUMNS)
    rows = store.query(
        f"SELECT l.run_id, {columns} FROM layers l JOIN runs r ON r.run_id = l.run_id "
        "WHERE r.experiment = ? ORDER BY l.run_id, l.layer_index",
        (experiment,),
    )
    found: dict[str, list[LayerResult]] = {}
    for row in rows:
        values = {name: row[column] for name, column in _COLUMNS}
        found.setdefault(row["run_id"], []).append(LayerResult(**values))
    return {run_id: tuple(layers) for run_id, layers in found.items()}
