"""dumpsys (battery, meminfo, thermalservice, -l) and cmd (battery, package, power,
thermalservice, -l), in the services' own text layouts. The physics writes `dumpsys
thermalservice` into the control dir and reads the power-HAL flags `cmd` writes there
(vphone.ctlfiles)."""

from __future__ import annotations

import contextlib
import os
import sys
import time

import ctlstore
import t_deviceidle
import t_services
import toolerrors

BASE_SERVICES = (
    "activity",
    "battery",
    "deviceidle",
    "display",
    "input",
    "meminfo",
    "package",
    "power",
    "settings",
    "window",
)
# `cmd SERVICE` = the am, wm, settings and input tools (from Android 11 `input` is `cmd input`)
SHELL_COMMANDS = ("activity", "window", "settings", "input")
THERMALSERVICE_SDK = 29  # Android 10
CMD_POWER_SDK = 30  # Android 11: `cmd power` (fixed performance mode)
THERMALSERVICE_FILE = "thermalservice.txt"  # written by the physics (host side)
FIXED_PERFORMANCE_FILE = ctlstore.shared(
    "fixed_performance"
)  # read by the physics: "1" on, absent or "0" off
FIXED_PERFORMANCE_SUPPORTED = "fixed_performance.supported"  # the profile's power HAL has the mode
FIXED_PERFORMANCE_APPLIED = "fixed_performance.applied"  # the physics: the mode the clocks show
HAL_CALL_TIMEOUT_S = 5.0
THERMAL_OVERRIDE_FILE = ctlstore.shared("thermal_override")  # `cmd thermalservice override-status N`: N
THERMAL_STATUS_MAX = 6  # IThermalService THERMAL_STATUS_SHUTDOWN
IDLE_THERMALSERVICE = (
    "IsStatusOverride: false\nThermalEventListeners:\n\tcallbacks: 0\n"
    "ThermalStatusListeners:\n\tcallbacks: 0\nThermal Status: 0\n"
)
BOOL_KEYS = {"ac": "ac", "usb": "usb", "wireless": "wireless", "dock": "dock", "present": "present"}
INT_KEYS = {"status": "status", "level": "level", "counter": "charge_counter_uah", "temp": "temperature_dc"}


def _sdk() -> int:
    try:
        return int(ctlstore.read_json("props/ro.json", {}).get("ro.build.version.sdk", "34"))
    except ValueError:
        return 34


def services() -> tuple[str, ...]:
    """The services this Android release has, sorted as `dumpsys -l` lists them."""
    extra = ("thermalservice",) if _sdk() >= THERMALSERVICE_SDK else ()
    return tuple(sorted((*BASE_SERVICES, *extra)))


def thermalservice() -> int:
    sys.stdout.write(ctlstore.read_text(THERMALSERVICE_FILE, IDLE_THERMALSERVICE))
    return 0


def power(args: list[str]) -> int:
    """`cmd power ...` (Android 11+): set-fixed-performance-mode-enabled VALUE, parsed as
    Boolean.parseBoolean; a power HAL without the mode fails as PowerManagerShellCommand does."""
    if args[:1] == ["set-fixed-performance-mode-enabled"] and len(args) == 2:
        if not os.path.exists(ctlstore.path(FIXED_PERFORMANCE_SUPPORTED)):
            sys.stderr.write(
                "Failed to set FIXED_PERFORMANCE mode\n"
                "This is likely because Power HAL AIDL is not implemented on this device\n"
            )
            return 255
        wanted = "1\n" if args[1].lower() == "true" else "0\n"
        ctlstore.write_text(FIXED_PERFORMANCE_FILE, wanted)
        return _await_hal(FIXED_PERFORMANCE_APPLIED, wanted)
    if args and args[0] not in ("help", "-h", "set-fixed-performance-mode-enabled"):
        return toolerrors.unknown_command(args[0])
    return toolerrors.help_text(
        "Power manager (power) commands:\n  help\n    Print this help text.\n\n"
        "  set-adaptive-power-saver-enabled [true|false]\n  set-mode MODE\n"
        "  set-fixed-performance-mode-enabled [true|false]\n    enable or disable fixed performance mode\n"
    )


