"""farm's Python API for notebooks: an experiment's results as a tidy pandas DataFrame.

    from farm.api import load_frame
    frame = load_frame("lstm_gpu_load.quick", results="results")   # or a postgresql:// URL
    latency = frame[(frame.metric == "latency_median_ms") & frame.valid]
    latency.groupby(["device", "backend", "gpu_load"]).value.median()

One row per run and metric; the columns are listed in farm.report.frame. The frame is the one
`farm report` computes its study sections from and `farm export --parquet` writes.
"""

from __future__ import annotations

import os

import pandas as pd

from farm.report.frame import tidy_frame
from farm.report.query import load_report_data
from farm.store.db import Store
from farm.store.location import resolve

__all__ = ["load_frame"]


def load_frame(experiment: str, results: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The runs and metrics of `experiment` (`name` or `name.variant`) from the store at `results`
    (a folder holding farm.db, or a postgresql:// URL; default $FARM_RESULTS, else ./results),
    opened read-only. Raises farm.errors.ConfigError when there is no such store or experiment."""
    with Store(resolve(results), read_only=True) as store:
        return tidy_frame(load_report_data(store, experiment))
