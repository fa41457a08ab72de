"""settings get|put|delete|list system|secure|global [KEY [VALUE]] (stored in the control dir).

The store is SettingsProvider's, shared with `content` (t_content): settings/<ns>.json holds what
was put over the defaults, a deleted setting as null.
"""

from __future__ import annotations

import hashlib
import sys

import ctlstore
import t_props

NAMESPACES = ("system", "secure", "global")
DEFAULTS = {
    "system": {"screen_off_timeout": "60000", "screen_brightness": "102"},
    "secure": {"android_id": "0"},
    "global": {
        "stay_on_while_plugged_in": "0",
        "window_animation_scale": "1.0",
        "transition_animation_scale": "1.0",
        "animator_duration_scale": "1.0",
        "adb_enabled": "1",
        "development_settings_enabled": "1",
    },
}
USAGE = "usage:  settings [--user <USER_ID> | current] get namespace key\n"


def android_id() -> str:
    """Settings.Secure.ANDROID_ID as the shell reads it: 64 bits in 16 lowercase hex digits,
    fixed per device (SettingsProvider.ensureSecureSettingAndroidIdSetLocked makes it from
    SecureRandom at first boot; here from the serial, so each phone has its own)."""
    serial = t_props.all_props().get("ro.serialno", "")
    return hashlib.sha256(f"android_id:{serial}".encode()).hexdigest()[:16]


def load(ns: str) -> dict[str, str]:
    values = dict(DEFAULTS[ns])
    if ns == "secure":
        values["android_id"] = android_id()
    values.update(ctlstore.read_json(f"settings/{ns}.json", {}))
    return {key: value for key, value in values.items() if value is not None}


def put(ns: str, key: str, value: str | None) -> None:
    stored = ctlstore.read_json(f"settings/{ns}.json", {})
    stored[key] = value
    ctlstore.write_json(f"settings/{ns}.json", stored)


def delete(ns: str, key: str) -> bool:
    """Whether there was such a setting (a default too)."""
    existed = key in load(ns)
    if existed:
        put(ns, key, None)
    return existed


def settings(args: list[str]) -> int:
    if len(args) >= 2 and args[0] == "--user":
        args = args[2:]
    if len(args) < 2 or args[0] not in ("get", "put", "delete", "list") or args[1] not in NAMESPACES:
        sys.stderr.write(USAGE)
        return 1
    verb, ns, rest = args[0], args[1], args[2:]
    values = load(ns)
    if verb == "list":
        for k in sorted(values):
            sys.stdout.write(f"{k}={values[k]}\n")
        return 0
    if not rest:
        sys.stderr.write(USAGE)
        return 1
    key = rest[0]
    if verb == "get":
        sys.stdout.write(f"{values.get(key, 'null')}\n")
        return 0
    if verb == "put":
        if len(rest) < 2:
            sys.stderr.write(USAGE)
            return 1
        put(ns, key, rest[1])
        return 0
    sys.stdout.write(f"Deleted {1 if delete(ns, key) else 0} rows\n")
    return 0
