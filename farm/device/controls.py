"""Phone controls a benchmark run needs: charging off/on through a vendor node, stay awake, screen.

Charging nodes (shared/reference/adb-and-telemetry.md 4.2) need root: through adbd running as root,
or `su`. Every write is verified by reading the node back. Nodes farm knows, with the value that
ENABLES charging and the one that DISABLES it, are in CHARGING_NODES.
"""

from __future__ import annotations

from dataclasses import dataclass

from farm.device.session import DeviceSession, quote_argv
from farm.errors import DevicePermanentError

# node path -> (value that enables charging, value that disables it), in the probe's order
# (device_agents/probe/power.c): VR-25/acc acc/ctrl-files.sh list_ch_switches, input-suspend
# switches first. Samsung's store_mode is a charge limit, not a switch.
_PMIC_GLINK = "/sys/devices/platform/soc/soc:qcom,pmic_glink/soc:qcom,pmic_glink:qcom,battery_charger"
CHARGING_NODES: dict[str, tuple[str, str]] = {
    "/sys/class/power_supply/battery/input_suspend": ("0", "1"),
    "/sys/class/qcom-battery/input_suspend": ("0", "1"),
    f"{_PMIC_GLINK}/force_charger_suspend": ("0", "1"),
    "/sys/class/battchg_ext/input_suspend": ("0", "1"),
    "/sys/kernel/debug/google_charger/input_suspend": ("0", "1"),
    "/sys/kernel/debug/google_charger/chg_suspend": ("0", "1"),
    "/sys/class/power_supply/battery/charging_enabled": ("1", "0"),
    "/sys/class/power_supply/battery/battery_charging_enabled": ("1", "0"),
    "/sys/class/power_supply/battery/charge_disable": ("0", "1"),
    "/sys/devices/platform/soc/soc:google,charger/charge_disable": ("0", "1"),
    "/sys/class/battchg_ext/charge_disable": ("0", "1"),
    "/sys/class/power_supply/battery/charge_enabled": ("1", "0"),
    "/sys/class/power_supply/charger/charge_enabled": ("1", "0"),
    "/sys/class/power_supply/main/charging_enabled": ("1", "0"),
    "/sys/class/power_supply/battery/op_disable_charge": ("0", "1"),
    "/sys/class/oplus_chg/battery/mmi_charging_enable": ("1", "0"),
    "/sys/devices/virtual/oplus_chg/battery/mmi_charging_enable": ("1", "0"),
    "/sys/devices/platform/soc/soc:oplus,chg_intf/oplus_chg/battery/mmi_charging_enable": ("1", "0"),
    "/sys/devices/platform/mt-battery/disable_charger": ("0", "1"),
    "/sys/class/power_supply/battery/batt_slate_mode": ("0", "1"),
}


@dataclass(frozen=True)
class ChargingControl:
    node: str
    enable_value: str
    disable_value: str


def charging_control_for(node: str) -> ChargingControl | None:
    values = CHARGING_NODES.get(node)
    if values is None:
        # Unknown vendor nodes are matched by name (the folder varies across vendors).
        name = node.rsplit("/", 1)[-1]
        values = next((v for k, v in CHARGING_NODES.items() if k.rsplit("/", 1)[-1] == name), None)
    return ChargingControl(node, *values) if values else None


# echo, not printf: a sysfs store takes each write(2) on its own, and toybox's printf (0.8.9, as
# Android 14 ships) writes "VALUE" and "\n" separately, so the kernel refuses the lone newline
# (EINVAL) after taking the value. The shell's echo writes the line at once. (farm's values
# never start with "-", which echo would take as an option.)
_WRITE = 'echo "$1" > "$2"'


def _write_and_check(value: str, node: str) -> list[str]:
    # Write then read back in the same call: one round trip per attempt.
    return ["sh", "-c", _WRITE + ' && [ "$(cat "$2")" = "$1" ]', "farm", value, node]


def write_as_root(session: DeviceSession, node: str, value: str) -> None:
    """Write `value` to a sysfs node as root and check it reads back; DevicePermanentError if the
    phone gives no way to do it (not rooted, SELinux)."""
    inner = _write_and_check(value, node)
    ways = {"direct": inner, "su -c": ["su", "-c", quote_argv(inner)], "su 0": ["su", "0", *inner]}
    # The way that worked last time on this phone goes first (one round trip per write).
    known = session.facts.get("root_write")
    order = sorted(ways, key=lambda way: way != known)
    for way in order:
        if session.shell(ways[way]).ok:
            session.facts["root_write"] = way
            return
    raise DevicePermanentError(session.device_id, f"cannot write {node} (needs root)")


