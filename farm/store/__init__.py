"""The results store: SQLite (WAL) at results/farm.db plus per-run artifact folders.

Schema and its documentation: farm.store.schema. Entry point: `Store(path).open()` or
`with Store.in_results(results_dir()) as store:`; queries live in runs, devices and ownership.
"""

from farm.store.db import Store, results_dir, run_artifacts_dir
from farm.store.runs import Metric, Outcome, RunState

__all__ = ["Metric", "Outcome", "RunState", "Store", "results_dir", "run_artifacts_dir"]
