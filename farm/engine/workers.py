"""The sweep as its helpers see it: each phone's Worker and PhoneStatus, and the narrow side of
a Sweep (farm.engine.scheduler) that its supervisor (farm.engine.coordination) and the recovery
ladder (farm.engine.ladder) act through."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from farm.analysis.latest import Readings
from farm.engine.cancel import PhoneCancel
from farm.engine.driver import PhoneDriver
from farm.engine.model import Phase, PhaseUpdate
from farm.errors import StoreError
from farm.fleet.inventory import Phone
from farm.store import Store
from farm.store.events import EventKind, EventPayload


@dataclass
class PhoneStatus:
    """What the live view shows of one phone; updated by its worker."""

    device_id: str
    state: Phase = Phase.IDLE
    cell: str | None = None
    run_started: float | None = None
    temperature_c: float | None = None
    battery_pct: float | None = None
    gpu_load_achieved: float | None = None
    live: Readings | None = None  # the running sampler's newest readings (farm.engine.watch)

    def show_readings(self, readings: Readings) -> None:
        self.live = readings

    def apply(self, update: PhaseUpdate) -> None:
        """An attempt's step: its phase, and whatever it read on the phone."""
        self.state = update.phase
        if update.battery_pct is not None:
            self.battery_pct = update.battery_pct
        if update.temperature_c is not None:
            self.temperature_c = update.temperature_c
        if update.gpu_load_achieved is not None:
            self.gpu_load_achieved = update.gpu_load_achieved


@dataclass
class Worker:
    """One phone in this sweep: its thread, its own stop signal, and why it stopped early."""

    phone: Phone
    cancel: PhoneCancel
    done: threading.Event = field(default_factory=threading.Event)
    holds_lease: bool = True
    dropped: str | None = None  # set when the sweep stopped using the phone (its lease was lost)

    @property
    def active(self) -> bool:
        return not self.done.is_set()


class SweepSide(Protocol):
    key: str
    store: Store
    execution_id: int
    initial: list[Phone]
    cancel: threading.Event
    finished: threading.Event
    worker_ended: threading.Event

    # Read here; only the sweep writes them (exclude, stop_for_store).
    @property
    def excluded(self) -> Mapping[str, str]: ...

    @property
    def store_error(self) -> StoreError | None: ...

    def exclude(self, device_id: str, reason: str, *, problem: str) -> None: ...

    def stop_for_store(self, error: StoreError) -> None: ...

    driver: PhoneDriver
    lost_wait_s: float

    def active_workers(self) -> list[Worker]: ...

    def candidates(self) -> Sequence[Phone]: ...

    def join_phones(self, phones: Sequence[Phone], *, announce: bool = True) -> int: ...

    def drop(self, device_id: str, why: str) -> None: ...

    def has_work(self, device_id: str) -> bool: ...

    def wait_for_phone(self, worker: Worker, status: PhoneStatus, timeout_s: float) -> bool: ...

    def event(
        self,
        kind: EventKind,
        message: str,
        *,
        run_id: str | None = None,
        device_id: str | None = None,
        payload: EventPayload | None = None,
    ) -> None: ...
