"""settings get|put|delete|list system|secure|global [KEY [VALUE]] (stored in the control dir)."""

from __future__ import annotations

import sys

import ctlstore

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


def load(ns: str) -> dict[str, str]:
    values = dict(DEFAULTS[ns])
    values.update(ctlstore.read_json(f"settings/{ns}.json", {}))
    return values


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
    stored = ctlstore.read_json(f"settings/{ns}.json", {})
    if verb == "put":
        if len(rest) < 2:
            sys.stderr.write(USAGE)
            return 1
        stored[key] = rest[1]
    else:
        existed = key in stored
        stored.pop(key, None)
        sys.stdout.write(f"Deleted {1 if existed else 0} rows\n")
    ctlstore.write_json(f"settings/{ns}.json", stored)
    return 0