def _await_hal(rel: str, wanted: str) -> int:
    """The power HAL call returns once the kernel nodes show the mode (a read-back right after
    `cmd power` sees the fixed clocks); the physics says so in `rel`. A phone whose physics
    does not answer fails as a HAL call that timed out does."""
    deadline = time.monotonic() + HAL_CALL_TIMEOUT_S
    while ctlstore.read_text(rel, "") != wanted:
        if time.monotonic() > deadline:
            sys.stderr.write("Failed to set FIXED_PERFORMANCE mode\n")
            return 255
        time.sleep(0.002)
    return 0


def thermalservice_cmd(args: list[str]) -> int:
    """ThermalManagerService's shell command: override-status STATUS, reset."""
    if args[:1] == ["override-status"] and len(args) == 2:
        if not (args[1].isdigit() and int(args[1]) <= THERMAL_STATUS_MAX):
            sys.stderr.write(f"Error: Invalid thermal status: {args[1]}\n")
            return 255
        ctlstore.write_text(THERMAL_OVERRIDE_FILE, f"{int(args[1])}\n")
        return 0
    if args == ["reset"]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ctlstore.path(THERMAL_OVERRIDE_FILE))
        return 0
    if args and args[0] not in ("help", "-h"):
        return toolerrors.unknown_command(args[0])
    return toolerrors.help_text(
        "Thermal service (thermalservice) commands:\n  help\n    Print this help text.\n"
        "  override-status STATUS\n    sets and locks the thermal status of the device to STATUS.\n"
        "    status code is defined in android.os.Temperature.\n"
        "  reset\n    unlocks the thermal status of the device.\n"
    )


def _b(v: object) -> str:
    return "true" if v else "false"


def battery_dump() -> str:
    state = ctlstore.read_json("battery/state.json", {})
    override = ctlstore.read_json(ctlstore.BATTERY_OVERRIDE_FILE, {})
    stopped = bool(override)
    if stopped:
        state = {**override.get("frozen", state), **override.get("set", {})}
    lines = ["Current Battery Service state:"]
    if stopped:
        lines.append("  (UPDATES STOPPED -- use 'reset' to restart)")
    lines += [
        f"  AC powered: {_b(state.get('ac'))}",
        f"  USB powered: {_b(state.get('usb'))}",
        f"  Wireless powered: {_b(state.get('wireless'))}",
    ]
    if _sdk() >= 33:
        lines.append(f"  Dock powered: {_b(state.get('dock'))}")
    lines += [
        f"  Max charging current: {state.get('max_charging_current_ua', 0)}",
        f"  Max charging voltage: {state.get('max_charging_voltage_uv', 0)}",
        f"  Charge counter: {state.get('charge_counter_uah', 0)}",
        f"  status: {state.get('status', 1)}",
        f"  health: {state.get('health', 1)}",
        f"  present: {_b(state.get('present', True))}",
        f"  level: {state.get('level', 0)}",
        f"  scale: {state.get('scale', 100)}",
        f"  voltage: {state.get('voltage_mv', 0)}",
        f"  temperature: {state.get('temperature_dc', 0)}",
        f"  technology: {state.get('technology', 'Li-ion')}",
    ]
    return "\n".join(lines) + "\n"


