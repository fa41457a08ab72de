"""When the screen times out (pure): PowerManagerService's user-activity timeout and stay-on.

The screen goes off `screen_off_timeout` ms (Settings.System, AOSP default 60000:
frameworks/base/packages/SettingsProvider/res/values/defaults.xml def_screen_off_timeout) after
the last user activity (an input event), unless it is held: `svc power stayon` sets
Settings.Global.STAY_ON_WHILE_PLUGGED_IN to a mask of plug types, and PowerManagerService
updateStayOnLocked holds the screen while BatteryManagerInternal.isPowered(mask), which reads
BatteryService's plug state. So `dumpsys battery unplug` (a faked unplug) ends the hold, and so
does a charging switch that takes the USB input offline (input suspend).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SCREEN_OFF_TIMEOUT_MS = 60_000
STAY_ON_AC, STAY_ON_USB, STAY_ON_WIRELESS = 1, 2, 4  # BatteryManager.BATTERY_PLUGGED_*


@dataclass(frozen=True)
class PowerInputs:
    screen_on: bool
    activity_ns: int  # CLOCK_MONOTONIC of the last user activity
    stay_on_mask: int  # STAY_ON_WHILE_PLUGGED_IN
    timeout_ms: int  # Settings.System.SCREEN_OFF_TIMEOUT
    usb_powered: bool  # BatteryService's view (false after `unplug`, or with USB input off)


def held(inputs: PowerInputs) -> bool:
    return inputs.usb_powered and bool(inputs.stay_on_mask & STAY_ON_USB)


def screen_on_now(inputs: PowerInputs, now_ns: int) -> bool:
    """Whether the screen is on at `now_ns`: it stays as it is while held or within the
    timeout of the last activity; otherwise it has gone off."""
    if not inputs.screen_on or held(inputs):
        return inputs.screen_on
    return now_ns - inputs.activity_ns < inputs.timeout_ms * 1_000_000


def timeout_ms_of(text: str | None) -> int:
    """The setting's value (a bad or missing one: the default, as PowerManagerService's
    Settings.System.getIntForUser(..., DEFAULT) falls back)."""
    try:
        return int(text) if text is not None else DEFAULT_SCREEN_OFF_TIMEOUT_MS
    except ValueError:
        return DEFAULT_SCREEN_OFF_TIMEOUT_MS