# Writes each (value, node) pair of its arguments in order, then prints `node<TAB>ok|refused<TAB>
# what it reads`: the kernel refuses a bad value in the write itself (EINVAL), and clock nodes
# may read back other than written (a thermal cap lowers scaling_max_freq), so the caller judges
# both. The shell's own error line is dropped: it does not name the node.
_WRITE_MANY = (
    '[ "$(id -u)" = 0 ] || exit 13; while [ "$#" -ge 2 ]; do '
    'if echo "$1" > "$2" 2>/dev/null; then w=ok; else w=refused; fi; '
    'printf "%s\\t%s\\t%s\\n" "$2" "$w" "$(cat "$2" 2>/dev/null)"; shift 2; done'
)


@dataclass(frozen=True)
class RootWrites:
    """What write_many_as_root found: each node's read-back after the writes, and the nodes
    whose last write the phone refused (node -> the value it refused)."""

    readback: dict[str, str]
    refused: dict[str, str]


def parse_root_writes(stdout: str, writes: list[tuple[str, str]]) -> RootWrites:
    """The _WRITE_MANY script's lines, in write order (pure)."""
    readback: dict[str, str] = {}
    refused: dict[str, str] = {}
    lines = [line.split("\t", 2) for line in stdout.splitlines() if line.count("\t") >= 2]
    for (node, value), (_shown, status, read) in zip(writes, lines, strict=False):
        readback[node] = read
        if status == "refused":
            refused[node] = value
        else:
            refused.pop(node, None)  # a later write of the node took
    return RootWrites(readback, refused)


def write_many_as_root(session: DeviceSession, writes: list[tuple[str, str]]) -> RootWrites:
    """Write (node, value) pairs in order as root in one round trip; returns what each node reads
    after and which writes the phone refused. DevicePermanentError when the phone gives no root
    way to run it."""
    if not writes:
        return RootWrites({}, {})
    inner = ["sh", "-c", _WRITE_MANY, "farm", *(x for node, value in writes for x in (value, node))]
    ways = {"direct": inner, "su -c": ["su", "-c", quote_argv(inner)], "su 0": ["su", "0", *inner]}
    known = session.facts.get("root_write")
    for way in sorted(ways, key=lambda way: way != known):
        result = session.shell(ways[way])
        if result.ok:  # the script ran as root (it exits 13 otherwise)
            session.facts["root_write"] = way
            return parse_root_writes(result.stdout, writes)
    raise DevicePermanentError(session.device_id, f"cannot write {writes[0][0]} (needs root)")


def read_node(session: DeviceSession, node: str) -> str | None:
    text = session.read_text(node)
    return None if text is None else text.strip()


def set_charging(session: DeviceSession, control: ChargingControl, *, enabled: bool) -> None:
    write_as_root(session, control.node, control.enable_value if enabled else control.disable_value)


def charging_enabled(session: DeviceSession, control: ChargingControl) -> bool | None:
    value = read_node(session, control.node)
    if value is None:
        return None
    return value == control.enable_value


def stay_awake(session: DeviceSession, *, on: bool) -> None:
    """Keep the screen on while plugged (best effort: not every build has svc)."""
    session.shell(["svc", "power", "stayon", "true" if on else "false"])
    if on:
        session.shell(["input", "keyevent", "KEYCODE_WAKEUP"])


# The screen held on for a measurement, as the run script holds it (device_agents/run/farm-run.sh
# hold_screen): `svc power stayon` holds only while BatteryService sees USB power, which an
# input-suspend charging switch removes, so the user-activity timeout goes to its maximum (the
# phone's value restored after) and a wake-up key counts as activity.
_HOLD_SCREEN = (
    "t=$(settings get system screen_off_timeout 2>/dev/null); "
    'settings put system screen_off_timeout 2147483647 >/dev/null 2>&1 && echo "held=$t"; '
    "input keyevent KEYCODE_WAKEUP >/dev/null 2>&1; true"
)
_RELEASE_SCREEN = (
    'case $1 in ""|null) settings delete system screen_off_timeout ;; '
    '*) settings put system screen_off_timeout "$1" ;; esac >/dev/null 2>&1; true'
)


def screen_timeout(session: DeviceSession) -> str | None:
    """The phone's own screen_off_timeout (`null`: unset), None when it has no `settings`."""
    result = session.shell(["settings", "get", "system", "screen_off_timeout"])
    value = result.stdout.strip()
    return value if result.ok and (value == "null" or value.isdigit()) else None


def hold_screen(session: DeviceSession) -> str | None:
    """Hold the screen on; returns the phone's own timeout to restore ("" when unset), None when
    the phone has no `settings` to hold it with."""
    for line in session.script(_HOLD_SCREEN).stdout.splitlines():
        if line.startswith("held="):
            return line.removeprefix("held=")
    return None


def release_screen(session: DeviceSession, timeout: str | None) -> None:
    if timeout is not None:
        session.script(_RELEASE_SCREEN, timeout)
