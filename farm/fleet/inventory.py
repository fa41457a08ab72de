"""Device identity and a quick health look: what `farm devices` and the scheduler see.

Identity is `host/serial` where serial is `ro.serialno` (stable across TCP reconnects, unlike the
adb serial `127.0.0.1:PORT`); a phone whose props cannot be read keeps its adb serial.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from farm.device.android import parse_dumpsys_battery, parse_getprop
from farm.device.session import DeviceSession
from farm.errors import FarmError
from farm.fleet.endpoint import AdbState, LocalAdbEndpoint

IDENTITY_TIMEOUT_S = 10.0


class PhoneState(enum.StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"
    UNAUTHORIZED = "unauthorized"
    LEASED = "leased"
    QUARANTINED = "quarantined"  # a sweep's recovery ladder gave up on it (farm.engine.ladder)
    ERROR = "error"


@dataclass(frozen=True)
class Phone:
    device_id: str
    host: str
    serial: str
    adb_serial: str
    state: PhoneState
    model: str | None = None
    abi: str | None = None
    battery_pct: float | None = None
    temperature_c: float | None = None
    props: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    capabilities: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    error: str | None = None

    @property
    def abis(self) -> tuple[str, ...]:
        listed = self.props.get("ro.product.cpu.abilist", "")
        names = [self.abi or ""] + [a for a in listed.split(",") if a]
        return tuple(dict.fromkeys(n for n in names if n))


def device_id_of(host: str, serial: str) -> str:
    return f"{host}/{serial}"


def identify(endpoint: LocalAdbEndpoint, adb_serial: str, state: AdbState) -> Phone:
    """One phone's identity, battery and temperature (only online phones are asked)."""
    host = endpoint.host
    if state is not AdbState.DEVICE:
        mapped = PhoneState.UNAUTHORIZED if state is AdbState.UNAUTHORIZED else PhoneState.OFFLINE
        return Phone(device_id_of(host, adb_serial), host, adb_serial, adb_serial, mapped)
    session = DeviceSession(
        endpoint.device(adb_serial), device_id_of(host, adb_serial), default_timeout_s=IDENTITY_TIMEOUT_S
    )
    try:
        props = parse_getprop(session.shell(["getprop"]).stdout)
        serial = props.get("ro.serialno") or adb_serial
        battery = parse_dumpsys_battery(session.shell(["dumpsys", "battery"]).stdout)
    except FarmError as error:
        return Phone(
            device_id_of(host, adb_serial), host, adb_serial, adb_serial, PhoneState.ERROR, error=str(error)
        )
    return Phone(
        device_id=device_id_of(host, serial),
        host=host,
        serial=serial,
        adb_serial=adb_serial,
        state=PhoneState.ONLINE,
        model=props.get("ro.product.model"),
        abi=props.get("ro.product.cpu.abi"),
        battery_pct=battery.level_pct,
        temperature_c=battery.temperature_c,
        props=props,
    )


def discover(
    endpoints: Sequence[LocalAdbEndpoint],
    *,
    leased: Callable[[str], bool] = lambda _device_id: False,
    workers: int = 8,
) -> list[Phone]:
    """Every phone the endpoints list, identified in parallel, sorted by identity."""
    jobs = [(ep, item) for ep in endpoints for item in ep.list()]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        phones = list(pool.map(lambda job: identify(job[0], job[1].adb_serial, job[1].state), jobs))
    phones = [
        replace(p, state=PhoneState.LEASED) if p.state is PhoneState.ONLINE and leased(p.device_id) else p
        for p in phones
    ]
    return sorted(phones, key=lambda p: p.device_id)
