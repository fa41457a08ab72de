"""Phones the store knows: identity, capabilities, last health, and the charging- and clock-restore
markers."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from farm.store.backend import Connection
from farm.store.db import Store


@dataclass(frozen=True)
class ChargingMarker:
    """Farm turned charging off on this phone; write `enable_value` to `node` to restore it."""

    device_id: str
    node: str
    enable_value: str


def record_device(
    store: Store,
    device_id: str,
    *,
    host: str,
    serial: str,
    adb_serial: str | None = None,
    model: str | None = None,
    abi: str | None = None,
    capabilities: dict[str, Any] | None = None,
    state: str | None = None,
    battery_pct: float | None = None,
    temperature_c: float | None = None,
) -> None:
    store.execute(
        "INSERT INTO devices (device_id, host, serial, adb_serial, model, abi, capabilities_json, state, "
        "battery_pct, temperature_c, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (device_id) DO UPDATE SET "
        "adb_serial = COALESCE(excluded.adb_serial, devices.adb_serial), "
        "model = COALESCE(excluded.model, devices.model), abi = COALESCE(excluded.abi, devices.abi), "
        "capabilities_json = COALESCE(excluded.capabilities_json, devices.capabilities_json), "
        "state = COALESCE(excluded.state, devices.state), "
        "battery_pct = COALESCE(excluded.battery_pct, devices.battery_pct), "
        "temperature_c = COALESCE(excluded.temperature_c, devices.temperature_c), "
        "last_seen = excluded.last_seen",
        (
            device_id,
            host,
            serial,
            adb_serial,
            model,
            abi,
            json.dumps(capabilities, sort_keys=True, default=str) if capabilities is not None else None,
            state,
            battery_pct,
            temperature_c,
            time.time(),
        ),
    )


def _ensure_device(conn: Connection, device_id: str) -> None:
    """A row for a phone the store has not seen yet (a marker must be writable before anything)."""
    conn.execute(
        "INSERT INTO devices (device_id, host, serial, last_seen) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (device_id) DO NOTHING",
        (device_id, *device_id.split("/", 1), time.time()),
    )


def mark_charging_disabled(store: Store, device_id: str, node: str, enable_value: str) -> None:
    """Written BEFORE charging is switched off, so a crash in between still gets it restored."""
    with store.transaction() as conn:
        _ensure_device(conn, device_id)
        conn.execute(
            "UPDATE devices SET charging_disabled = 1, charging_node = ?, charging_enable_value = ? "
            "WHERE device_id = ?",
            (node, enable_value, device_id),
        )


def clear_charging_disabled(store: Store, device_id: str) -> None:
    store.execute("UPDATE devices SET charging_disabled = 0 WHERE device_id = ?", (device_id,))


def charging_markers(store: Store) -> list[ChargingMarker]:
    rows = store.query(
        "SELECT device_id, charging_node, charging_enable_value FROM devices WHERE charging_disabled = 1"
    )
    return [ChargingMarker(r["device_id"], r["charging_node"], r["charging_enable_value"]) for r in rows]


def mark_clocks_changed(store: Store, device_id: str, restore_json: str) -> None:
    """Written BEFORE farm touches the phone's clocks: what puts them back (farm.engine.clocks)."""
    with store.transaction() as conn:
        _ensure_device(conn, device_id)
        conn.execute(
            "UPDATE devices SET clocks_restore_json = ? WHERE device_id = ?", (restore_json, device_id)
        )


def clear_clocks_changed(store: Store, device_id: str) -> None:
    store.execute("UPDATE devices SET clocks_restore_json = NULL WHERE device_id = ?", (device_id,))


def clocks_marker(store: Store, device_id: str) -> str | None:
    rows = store.query("SELECT clocks_restore_json FROM devices WHERE device_id = ?", (device_id,))
    return rows[0]["clocks_restore_json"] if rows else None


def mark_screen_held(store: Store, device_id: str, timeout: str) -> None:
    """Written BEFORE the screen timeout is raised: the phone's own value (`null`: unset). An
    existing marker is kept: it holds the value from before an interrupted run raised it."""
    with store.transaction() as conn:
        _ensure_device(conn, device_id)
        conn.execute(
            "UPDATE devices SET screen_timeout_restore = ? "
            "WHERE device_id = ? AND screen_timeout_restore IS NULL",
            (timeout, device_id),
        )


def clear_screen_held(store: Store, device_id: str) -> None:
    store.execute("UPDATE devices SET screen_timeout_restore = NULL WHERE device_id = ?", (device_id,))


def screen_marker(store: Store, device_id: str) -> str | None:
    """The screen timeout to put back on this phone, or None when farm holds nothing there."""
    rows = store.query("SELECT screen_timeout_restore FROM devices WHERE device_id = ?", (device_id,))
    return rows[0]["screen_timeout_restore"] if rows else None


def screens_marked(store: Store) -> set[str]:
    """Phones a farm process holds, or left, with the screen timeout raised."""
    rows = store.query("SELECT device_id FROM devices WHERE screen_timeout_restore IS NOT NULL")
    return {r["device_id"] for r in rows}


def clocks_marked(store: Store) -> set[str]:
    """Phones whose clocks a farm process holds or left changed."""
    rows = store.query("SELECT device_id FROM devices WHERE clocks_restore_json IS NOT NULL")
    return {r["device_id"] for r in rows}


@dataclass(frozen=True)
class Quarantine:
    """A sweep's recovery ladder gave up on this phone (farm.engine.ladder)."""

    device_id: str
    reason: str
    at: float
    execution_id: int | None


def quarantine(store: Store, device_id: str, reason: str, execution_id: int) -> None:
    with store.transaction(exclusive=False) as conn:
        conn.execute(
            "INSERT INTO devices (device_id, host, serial, last_seen) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (device_id) DO NOTHING",
            (device_id, *device_id.split("/", 1), time.time()),
        )
        conn.execute(
            "UPDATE devices SET quarantined_at = ?, quarantine_reason = ?, quarantined_by = ?, "
            "state = 'quarantined' WHERE device_id = ?",
            (store.now(), reason, execution_id, device_id),
        )


def clear_quarantine(store: Store, device_id: str) -> None:
    """A sweep could use the phone again: it is no longer shown quarantined."""
    store.execute(
        "UPDATE devices SET quarantined_at = NULL, quarantine_reason = NULL, quarantined_by = NULL "
        "WHERE device_id = ? AND quarantined_at IS NOT NULL",
        (device_id,),
    )


def quarantines(store: Store) -> dict[str, Quarantine]:
    rows = store.query(
        "SELECT device_id, quarantine_reason, quarantined_at, quarantined_by FROM devices "
        "WHERE quarantined_at IS NOT NULL"
    )
    return {
        r["device_id"]: Quarantine(
            r["device_id"], r["quarantine_reason"], r["quarantined_at"], r["quarantined_by"]
        )
        for r in rows
    }


def device_rows(store: Store) -> list[dict[str, Any]]:
    return [dict(r) for r in store.query("SELECT * FROM devices ORDER BY device_id")]


@dataclass(frozen=True)
class StoredIdentity:
    """What the store knows a phone as (its model and ABI from the last time it was prepared)."""

    serial: str
    model: str | None
    abi: str | None


def identity_of(store: Store, device_id: str) -> StoredIdentity | None:
    rows = store.query("SELECT serial, model, abi FROM devices WHERE device_id = ?", (device_id,))
    return StoredIdentity(rows[0]["serial"], rows[0]["model"], rows[0]["abi"]) if rows else None
