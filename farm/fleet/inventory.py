"""Device identity and a quick health look: what `farm devices` and the scheduler see.

Identity is `host/serial` where serial is `ro.serialno` (stable across TCP reconnects, unlike the
adb serial `127.0.0.1:PORT`); a phone whose props cannot be read keeps its adb serial.

Two phones may report one serial (cheap clones ship so; a phone can spoof another's). Both stay
usable and neither is ever taken for the other: each becomes `host/serial@WHERE`, WHERE its USB
port (`usb:1-1.2`, stable while it stays plugged there) or, without one, its adb address, and the
phones are reached by transport id where adb itself cannot tell them apart by serial.
`duplicate_serials` lists such groups (for `farm devices` and `farm doctor`).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from farm.device.android import parse_dumpsys_battery, parse_getprop
from farm.device.session import DeviceSession
from farm.errors import FarmError
from farm.fleet.endpoint import AdbState, Endpoint, Listed, transport_address

IDENTITY_TIMEOUT_S = 10.0
# adb lists a phone `unauthorized` while its adbd (ro.adb.secure=1) trusts none of the server's keys.
UNAUTHORIZED_ERROR = (
    "unauthorized: the phone does not trust this adb server's key; unlock the phone and allow USB "
    "debugging (tick 'Always allow from this computer'), or give the server a key the phone "
    "trusts ($ADB_VENDOR_KEYS, ~/.android/adbkey) and run `adb kill-server`"
)


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
    usb: str | None = None  # the USB port adb lists it on (`1-1.2`), None over TCP
    shares_serial: int = 1  # how many phones of its host report its serial (1: none other)

    @property
    def abis(self) -> tuple[str, ...]:
        listed = self.props.get("ro.product.cpu.abilist", "")
        names = [self.abi or ""] + [a for a in listed.split(",") if a]
        return tuple(dict.fromkeys(n for n in names if n))


def device_id_of(host: str, serial: str) -> str:
    return f"{host}/{serial}"


def identify(endpoint: Endpoint, adb_serial: str, state: AdbState, usb: str | None = None) -> Phone:
    """One phone's identity, battery and temperature (only online phones are asked). `adb_serial`
    is how to reach it: its adb serial, or `transport-id:N` where that serial names several."""
    host = endpoint.host
    if state is not AdbState.DEVICE:
        if state is AdbState.UNAUTHORIZED:
            return Phone(
                device_id_of(host, adb_serial),
                host,
                adb_serial,
                adb_serial,
                PhoneState.UNAUTHORIZED,
                error=UNAUTHORIZED_ERROR,
                usb=usb,
            )
        return Phone(
            device_id_of(host, adb_serial), host, adb_serial, adb_serial, PhoneState.OFFLINE, usb=usb
        )
    session = DeviceSession(
        endpoint.device(adb_serial), device_id_of(host, adb_serial), default_timeout_s=IDENTITY_TIMEOUT_S
    )
    try:
        props = parse_getprop(session.shell(["getprop"]).stdout)
        serial = props.get("ro.serialno") or adb_serial
        battery = parse_dumpsys_battery(session.shell(["dumpsys", "battery"]).stdout)
    except FarmError as error:
        return Phone(
            device_id_of(host, adb_serial),
            host,
            adb_serial,
            adb_serial,
            PhoneState.ERROR,
            error=str(error),
            usb=usb,
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
        usb=usb,
    )


def addresses(listed: Sequence[Listed]) -> list[str]:
    """How to reach each listed phone (pure): its adb serial, or its transport id where the
    server lists that serial more than once (adb then refuses the serial as ambiguous)."""
    counts = Counter(item.adb_serial for item in listed)
    return [
        transport_address(item.transport_id)
        if counts[item.adb_serial] > 1 and item.transport_id is not None
        else item.adb_serial
        for item in listed
    ]


def tell_apart(phones: Sequence[Phone]) -> list[Phone]:
    """Phones of one host that report one serial, each given its own identity
    `host/serial@WHERE` (its USB port, else its adb address) and the count (pure)."""
    counts = Counter(p.device_id for p in phones)
    told = []
    for phone in phones:
        shared = counts[phone.device_id]
        if shared == 1:
            told.append(phone)
            continue
        where = f"usb:{phone.usb}" if phone.usb else phone.adb_serial
        told.append(replace(phone, device_id=f"{phone.device_id}@{where}", shares_serial=shared))
    return told


def duplicate_serials(phones: Sequence[Phone]) -> dict[str, list[Phone]]:
    """`host/serial` -> the phones that report it, for each serial more than one phone reports."""
    groups: dict[str, list[Phone]] = {}
    for phone in phones:
        if phone.shares_serial > 1:
            groups.setdefault(device_id_of(phone.host, phone.serial), []).append(phone)
    return groups


def discover(
    endpoints: Sequence[Endpoint],
    *,
    leased: Callable[[str], bool] = lambda _device_id: False,
    workers: int = 8,
) -> list[Phone]:
    """Every phone the endpoints list, identified in parallel, sorted by identity."""
    jobs = []
    for ep in endpoints:
        listed = ep.list()
        jobs += [(ep, item, address) for item, address in zip(listed, addresses(listed), strict=True)]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        phones = list(pool.map(lambda job: identify(job[0], job[2], job[1].state, job[1].usb), jobs))
    phones = tell_apart(phones)
    phones = [
        replace(p, state=PhoneState.LEASED) if p.state is PhoneState.ONLINE and leased(p.device_id) else p
        for p in phones
    ]
    return sorted(phones, key=lambda p: p.device_id)


class IdentityMismatch(FarmError):
    """The phone at an identity is not the one the store knows there (another phone reports its
    serial): refused, so its runs are never stored as the other phone's. Retrying cannot help."""


def check_identity(phone: Phone, stored_model: str | None, stored_abi: str | None) -> None:
    """IdentityMismatch when the phone's model or ABI now differ from what the store recorded
    for its identity (pure; a field the store never recorded is not compared)."""
    differs = [
        f"{what} {now!r} (the store knows {before!r})"
        for what, now, before in (("model", phone.model, stored_model), ("ABI", phone.abi, stored_abi))
        if before is not None and now != before
    ]
    if differs:
        raise IdentityMismatch(
            f"{phone.device_id}: this phone reports {' and '.join(differs)}: another phone reports its "
            "serial; refused so that neither phone's runs are stored as the other's",
            hint="`farm devices` lists every phone with its serial",
        )
