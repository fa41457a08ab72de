"""svc, input, am, wm, reboot, getenforce, setenforce: the controls a benchmark harness uses,
with state in /dev/.farm."""

from __future__ import annotations

import os
import sys
import time

import ctlstore
import t_logcat
import t_pm
import t_services
import toolerrors

STAYON = {"true": 7, "false": 0, "ac": 1, "usb": 2, "wireless": 4}
KEYCODES = {
    "KEYCODE_WAKEUP": 224,
    "KEYCODE_SLEEP": 223,
    "KEYCODE_POWER": 26,
    "KEYCODE_HOME": 3,
    "KEYCODE_MENU": 82,
    "KEYCODE_BACK": 4,
}
REBOOT_WAIT_S = 30.0


def _log(name: str, line: str) -> None:
    fd = ctlstore.open_nofollow(ctlstore.shared(name), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(f"{time.monotonic_ns()} {line}\n")
    # ActivityManager / InputDispatcher say the same in the phone's log
    t_logcat.append("ActivityManager" if name == "am.log" else "InputDispatcher", line)
    if name == "input.log":  # every input event is a Boost.INTERACTION to the power HAL
        ctlstore.write_text(ctlstore.POWER_HINT_FILE, f"interaction {time.monotonic_ns()}\n")


def _power() -> dict[str, object]:
    return dict(ctlstore.read_json(ctlstore.POWER_FILE, {"screen_on": True, "stay_on": 0}))


def svc(args: list[str]) -> int:
    if len(args) == 3 and args[:2] == ["power", "stayon"] and args[2] in STAYON:
        state = _power()
        state["stay_on"] = STAYON[args[2]]
        ctlstore.write_json(ctlstore.POWER_FILE, state)
        glob = ctlstore.read_json("settings/global.json", {})
        glob["stay_on_while_plugged_in"] = str(STAYON[args[2]])
        ctlstore.write_json("settings/global.json", glob)
        return 0
    sys.stderr.write("usage: svc power stayon [true|false|usb|ac|wireless]\n")
    return 1


def input_(args: list[str]) -> int:
    if args and args[0] in ("touchscreen", "keyboard", "trackball", "mouse"):
        args = args[1:]
    if not args:
        sys.stderr.write("Usage: input [<source>] <command> [<arg>...]\n")
        return 1
    verb, rest = args[0], args[1:]
    if verb == "keyevent" and rest:
        codes = [a for a in rest if a not in ("--longpress", "--doubletap")]
        state = _power()
        for code in codes:
            # KeyEvent.keyCodeFromString: a number, or a name with or without "KEYCODE_"; an
            # unknown one is KEYCODE_UNKNOWN (0), which InputShellCommand injects without a word.
            name = "KEYCODE_" + code.removeprefix("KEYCODE_")
            key = int(code) if code.isdigit() else KEYCODES.get(name, 0)
            if key == 224:
                state["screen_on"] = True
            elif key == 223:
                state["screen_on"] = False
            elif key == 26:
                state["screen_on"] = not state.get("screen_on", True)
            _log("input.log", f"keyevent {code}")
        state["activity_ns"] = time.monotonic_ns()  # any key is user activity (PowerManager)
        ctlstore.write_json(ctlstore.POWER_FILE, state)
        return 0
    if (verb == "tap" and len(rest) == 2) or (verb == "swipe" and len(rest) in (4, 5)):
        try:
            [int(float(v)) for v in rest]
        except ValueError:
            sys.stderr.write(f"Error: bad coordinates for {verb}\n")
            return 1
        if verb == "swipe" and len(rest) == 5:
            time.sleep(min(int(rest[4]), 10_000) / 1000)
        _log("input.log", f"{verb} {' '.join(rest)}")
        return 0
    if verb == "text" and rest:
        _log("input.log", f"text {' '.join(rest)}")
        return 0
    sys.stderr.write(f"Error: Unknown command or bad arguments: {' '.join(args)}\n")
    return 1


def _opt(args: list[str], flag: str) -> str | None:
    if flag in args:
        i = args.index(flag)
        return args[i + 1] if i + 1 < len(args) else None
    return None


AM_HELP = (
    "Activity manager (activity) commands:\n  help\n      Print this help text.\n"
    "  start-activity [-W] [-n COMPONENT | -a ACTION] ...\n  start-service ...\n"
    "  force-stop PACKAGE\n  broadcast [-a ACTION] ...\n"
)
WM_HELP = (
    "Window manager (window) commands:\n  help\n      Print this help text.\n"
    "  size [reset|WxH|WdpxHdp]\n    Return or override display size.\n"
    "  density [reset|DENSITY]\n    Return or override display density.\n"
)


def _component(comp: str) -> tuple[str, str]:
    """ComponentName.unflattenFromString: a class starting with "." is in the package."""
    package, _, cls = comp.partition("/")
    return package, package + cls if cls.startswith(".") else cls


def _start(verb: str, rest: list[str]) -> int:
    """ActivityManagerShellCommand.runStartActivity / runStartService: the intent on stdout; an
    explicit component whose package is not installed is START_CLASS_NOT_FOUND ("Error type 3",
    then the error, on stderr unless -W), and the status stays 0; a service: "Error: Not found;
    no service started." and status 255."""
    comp = _opt(rest, "-n")
    action = _opt(rest, "-a")
    parts = [f"act={action}"] if action else []
    parts += [f"cmp={comp}"] if comp else []
    what = " ".join(parts)
    _log("am.log", f"{verb} {what}")
    service = verb.startswith("start-s") or verb in ("startservice", "startforegroundservice")
    sys.stdout.write(f"Starting{' service' if service else ''}: Intent {{ {what} }}\n")
    known = comp is None or _component(comp)[0] in t_pm.apks()
    if service:
        if not known:
            sys.stderr.write("Error: Not found; no service started.\n")
            return toolerrors.SHELL_COMMAND_FAILED
        return 0
    out = sys.stdout if "-W" in rest else sys.stderr
    if comp and not known:
        package, cls = _component(comp)
        out.write(f"Error type 3\nError: Activity class {{{package}/{cls}}} does not exist.\n")
        return 0
    if "-W" in rest:
        sys.stdout.write(
            f"Status: ok\nLaunchState: COLD\nActivity: {comp}\nTotalTime: 0\nWaitTime: 0\nComplete\n"
        )
    return 0


def _instrument(rest: list[str]) -> int:
    """Instrument.run: no instrumentation of that name (farm's phones run no test APKs) is
    reported to the watcher as INSTRUMENTATION_STATUS lines, then startInstrumentation's false
    becomes "INSTRUMENTATION_FAILED" (an AndroidException: BasicShellCommandHandler prints it,
    status 255)."""
    operands = [a for a in rest if not a.startswith("-")]
    failed = "\nException occurred while executing 'instrument':\n"
    if not operands:  # ShellCommand.getNextArgRequired
        last = rest[-1] if rest else "instrument"
        sys.stderr.write(f'{failed}java.lang.IllegalArgumentException: Argument expected after "{last}"\n')
        return toolerrors.SHELL_COMMAND_FAILED
    package, cls = _component(operands[-1])
    info = f"ComponentInfo{{{package}/{cls}}}"
    sys.stdout.write(
        f"INSTRUMENTATION_STATUS: Error=Unable to find instrumentation info for: {info}\n"
        "INSTRUMENTATION_STATUS_CODE: -1\n"
    )
    sys.stderr.write(f"{failed}android.util.AndroidException: INSTRUMENTATION_FAILED: {package}/{cls}\n")
    return toolerrors.SHELL_COMMAND_FAILED


def am(args: list[str]) -> int:
    if not args or args[0] in ("help", "-h"):
        return toolerrors.help_text(AM_HELP)
    verb, rest = args[0], args[1:]
    if verb in ("start", "start-activity", "startservice", "start-service", "start-foreground-service"):
        return _start(verb, rest)
    if verb == "instrument":
        return _instrument(rest)
    if verb == "force-stop" and rest:
        _log("am.log", f"force-stop {rest[-1]}")
        return 0
    if verb == "broadcast":
        action = _opt(rest, "-a") or ""
        _log("am.log", f"broadcast {' '.join(rest)}")
        sys.stdout.write(
            f"Broadcasting: Intent {{ act={action} flg=0x400000 }}\nBroadcast completed: result=0\n"
        )
        return 0
    return toolerrors.unknown_command(verb)


def wm(args: list[str]) -> int:
    state = ctlstore.read_json(ctlstore.WM_FILE, {})
    if args[:1] == ["size"]:
        if len(args) == 1:
            sys.stdout.write(f"Physical size: {t_services.PHYSICAL_SIZE}\n")
            if "size" in state:
                sys.stdout.write(f"Override size: {state['size']}\n")
            return 0
        if args[1] == "reset":
            state.pop("size", None)
        else:
            state["size"] = args[1]
        ctlstore.write_json(ctlstore.WM_FILE, state)
        return 0
    if args[:1] == ["density"]:
        if len(args) == 1:
            sys.stdout.write(f"Physical density: {t_services.PHYSICAL_DENSITY}\n")
            if "density" in state:
                sys.stdout.write(f"Override density: {state['density']}\n")
            return 0
        if args[1] == "reset":
            state.pop("density", None)
        else:
            state["density"] = args[1]
        ctlstore.write_json(ctlstore.WM_FILE, state)
        return 0
    if not args or args[0] in ("help", "-h"):
        return toolerrors.help_text(WM_HELP)
    return toolerrors.unknown_command(args[0])


def reboot(args: list[str]) -> int:
    """Asks the world to reboot the phone (it kills every process, this one too)."""
    ctlstore.write_text(ctlstore.REBOOT_FILE, (args[0] if args else "") + "\n")
    deadline = time.monotonic() + REBOOT_WAIT_S
    while time.monotonic() < deadline and os.path.exists(ctlstore.path(ctlstore.REBOOT_FILE)):
        time.sleep(0.2)
    return 0


def getenforce(args: list[str]) -> int:
    usage = "usage: getenforce\n\nShows whether SELinux is disabled, enforcing, or permissive.\n"
    status = toolerrors.toybox_check("getenforce", args, usage=usage, most=0)
    if status is not None:
        return status
    mode = ctlstore.read_text(ctlstore.SELINUX_FILE, "Enforcing").strip() or "Enforcing"
    sys.stdout.write(f"{mode}\n")
    return 0


def setenforce(args: list[str]) -> int:
    modes = {"1": "Enforcing", "enforcing": "Enforcing", "0": "Permissive", "permissive": "Permissive"}
    usage = "usage: setenforce [enforcing|permissive|1|0]\n\nSets SELinux to enforcing or permissive.\n"
    status = toolerrors.toybox_check("setenforce", args, usage=usage, least=1, most=1)
    if status is not None:
        return status
    if args[0].lower() not in modes:
        sys.stderr.write(f"setenforce: Invalid state: {args[0]}\n")
        return 1
    if not ctlstore.is_root():
        sys.stderr.write(f"setenforce: Couldn't set enforcing status to '{args[0]}': Permission denied\n")
        return 1
    ctlstore.write_text(ctlstore.SELINUX_FILE, modes[args[0].lower()] + "\n")
    return 0
