"""The life of a schedule's firings: skipped slots, ownership while a slot runs, abandoned slots.

A slot being run is owned by an execution (farm.store.ownership: pid, host, heartbeat) whose
experiment is the nightly's name, held for the whole firing (`owned`), so a farm process killed
with -9 leaves a slot that the next start recognises as abandoned (`recover_abandoned`) instead of
one that stays "running" forever.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import farm
from farm.engine.recovery import recover_store
from farm.store import RunState, Store, ownership
from farm.store import firings as firing_store
from farm.store import runs as run_store
from farm.store.firings import Firing, FiringOutcome, Trigger


def record_skipped(store: Store, schedule: str, slots: tuple[datetime, ...]) -> None:
    """One row for a run of missed slots (at the latest of them), however many there were."""
    if not slots:
        return
    first, last = slots[0], slots[-1]
    message = f"{len(slots)} missed slot(s) skipped ({first:%Y-%m-%d %H:%M} .. {last:%Y-%m-%d %H:%M} UTC)"
    firing_id = firing_store.start(store, schedule, last, Trigger.CATCH_UP, None, None)
    firing_store.finish(store, firing_id, FiringOutcome.SKIPPED, message=message)


def run_counts(store: Store, experiment: str) -> dict[str, int]:
    """done / failed / pending runs of a nightly, as its firing records them."""
    states = run_store.count_states(store, experiment)
    done = states[RunState.DONE]
    failed = states[RunState.FAILED] + states[RunState.SKIPPED]
    return {"done": done, "failed": failed, "pending": sum(states.values()) - done - failed}


@contextmanager
def owned(store: Store, experiment: str) -> Iterator[int]:
    """An execution that owns the firing of `experiment` while the block runs, heartbeating."""
    execution_id = ownership.start_execution(store, experiment, sys.argv, farm.__version__)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(ownership.HEARTBEAT_INTERVAL_S):
            try:
                ownership.heartbeat(store, execution_id)
            except Exception:  # a busy database must not end the heartbeat
                continue

    thread = threading.Thread(target=beat, name="firing-heartbeat", daemon=True)
    thread.start()
    try:
        yield execution_id
    finally:
        stop.set()
        thread.join()
        ownership.finish_execution(store, execution_id, "finished")


def _live_experiments(store: Store) -> set[str]:
    return {execution.experiment for execution in ownership.live_executions(store) if execution.experiment}


def recover_abandoned(store: Store) -> list[Firing]:
    """Slots left "running" by a farm process that is gone: recorded as abandoned, with the run
    counts of their nightly (whose RUNNING runs go back to PENDING). Returns them as they were."""
    live = _live_experiments(store)
    stale_before = time.time() - ownership.HEARTBEAT_STALE_S
    abandoned = []
    for firing in firing_store.running(store):
        if firing.experiment in live or (firing.experiment is None and firing.started_at > stale_before):
            continue  # its owner is alive (or it was claimed a moment ago)
        counts: dict[str, int] = {}
        if firing.experiment is not None:
            recover_store(store, firing.experiment)
            counts = run_counts(store, firing.experiment)
        firing_store.finish(
            store,
            firing.id,
            FiringOutcome.ABANDONED,
            message="the farm process running this slot died (killed?); its unfinished runs are PENDING "
            "and finish when its spec runs again",
            **counts,
        )
        abandoned.append(firing)
    return abandoned


def abandoned_line(firing: Firing) -> str:
    where = f" ({firing.experiment})" if firing.experiment else ""
    return (
        f"{firing.schedule}: slot {firing.slot_at:%Y-%m-%d %H:%M} UTC{where} was left running by a farm "
        "process that is gone: recorded as abandoned"
    )
