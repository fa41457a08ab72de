"""The phone's conditions around a measurement: the temperature and battery gates, and charging
switched off for it and back on after.

The "charging disabled" marker is written to the store BEFORE the node is written, and cleared
only after charging is verified back on, so a crash anywhere in between is repaired by the next
farm process (farm.engine.recovery). Runs (farm.engine.lifecycle) and the idle baseline
(farm.engine.baseline) both go through here.
"""

from __future__ import annotations

from farm.device import controls
from farm.device.android import parse_dumpsys_battery, parse_hal_temperatures, parse_thermal_c
from farm.device.controls import ChargingControl
from farm.device.session import DeviceSession
from farm.engine.model import Gates, PreparedPhone
from farm.errors import FarmError, StoreError
from farm.store import Store
from farm.store import devices as device_store
from farm.telemetry.probe import Capabilities


def charging_control(caps: Capabilities) -> ChargingControl | None:
    """The charging node farm can write on this phone (itself or through root), or None."""
    switch = caps.charging_switch()
    if switch is None:
        return None
    return ChargingControl(switch.node.path, switch.enable_value, switch.disable_value)


def temperature_nodes(caps: Capabilities) -> list[str]:
    """Every readable thermal zone, plus the battery's own sensor when no zone is the battery."""
    zones = [zone for zone in caps.thermal if zone.node.usable]
    nodes = [zone.node.path for zone in zones]
    battery = caps.battery.temp
    if battery is not None and battery.usable and not any((z.type or z.zone) == "battery" for z in zones):
        nodes.append(battery.path)
    return list(dict.fromkeys(nodes))


def read_temperature_c(prepared: PreparedPhone) -> float | None:
    """The hottest thermal zone; with none readable the hottest sensor the thermal HAL shows
    (`dumpsys thermalservice`, as the run script reads it), else the battery's."""
    nodes = temperature_nodes(prepared.caps)
    temps = []
    if not any(zone.node.usable for zone in prepared.caps.thermal):
        dump = prepared.session.shell(["dumpsys", "thermalservice"]).stdout
        hal = parse_hal_temperatures(dump.splitlines())
        if hal:
            return max(hal.values())
    if nodes:
        result = prepared.session.script('for f in "$@"; do cat "$f" 2>/dev/null || echo x; done', *nodes)
        temps = [t for t in (parse_thermal_c(line) for line in result.stdout.splitlines()) if t is not None]
    if not temps:
        battery = parse_dumpsys_battery(prepared.session.shell(["dumpsys", "battery"]).stdout)
        return battery.temperature_c
    return max(temps)


def cooldown_limit_c(gates: Gates, idle_temperature_c: float | None) -> float:
    """The temperature a run may start at: max_temp_c, or less with within_c_of_idle (pure)."""
    if gates.within_c_of_idle is None or idle_temperature_c is None:
        return gates.max_temp_c
    return min(gates.max_temp_c, idle_temperature_c + gates.within_c_of_idle)


def battery_pct(prepared: PreparedPhone) -> float | None:
    """Battery level from the battery's power_supply `capacity` (what the health HAL hands
    BatteryService), `dumpsys battery` only where that node is unreadable. Never `dumpsys battery
    unplug`: it freezes the service's level and temperature (BatteryService mUpdatesStopped) and
    ends `svc power stayon` (PowerManagerService reads isPowered from the faked state)."""
    node = prepared.caps.battery.capacity
    if node is not None and node.usable:
        text = prepared.session.read_text(node.path)
        if text is not None and text.strip().isdigit():
            return float(text.strip())
    return parse_dumpsys_battery(prepared.session.shell(["dumpsys", "battery"]).stdout).level_pct


def disable_charging(prepared: PreparedPhone, store: Store, notes: list[str]) -> bool:
    """Charging off (marker first); False with a note when the phone gives no way to do it."""
    control = charging_control(prepared.caps)
    if control is None:
        notes.append("charging could not be disabled: no writable charging node")
        return False
    device_store.mark_charging_disabled(store, prepared.phone.device_id, control.node, control.enable_value)
    try:
        controls.set_charging(prepared.session, control, enabled=False)
    except FarmError as error:
        notes.append(f"charging could not be disabled: {error}")
        restore_charging(
            prepared.session, prepared.phone.device_id, store, control.node, control.enable_value
        )
        return False
    return True


def restore_charging(
    session: DeviceSession, device_id: str, store: Store, node: str, enable_value: str
) -> None:
    """Charging back on, verified, then the store marker cleared (kept if it fails)."""
    controls.write_as_root(session, node, enable_value)
    device_store.clear_charging_disabled(store, device_id)


def restore_power(prepared: PreparedPhone, store: Store, *, charging_off: bool) -> bool:
    """Charging back on (after it was turned off). Returns whether charging was restored; raises
    FarmError when the phone did not take it (the store marker stays, so recovery retries on the
    next start)."""
    control = charging_control(prepared.caps)
    if charging_off and control is not None:
        restore_charging(
            prepared.session, prepared.phone.device_id, store, control.node, control.enable_value
        )
        return True
    return False


def mark_screen(prepared: PreparedPhone, store: Store) -> str | None:
    """Before the screen is held on: the phone's own screen timeout in the store (the marker a
    phone that dies mid-run keeps, restored when it is back: farm.engine.recovery). Returns the
    value to restore: an older marker's (an interrupted run left the maximum set) or the one read;
    None when the phone has no `settings` (the script holds nothing then)."""
    device_id = prepared.phone.device_id
    kept = device_store.screen_marker(store, device_id)
    if kept is not None:
        return kept
    timeout = controls.screen_timeout(prepared.session)
    if timeout is not None:
        device_store.mark_screen_held(store, device_id, timeout)
    return timeout


def release_screen_marker(
    prepared: PreparedPhone, store: Store, restored_by_script: bool, notes: list[str]
) -> None:
    """After the run: drop the marker once the timeout is back (the script's word, or the host's
    own restore when the script could not say it); it stays when the phone is gone. A store
    that fails here must not lose the measured run (the scheduler's outbox keeps it): the marker
    stays, and the next contact restores a timeout that is already back."""
    device_id = prepared.phone.device_id
    try:
        timeout = device_store.screen_marker(store, device_id)
        if timeout is None:
            return
        if not restored_by_script:
            controls.release_screen(prepared.session, timeout)
        device_store.clear_screen_held(store, device_id)
    except StoreError as error:
        notes.append(f"screen timeout marker stays in the store until the next start: {error}")
    except FarmError as error:
        notes.append(f"screen timeout not restored yet: {error}")