def battery(args: list[str]) -> int:
    if not args:
        sys.stdout.write(battery_dump())
        return 0
    verb = args[0]
    override = ctlstore.read_json(ctlstore.BATTERY_OVERRIDE_FILE, {})
    if verb == "reset":
        ctlstore.write_json(ctlstore.BATTERY_OVERRIDE_FILE, {})
        return 0
    frozen = override.get("frozen") or ctlstore.read_json("battery/state.json", {})
    changes = dict(override.get("set", {}))
    if verb == "unplug":
        changes.update(ac=False, usb=False, wireless=False, dock=False)
    elif verb == "set" and len(args) == 3:
        key, value = args[1], args[2]
        try:
            if key in BOOL_KEYS:
                changes[BOOL_KEYS[key]] = int(value) != 0
            elif key in INT_KEYS:
                changes[INT_KEYS[key]] = int(value)
            elif key != "invalid":
                sys.stdout.write(f"Unknown set option: {key}\n")
                return 1
        except ValueError:
            sys.stdout.write(f"Bad value: {value}\n")
            return 1
    elif verb in ("help", "-h", "set"):
        return toolerrors.help_text(
            "Battery service (battery) commands:\n  help\n"
            "  set [-f] [ac|usb|wireless|status|level|temp|present|invalid] <value>\n"
            "  unplug [-f]\n  reset [-f] [ac|usb|wireless]\n"
        )
    else:
        return toolerrors.unknown_command(verb)
    ctlstore.write_json(ctlstore.BATTERY_OVERRIDE_FILE, {"frozen": frozen, "set": changes})
    return 0


def power_dump() -> str:
    """PowerManagerService's dump, the lines a harness reads (dumpsys power: "Power Manager
    State:" with mWakefulness=Awake|Asleep, mStayOn); the physics keeps power.json's screen."""
    state = ctlstore.read_json(ctlstore.POWER_FILE, {"screen_on": True, "stay_on": 0})
    awake = "Awake" if state.get("screen_on", True) else "Asleep"
    return (
        "POWER MANAGER (dumpsys power)\n\nPower Manager State:\n"
        f"  mWakefulness={awake}\n  mWakefulnessChanging=false\n"
        f"  mStayOn={_b(bool(state.get('stay_on', 0)))}\n"
    )


def _status_kb(pid: str) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB":
                    out[key] = int(parts[0])
    except OSError:
        pass
    return out


