"""What one coordinator does besides running phones: the supervisor of a Sweep.

Its heartbeat thread, every ownership.HEARTBEAT_INTERVAL_S, heartbeats the execution and its
leases; a phone missing from what the heartbeat still holds was taken over (this process stalled
past the lease expiry) and is dropped at once. It has a thread of its own because looking for
phones can block for longer than a lease lives (a lab host's adb server behind a half-dead tunnel
holds a listing for the socket timeout, 30 s; each new phone's identity probe up to 10 s), and a
coordinator busy looking must not lose the phones it is running on.

Every TICK_S its loop
- requeues the RUNNING runs of executions that died (killed -9 here or on another machine, or
  silent past ownership.HEARTBEAT_STALE_S), so live coordinators take them;
- every JOIN_INTERVAL_S, or when a worker stopped, looks for phones to add: eligible phones now
  reachable (a lab host back, a phone plugged in) and free (a dead coordinator's, one another
  sweep let go) that have work here;
- says when the sweep is over: no worker left and no run of this experiment that a phone this
  coordinator can use could still take, PENDING or RUNNING under another coordinator (one that may
  yet die: a coordinator stays as a standby until the experiment is done or out of its reach).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from farm import crashlog
from farm.engine.workers import SweepSide
from farm.errors import FarmError, StoreError
from farm.fleet.inventory import Phone
from farm.store import ownership, views
from farm.store import runs as run_store
from farm.store.events import EventKind

log = logging.getLogger("farm.engine")

TICK_S = 0.5
JOIN_INTERVAL_S = 5.0
RECOVER_INTERVAL_S = ownership.HEARTBEAT_INTERVAL_S


class Supervisor:
    def __init__(self, sweep: SweepSide) -> None:
        self.sweep = sweep
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._beater: threading.Thread | None = None
        self._usable: list[Phone] = list(sweep.initial)  # the candidates last seen
        self.takeovers = 0  # runs of dead coordinators this one requeued

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"supervisor-{self.sweep.key}", daemon=True)
        self._beater = threading.Thread(
            target=self._beat_loop, name=f"heartbeat-{self.sweep.key}", daemon=True
        )
        self._thread.start()
        self._beater.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._beater):
            if thread is not None:
                thread.join(timeout=10.0)

    # -- the loop -------------------------------------------------------------------------------

    def _beat_loop(self) -> None:
        while not self._stop.wait(ownership.HEARTBEAT_INTERVAL_S):
            try:
                self._beat()
            except StoreError as error:  # the loop below and the workers stop the sweep on it
                log.debug("farm: heartbeat: %s", error)
            except Exception as error:  # a bug here must not end the heartbeats
                log.warning("farm: heartbeat: %s: %s", type(error).__name__, error)

    def _loop(self) -> None:
        last_recover = last_join = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                if now - last_recover >= RECOVER_INTERVAL_S:
                    last_recover = now
                    self._requeue_dead()
                ended = self.sweep.worker_ended.is_set()
                if not self.sweep.cancel.is_set() and (ended or now - last_join >= JOIN_INTERVAL_S):
                    self.sweep.worker_ended.clear()
                    last_join = now
                    self._join()
                if self._over():
                    self.sweep.finished.set()
            except StoreError as error:
                # The workers stop the sweep when they meet it; with none left, stop it here.
                if not self.sweep.active_workers():
                    self.sweep.stop_for_store(error)
                    self.sweep.finished.set()
            except Exception as error:  # a bug here must not end the supervision; its stack is kept
                stack_at = crashlog.record(error, f"supervisor of {self.sweep.key}")
                log.warning("farm: supervisor: %s: %s (stack in %s)", type(error).__name__, error, stack_at)
            self._stop.wait(TICK_S)

    def _beat(self) -> None:
        sweep = self.sweep
        held = ownership.heartbeat(sweep.store, sweep.execution_id)
        for worker in sweep.active_workers():
            if worker.holds_lease and worker.phone.device_id not in held:
                sweep.drop(worker.phone.device_id, _taken_by(sweep, worker.phone.device_id))

    def _requeue_dead(self) -> None:
        """RUNNING runs of this experiment held by executions that are gone -> PENDING."""
        sweep = self.sweep
        ownership.mark_dead_executions(sweep.store)
        if not run_store.has_orphans(sweep.store, sweep.key):
            return  # the common case: no exclusive transaction taken
        reset = run_store.reset_orphans(sweep.store, sweep.key)
        if reset:
            self.takeovers += len(reset)
            sweep.event(
                EventKind.TAKEOVER, f"{len(reset)} run(s) of a coordinator that died or stalled requeued"
            )
            sweep.worker_ended.set()  # look for phones now: the dead one's are free

    def _join(self) -> None:
        try:
            self._usable = list(self.sweep.candidates())
        except FarmError as error:  # a host listing failed: keep the last candidates
            log.debug("farm: candidates: %s", error)
        self.sweep.join_phones(self._usable)

    def _over(self) -> bool:
        sweep = self.sweep
        if sweep.active_workers():
            return False
        if sweep.cancel.is_set():
            return True
        return not self._work_left(self._usable)

    def _work_left(self, usable: Sequence[Phone]) -> bool:
        sweep = self.sweep
        elsewhere = {
            lease.device_id
            for lease in ownership.leases(sweep.store)
            if lease.execution_id != sweep.execution_id and lease.experiment != sweep.key
        }
        mine = {p.device_id for p in usable} - set(sweep.excluded) - elsewhere
        if not mine:
            return False
        waiting = views.phones_with_work(sweep.store, sweep.key)
        return any(device_id is None or device_id in mine for device_id in waiting)


def _taken_by(sweep: SweepSide, device_id: str) -> str:
    for lease in ownership.leases(sweep.store):
        if lease.device_id == device_id:
            return (
                f"its lease was taken over by {lease.hostname} pid {lease.pid} "
                f"(execution {lease.execution_id}) after this coordinator stalled"
            )
    return "its lease expired after this coordinator stalled"
