"""Where each run's artifact folder was written, and which of them this machine can read.

A run's folder is written on the machine of the coordinator that ran it, under that execution's
results folder (executions.hostname, executions.results_dir; runs.artifacts_dir is relative to
it). With a shared PostgreSQL store, `farm report` on another machine gets every metric from the
database and uses this to say which runs' folders (raw traces, logs) are elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from farm.store.db import Store


@dataclass(frozen=True)
class ArtifactLocation:
    run_id: str
    relative: str  # runs.artifacts_dir: <experiment>/<run-id>
    hostname: str | None  # the coordinator's machine (None: recorded before migration 3)
    results_dir: str | None  # its absolute results folder

    @property
    def where(self) -> str:
        """`host:/abs/results/<experiment>/<run>`, or the relative folder when the origin is unknown."""
        if self.results_dir is None:
            return self.relative
        path = f"{self.results_dir.rstrip('/')}/{self.relative}"
        return f"{self.hostname}:{path}" if self.hostname else path


def artifact_locations(store: Store, experiment: str) -> list[ArtifactLocation]:
    """Every run of `experiment` that has a folder, with the machine and folder of its last attempt."""
    rows = store.query(
        "SELECT r.run_id, r.artifacts_dir, e.hostname, e.results_dir FROM runs r "
        "LEFT JOIN attempts a ON a.run_id = r.run_id AND a.attempt = "
        "(SELECT MAX(b.attempt) FROM attempts b WHERE b.run_id = r.run_id) "
        "LEFT JOIN executions e ON e.id = a.execution_id "
        "WHERE r.experiment = ? AND r.artifacts_dir IS NOT NULL ORDER BY r.seq, r.run_id",
        (experiment,),
    )
    return [ArtifactLocation(r["run_id"], r["artifacts_dir"], r["hostname"], r["results_dir"]) for r in rows]


def unreadable_here(
    locations: Sequence[ArtifactLocation], results: Path, *, exists: Callable[[Path], bool] = Path.is_dir
) -> list[ArtifactLocation]:
    """The locations whose folder is not under this machine's `results` (another coordinator's
    disk, not shared here). A folder that is readable here counts whatever machine wrote it."""
    return [loc for loc in locations if not exists(results / loc.relative)]
