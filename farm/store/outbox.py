"""Results the database could not take: kept in the run's folder, written when it is back.

When storing an attempt's end fails because the store is unavailable (the PostgreSQL server went
away, a disk filled), the finished attempt is written as `pending-result.json` in the run's
artifact folder instead, beside the traces it was computed from. The next farm start replays
these before it resets dead executions' RUNNING runs (so a measured run becomes DONE, not redone),
through the same conditional `runs.finish`: a result whose run was meanwhile reset or finished is
not applied twice, and its file is kept as `pending-result.stale.json` for a person to look at.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from farm.errors import StoreError
from farm.metric import Metric, value_of
from farm.store.db import Store
from farm.store.runs import Outcome, RunState, finish, list_runs

PENDING_NAME = "pending-result.json"
STALE_NAME = "pending-result.stale.json"


@dataclass(frozen=True)
class PendingResult:
    """The arguments of one `runs.finish` call, as JSON-able values."""

    run_id: str
    attempt: int
    outcome: Outcome
    next_state: RunState
    error: str | None = None
    exit_code: int | None = None
    load_target: float | None = None
    load_achieved: float | None = None
    env: dict[str, Any] | None = None
    metrics: tuple[Metric, ...] = field(default=())

    def to_json(self) -> str:
        doc = asdict(self)
        doc["outcome"], doc["next_state"] = str(self.outcome), str(self.next_state)
        return json.dumps(doc, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> PendingResult:
        doc = json.loads(text)
        return cls(
            run_id=str(doc["run_id"]),
            attempt=int(doc["attempt"]),
            outcome=Outcome(doc["outcome"]),
            next_state=RunState(doc["next_state"]),
            error=doc.get("error"),
            exit_code=doc.get("exit_code"),
            load_target=doc.get("load_target"),
            load_achieved=doc.get("load_achieved"),
            env=doc.get("env"),
            metrics=tuple(
                Metric(m["name"], value_of(m["value"]), m["unit"]) for m in doc.get("metrics") or ()
            ),
        )


def keep(folder: Path, result: PendingResult) -> Path:
    """Write the result next to the run's artifacts (atomically: a crash leaves old or new)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / PENDING_NAME
    scratch = path.with_suffix(".tmp")
    try:
        scratch.write_text(result.to_json())
        os.replace(scratch, path)
    except OSError:
        scratch.unlink(missing_ok=True)
        raise
    return path


def apply(store: Store, result: PendingResult) -> bool:
    """Store a kept result through the usual conditional finish; True when it was stored."""
    return finish(
        store,
        result.run_id,
        result.attempt,
        result.outcome,
        next_state=result.next_state,
        error=result.error,
        exit_code=result.exit_code,
        load_target=result.load_target,
        load_achieved=result.load_achieved,
        env=result.env,
        metrics=result.metrics,
    )


def finish_or_keep(store: Store, folder: Path, result: PendingResult) -> bool:
    """`runs.finish`, or, when the store cannot take it, keep it in `folder` and re-raise."""
    try:
        return apply(store, result)
    except StoreError:
        with contextlib.suppress(OSError):  # the same full disk: the run is redone instead
            keep(folder, result)
        raise


def replay(store: Store, results: Path, experiment: str) -> list[str]:
    """Apply the kept results of `experiment`'s RUNNING runs found under `results`; returns the
    run ids stored. Call before resetting dead executions' runs."""
    stored: list[str] = []
    for run in list_runs(store, experiment, [RunState.RUNNING]):
        if not run.artifacts_dir:
            continue
        path = results / run.artifacts_dir / PENDING_NAME
        if not path.is_file():
            continue
        try:
            result = PendingResult.from_json(path.read_text())
        except (OSError, ValueError, KeyError, TypeError):
            os.replace(path, path.with_name(STALE_NAME))
            continue
        if result.run_id == run.run_id and apply(store, result):
            stored.append(run.run_id)
            path.unlink()
        else:
            os.replace(path, path.with_name(STALE_NAME))
    return stored
