"""`farm devices`: every phone the adb server sees, with identity, state, capabilities, health."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from farm.cli.json_output import echo_json
from farm.cli.options import adb_port_option, config_option, results_option, store_location
from farm.device.session import DeviceSession
from farm.engine.lifecycle import probe_phone
from farm.errors import FarmError
from farm.fleet.endpoint import LocalAdbEndpoint
from farm.fleet.hosts import open_fleet
from farm.fleet.inventory import Phone, PhoneState, discover, duplicate_serials
from farm.safe_text import terminal
from farm.store import Store, ownership
from farm.store import devices as device_store
from farm.telemetry.probe import Capabilities


def _with_capabilities(endpoint: LocalAdbEndpoint, phone: Phone) -> tuple[Phone, Capabilities | None]:
    if phone.state not in (PhoneState.ONLINE, PhoneState.LEASED, PhoneState.QUARANTINED):
        return phone, None
    session = DeviceSession(endpoint.device(phone.adb_serial), phone.device_id, default_timeout_s=20.0)
    try:
        return phone, probe_phone(session, phone)
    except FarmError as error:
        return replace(phone, error=str(error)), None


def _quarantined(phone: Phone, mark: device_store.Quarantine | None) -> Phone:
    """A phone the last sweep's recovery ladder gave up on is shown so, with why (a leased one
    stays leased: it is in use now)."""
    if mark is None or phone.state is PhoneState.LEASED:
        return phone
    return replace(phone, state=PhoneState.QUARANTINED, error=f"quarantined: {mark.reason}")


def _summary(phone: Phone, caps: Capabilities | None) -> dict[str, Any]:
    charging = [c.node.path for c in caps.charging if c.node.present] if caps else []
    return {
        "id": phone.device_id,
        "host": phone.host,
        "serial": phone.serial,
        "adb_serial": phone.adb_serial,
        "usb": phone.usb,
        "shares_serial": phone.shares_serial,
        "state": str(phone.state),
        "model": phone.model,
        "abi": phone.abi,
        "battery_pct": phone.battery_pct,
        "temperature_c": phone.temperature_c,
        "gpu_family": caps.gpu.family.value if caps else None,
        "gpu_busy": caps.gpu.busy.path if caps and caps.gpu.busy else None,
        "opencl": caps.has_opencl if caps else None,
        "opencl_devices": (
            [d.to_json() for d in caps.opencl_devices] if caps and caps.opencl_devices is not None else None
        ),
        "root": caps.root.available if caps else None,
        "charging_control": charging[0] if charging else None,
        "error": phone.error,
        "props": dict(sorted(phone.props.items())),  # getprop as the phone answered it
    }


def _fmt(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.0f}{suffix}" if suffix == "%" else f"{value:.1f}{suffix}"
    return terminal(f"{value}{suffix}")  # model, ABI, paths: the phone's own strings


@click.command("devices")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per phone, in a list.")
@adb_port_option
@click.option(
    "--no-probe", is_flag=True, help="Skip the capability probe (faster; identity and health only)."
)
@results_option
@config_option
def devices(
    as_json: bool, adb_port: int | None, no_probe: bool, results: str | None, config: Path | None
) -> None:
    """List every phone the adb server sees: identity host/serial, state (online, offline,
    unauthorized, leased, or quarantined: a sweep's recovery ladder gave up on it, with why),
    model, ABI, battery, temperature and capabilities from farm-probe; --json adds each
    phone's properties (getprop), e.g. a virtual phone's ro.vphone.slowdown.

    \b
    Example:
      farm devices
      farm devices --json | jq '.[] | select(.opencl) | .id'
    """
    leased: dict[str, int] = {}
    quarantined: dict[str, device_store.Quarantine] = {}
    location = store_location(results, config)
    if location.url is not None or location.sqlite_path.exists():
        with Store(location, read_only=True) as store:
            leased = ownership.leased_devices(store)
            quarantined = device_store.quarantines(store)
    with open_fleet(config, adb_port) as fleet:  # the local adb server + lab hosts (farm.yaml)
        endpoint = fleet.endpoints[0] if fleet.endpoints else LocalAdbEndpoint(adb_port)
        phones = [
            _quarantined(phone, quarantined.get(phone.device_id))
            for phone in discover(fleet.endpoints, leased=lambda device_id: device_id in leased)
        ]
        probed: list[tuple[Phone, Capabilities | None]] = [(p, None) for p in phones]
        if not no_probe and phones:
            with ThreadPoolExecutor(max_workers=min(8, len(phones))) as pool:
                probed = list(pool.map(lambda p: _with_capabilities(fleet.endpoint_for(p.host), p), phones))
    rows = [_summary(phone, caps) for phone, caps in probed]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo(f"no phones on the adb server at port {endpoint.port}")
        return
    header = ("ID", "STATE", "MODEL", "ABI", "BATT", "TEMP", "GPU", "OPENCL", "ROOT", "CHARGING CONTROL")
    table = [header] + [
        (
            _fmt(r["id"]),
            r["state"],
            _fmt(r["model"]),
            _fmt(r["abi"]),
            _fmt(r["battery_pct"], "%"),
            _fmt(r["temperature_c"], "C"),
            _fmt(r["gpu_family"]),
            _fmt(r["opencl"]),
            _fmt(r["root"]),
            _fmt(r["charging_control"]),
        )
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        click.echo(
            "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    for r in rows:
        if r["error"]:
            click.echo(terminal(f"farm: {r['id']}: {r['error']}"), err=True)
    for identity, group in duplicate_serials([phone for phone, _ in probed]).items():
        names = ", ".join(p.device_id for p in group)
        click.echo(terminal(f"farm: {identity}: {len(group)} phones report this serial: {names}"), err=True)
