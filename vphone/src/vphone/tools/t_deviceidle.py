"""deviceidle (Doze): `cmd deviceidle` / `dumpsys deviceidle` force-idle, unforce, get.

Shell commands of AOSP's DeviceIdleController (frameworks/base/apex/jobscheduler/service/java/
com/android/server/DeviceIdleController.java, onShellCommand). Deep idle is what
PowerManagerService reports to the power HAL as Mode.DEVICE_IDLE, whose hint rewrites clock
limits (vphone/src/vphone/powerhal.py): the state goes to the physics as a power hint.
"""

from __future__ import annotations

import sys

import ctlstore

STATE = ctlstore.shared("deviceidle.json")


def _state() -> dict[str, str]:
    return dict(ctlstore.read_json(STATE, {"deep": "ACTIVE", "light": "ACTIVE"}))


def _set(state: dict[str, str]) -> None:
    ctlstore.write_json(STATE, state)
    ctlstore.write_text(ctlstore.POWER_HINT_FILE, f"idle {'on' if state['deep'] == 'IDLE' else 'off'}\n")


def deviceidle(args: list[str]) -> int:
    verb, rest = (args[0], args[1:]) if args else ("", [])
    state = _state()
    if verb == "force-idle":
        kind = rest[0] if rest else "deep"
        if kind not in ("deep", "light"):
            sys.stdout.write(f"Unknown idle mode: {kind}\n")
            return 255
        state[kind] = "IDLE"
        _set(state)
        sys.stdout.write(f"Now forced in to {kind} idle mode\n")
        return 0
    if verb == "unforce":
        _set({"deep": "ACTIVE", "light": "ACTIVE"})
        sys.stdout.write("Light state: ACTIVE, deep state: ACTIVE\n")
        return 0
    if verb == "get" and rest and rest[0] in ("deep", "light"):
        sys.stdout.write(f"{state[rest[0]]}\n")
        return 0
    if verb in ("", "-h", "help"):
        sys.stdout.write(
            "Device idle controller (deviceidle) commands:\n"
            "  force-idle [light|deep]\n"
            "    Force directly into idle mode, regardless of other device state.\n"
            "  unforce\n"
            "    Resume normal functioning after force-idle or force-inactive.\n"
            "  get [light|deep|force|screen|charging|network|offbody|forceoffbody]\n"
            "    Retrieve the current given state.\n"
        )
        return 0
    sys.stdout.write(f"Unknown command: {verb}\n")
    return 255
