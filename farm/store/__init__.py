"""The results store: a database (SQLite file or PostgreSQL server) plus per-run artifact folders.

Schema and its documentation: farm.store.schema. Where results live (folder or URL, and the
local artifacts folder): farm.store.location. Entry point: `with Store.in_results(location) as
store:`; queries live in runs, devices and ownership; the backends in farm.store.backend.
"""

from farm.metric import Metric
from farm.store.db import Store
from farm.store.location import StoreLocation, results_dir, run_artifacts_dir
from farm.store.runs import Outcome, RunState

__all__ = ["Metric", "Outcome", "RunState", "Store", "StoreLocation", "results_dir", "run_artifacts_dir"]