def _pss_kb(pid: str, rss_kb: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss_kb


def _find_pid(target: str) -> str | None:
    if target.isdigit():
        return target if os.path.isdir(f"/proc/{target}") else None
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if argv0 == target or os.path.basename(argv0) == target:
            return pid
    return None


def meminfo(args: list[str]) -> int:
    targets = [a for a in args if not a.startswith("-")]
    if not targets:
        with open("/proc/meminfo", encoding="utf-8") as f:
            sys.stdout.write("Total RAM: " + f.readline().split(":")[1].strip() + "\n")
        return 0
    pid = _find_pid(targets[0])
    if pid is None:
        sys.stdout.write(f"No process found for: {targets[0]}\n")
        return 0
    st = _status_kb(pid)
    rss = st.get("VmRSS", 0)
    pss = _pss_kb(pid, rss)
    swap = st.get("VmSwap", 0)
    with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
        name = f.read().strip()
    up_ms = int(time.monotonic() * 1000)
    w = sys.stdout.write
    w("Applications Memory Usage (in Kilobytes):\n")
    w(f"Uptime: {up_ms} Realtime: {up_ms}\n\n")
    w(f"** MEMINFO in pid {pid} [{name}] **\n")
    w("                   Pss  Private  Private  SwapPss      Rss     Heap     Heap     Heap\n")
    w("                 Total    Dirty    Clean    Dirty    Total     Size    Alloc     Free\n")
    w("                ------   ------   ------   ------   ------   ------   ------   ------\n")
    w(f"  Native Heap {pss:>9} {pss:>8} {0:>8} {swap:>8} {rss:>8} {rss:>8} {rss:>8} {0:>8}\n")
    w(f"        TOTAL {pss:>9} {pss:>8} {0:>8} {swap:>8} {rss:>8} {rss:>8} {rss:>8} {0:>8}\n\n")
    w(" App Summary\n")
    w("                       Pss(KB)                        Rss(KB)\n")
    w("                        ------                         ------\n")
    w(f"           Java Heap: {0:>8}                       {0:>8}\n")
    w(f"         Native Heap: {pss:>8}                       {rss:>8}\n")
    w(f"            Graphics: {0:>8}                       {0:>8}\n\n")
    w(f"           TOTAL PSS: {pss:>8}            TOTAL RSS: {rss:>8}       TOTAL SWAP PSS: {swap:>8}\n")
    return 0


DUMPSYS_USAGE = (
    "usage: dumpsys\n         To dump all services.\nor:\n"
    "       dumpsys [-t TIMEOUT] [--priority LEVEL] [--pid] [--thread] [--help | -l | --skip SERVICES "
    "| SERVICE [ARGS]]\n"
    "         --help: shows this help\n         -l: only list services, do not dump them\n"
    "         -t TIMEOUT_SEC: TIMEOUT to use in seconds instead of default 10 seconds\n"
    "         --skip SERVICES: dumps all services but SERVICES (comma-separated list)\n"
    "         SERVICE [ARGS]: dumps only service SERVICE, optionally passing ARGS to it\n"
)
# dumpsys' own options before the service name; the value-taking ones swallow the next word.
DUMPSYS_FLAGS = {
    "-l": 0,
    "-t": 1,
    "-T": 1,
    "--priority": 1,
    "--skip": 1,
    "--proto": 0,
    "--pid": 0,
    "--thread": 0,
    "--stability": 0,
    "--clients": 0,
    "--dump": 0,
    "-c": 0,
}


def dumpsys(args: list[str]) -> int:
    known = services()
    while args and args[0].startswith("-") and args[0] != "-l":
        if args[0] in ("-h", "--help"):
            sys.stderr.write(DUMPSYS_USAGE)
            return 0
        if args[0] not in DUMPSYS_FLAGS:
            sys.stderr.write(f"dumpsys: unrecognized option '{args[0]}'\n\n" + DUMPSYS_USAGE)
            return 255
        args = args[1 + DUMPSYS_FLAGS[args[0]] :]
    if not args:
        for s in known:
            sys.stdout.write(f"DUMP OF SERVICE {s}:\n")
        return 0
    if args[0] == "-l":
        sys.stdout.write("Currently running services:\n" + "".join(f"  {s}\n" for s in known))
        return 0
    if args[0] == "battery":
        battery(args[1:])
        return 0  # dumpsys' status is its own, not the service's
    if args[0] == "meminfo":
        return meminfo(args[1:])
    if args[0] == "power":
        sys.stdout.write(power_dump())
        return 0
    if args[0] == "deviceidle":
        return t_deviceidle.deviceidle(args[1:])
    if args[0] == "thermalservice" and args[0] in known:
        return thermalservice()
    if args[0] in t_services.DUMPERS:
        return t_services.DUMPERS[args[0]](args[1:])
    if args[0] in known:
        return 0
    sys.stderr.write(f"Can't find service: {args[0]}\n")
    return 0


def cmd(args: list[str]) -> int:
    known = services()
    if not args:
        sys.stderr.write(
            "cmd: No service specified; use -l to list all running services. "
            "Use -w to start and wait for a service.\n"
        )
        return 20
    if args[0] == "-l":
        sys.stdout.write("Currently running services:\n" + "".join(f"  {s}\n" for s in known))
        return 0
    if args[0] == "power":
        if _sdk() < CMD_POWER_SDK:
            sys.stderr.write("cmd: Can't find service: power\n")
            return 20
        return power(args[1:])
    if args[0] == "thermalservice" and args[0] in known:
        return thermalservice_cmd(args[1:])
    if args[0] == "battery":
        return battery(args[1:])
    if args[0] == "deviceidle":
        return t_deviceidle.deviceidle(args[1:])
    if args[0] == "package":
        import t_pm

        return t_pm.pm(args[1:])
    if args[0] in SHELL_COMMANDS and args[0] in known:
        import t_misc
        import t_settings

        tools = {
            "activity": t_misc.am,
            "window": t_misc.wm,
            "settings": t_settings.settings,
            "input": t_misc.input_,
        }
        tool = tools[args[0]]
        return tool(args[1:])
    if args[0] in known:
        return 0
    sys.stderr.write(f"cmd: Can't find service: {args[0]}\n")
    return 20
