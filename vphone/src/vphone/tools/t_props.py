"""getprop / setprop: props = ro.json (identity, from the world) + persist/ + set/ (runtime)."""

from __future__ import annotations

import os
import sys

import ctlstore
import toolerrors

SHELL_PREFIXES = ("debug.", "log.tag.", "persist.")
MAX_VALUE_LEN = 91  # PROP_VALUE_MAX - 1; ro.* may be longer
GETPROP_USAGE = "usage: getprop [NAME [DEFAULT]]\n\nGets an Android system property, or lists them all.\n"
SETPROP_USAGE = "usage: setprop NAME VALUE\n\nSets an Android system property.\n"


def all_props() -> dict[str, str]:
    """The daemon's props (props/ro.json, root's: identity, boot state), then the set and persist
    ones (props/set is shell's to write), which never override a read-only (ro.*) one there."""
    props: dict[str, str] = dict(ctlstore.read_json("props/ro.json", {}))
    fixed = {name for name in props if name.startswith("ro.")}
    for sub in ("persist", "set"):
        d = ctlstore.path("props", sub)
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if name.endswith(".tmp") or name in fixed:
                continue
            try:
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    props[name] = f.read()
            except OSError:
                continue
    return props


def getprop(args: list[str]) -> int:
    status = toolerrors.toybox_check("getprop", args, usage=GETPROP_USAGE, flags="TZ", most=2)
    if status is not None:
        return status
    args = [a for a in args if not a.startswith("-")]
    props = all_props()
    if not args:
        for key in sorted(props):
            sys.stdout.write(f"[{key}]: [{props[key]}]\n")
        return 0
    default = args[1] if len(args) > 1 else ""
    sys.stdout.write(props.get(args[0], default) + "\n")
    return 0


def _fail(key: str, value: str) -> int:
    sys.stderr.write(f"Failed to set property '{key}' to '{value}'.\nSee dmesg for error reason.\n")
    return 1


def setprop(args: list[str]) -> int:
    status = toolerrors.toybox_check("setprop", args, usage=SETPROP_USAGE, least=2, most=2)
    if status is not None:
        return status
    key, value = (a for a in args if a != "--")
    props = all_props()
    if not key or "/" in key or key.startswith("."):
        return _fail(key, value)
    if key.startswith("ro."):
        if key in props:
            return _fail(key, value)
    elif len(value) > MAX_VALUE_LEN:
        return _fail(key, value)
    if not ctlstore.is_root() and not key.startswith(SHELL_PREFIXES):
        return _fail(key, value)
    ctlstore.write_text(f"props/set/{key}", value)
    if key.startswith("persist."):
        ctlstore.write_text(f"props/persist/{key}", value)
    return 0
