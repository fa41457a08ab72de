"""The recovery ladder: what a sweep does, step by step, with a phone that stopped answering.

    reconnect    wait for it to be listed again, its adb transport torn down and made anew
    reboot       the adb `reboot:` service, then wait (only with `retries: {reboot: true}`)
    power-cycle  the farm.yaml command that cuts the phone's USB power (e.g. uhubctl), then wait
    quarantine   no more runs on it this sweep; `farm devices` shows it with the reason

Each step is logged as a `recovery` event; the phone is back when it answers a trivial command
(not merely when adb lists it: a hung phone is listed as `device`). A step that does not bring
the phone back leads to the next one at once. The rung reached is kept per phone until an
attempt on it ends without losing it, so a phone that comes back only to drop again climbs too
instead of being retried forever at the bottom.

A phone whose host is away (a lab host's tunnel is down) is not the phone's fault: it is waited
for (bounded) without climbing; its runs are requeued and it rejoins when the host is back.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from farm.engine.model import Phase
from farm.engine.workers import PhoneStatus, SweepSide, Worker
from farm.errors import FarmError, HostError
from farm.fleet.inventory import Phone
from farm.fleet.powercycle import CommandResult
from farm.store import devices as device_store
from farm.store.events import EventKind

REBOOT_WAIT_S = 180.0  # at least: a reboot or a power-cycle takes minutes on some phones
POWER_CYCLE_WAIT_S = 180.0
OUTPUT_TAIL_CHARS = 2000


class Rung(enum.StrEnum):
    RECONNECT = "reconnect"
    REBOOT = "reboot"
    POWER_CYCLE = "power-cycle"
    QUARANTINE = "quarantine"


# A phone's power-cycle: None when farm.yaml has none for it; raises FarmError when it has one that
# cannot be used for this phone (a placeholder without a value), with what to add where.
PowerCycle = Callable[[Phone], CommandResult | None]


@dataclass(frozen=True)
class PowerCycleOutput:
    """What a power-cycle command printed (its tail) and how it exited: the recovery event's payload."""

    output_tail: str
    exit_code: int | None

    def to_json(self) -> dict[str, object]:
        return {"output": self.output_tail, "exit_code": self.exit_code}


def _no_power_cycle(_phone: Phone) -> CommandResult | None:
    return None


class Ladder:
    def __init__(
        self,
        *,
        reboot_allowed: bool,
        power_cycle: PowerCycle = _no_power_cycle,
        has_power_cycle: Callable[[Phone], bool] = lambda _phone: False,
    ) -> None:
        self.reboot_allowed = reboot_allowed
        self.power_cycle = power_cycle
        self.has_power_cycle = has_power_cycle
        self._reached: dict[str, int] = {}  # device_id -> rungs used since its last good attempt

    def reset(self, device_id: str) -> None:
        self._reached.pop(device_id, None)

    def rungs(self, phone: Phone) -> list[Rung]:
        rungs = [Rung.RECONNECT]
        if self.reboot_allowed:
            rungs.append(Rung.REBOOT)
        if self.has_power_cycle(phone):
            rungs.append(Rung.POWER_CYCLE)
        return [*rungs, Rung.QUARANTINE]

    def climb(self, sweep: SweepSide, worker: Worker, status: PhoneStatus) -> bool:
        """After a loss: True once the phone answers again, False when the sweep stops using it
        (quarantined, nothing left for it, its host still away, or the phone must stop)."""
        phone = worker.phone
        if _host_away(sweep, phone):
            if sweep.wait_for_phone(worker, status, sweep.lost_wait_s) and sweep.driver.healthy(phone):
                sweep.event(
                    EventKind.RECOVERED, "phone is back (its host was away)", device_id=phone.device_id
                )
                return True
            status.state = Phase.LOST
            return False
        rungs = self.rungs(phone)
        start = min(self._reached.get(phone.device_id, 0), len(rungs) - 1)
        for index in range(start, len(rungs)):
            if worker.cancel.is_set() or not sweep.has_work(phone.device_id):
                status.state = Phase.LOST
                return False
            rung = rungs[index]
            self._reached[phone.device_id] = index + 1
            if rung is Rung.QUARANTINE:
                self._quarantine(sweep, worker, status, rungs[:-1])
                return False
            if self._try(sweep, worker, status, rung):
                sweep.event(EventKind.RECOVERED, f"phone is back after: {rung}", device_id=phone.device_id)
                return True
        return False

    def _try(self, sweep: SweepSide, worker: Worker, status: PhoneStatus, rung: Rung) -> bool:
        phone = worker.phone
        endpoint = sweep.driver.endpoint(phone)
        wait_s = sweep.lost_wait_s
        if rung is Rung.RECONNECT:
            sweep.event(EventKind.RECOVERY, "reconnect: adb transport made anew", device_id=phone.device_id)
            endpoint.reset_transport(phone.adb_serial)
        elif rung is Rung.REBOOT:
            sweep.event(EventKind.RECOVERY, "reboot (retries.reboot allows it)", device_id=phone.device_id)
            try:
                sweep.driver.reboot(phone)
            except FarmError as error:
                sweep.event(EventKind.RECOVERY, f"reboot not taken: {error}", device_id=phone.device_id)
                return False
            wait_s = max(wait_s, REBOOT_WAIT_S)
        else:
            try:
                result = self.power_cycle(phone)
            except FarmError as error:
                sweep.event(
                    EventKind.RECOVERY, f"power-cycle not possible: {error}", device_id=phone.device_id
                )
                return False
            if result is None:
                return False
            sweep.event(
                EventKind.RECOVERY,
                f"power-cycle: `{result.command}` exited {result.exit_code} after {result.took_s:.1f} s",
                device_id=phone.device_id,
                payload=PowerCycleOutput(result.output[-OUTPUT_TAIL_CHARS:], result.exit_code),
            )
            endpoint.reset_transport(phone.adb_serial)
            wait_s = max(wait_s, POWER_CYCLE_WAIT_S)
        return sweep.wait_for_phone(worker, status, wait_s) and sweep.driver.healthy(phone)

    def _quarantine(self, sweep: SweepSide, worker: Worker, status: PhoneStatus, tried: list[Rung]) -> None:
        phone = worker.phone
        steps = ", ".join(str(r) for r in tried)
        reason = f"stopped answering; tried {steps}"
        if not self.reboot_allowed:
            reason += " (reboot not allowed: retries.reboot)"
        status.state = Phase.QUARANTINED
        sweep.exclude(phone.device_id, reason, problem=f"{phone.device_id}: quarantined: {reason}")
        device_store.quarantine(sweep.store, phone.device_id, reason, sweep.execution_id)
        sweep.event(
            EventKind.QUARANTINE,
            f"no more runs on this phone this sweep: {reason}",
            device_id=phone.device_id,
        )


def _host_away(sweep: SweepSide, phone: Phone) -> bool:
    """Is the phone's host itself unreachable (a lab host's SSH tunnel down)?"""
    try:
        sweep.driver.endpoint(phone).list()
    except HostError:
        return True
    except FarmError:
        return False
    return False
