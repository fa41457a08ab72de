"""mount: toybox's, with the kernel's cgroup v1 mounts done by the daemon (vphone.cgmounts).

`mount` lists /proc/mounts as toybox does (`DEV on DIR type TYPE (OPTS)`), showing the phone's
cgroup views as the kernel shows cgroup mounts (the daemon's table /dev/.farm/cgroup-mounts.json)
and leaving out the files bound inside them. `mount -t cgroup -o OPTS NAME DIR` as root asks the
daemon and waits for its answer; the phone itself may not mount (seccomp). Anything else goes to
toybox's mount, which the filter refuses as before.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import ctlstore

TOYBOX = "/system/bin/toybox"
REQUEST_PREFIX = "mount.request."  # same names as vphone/src/vphone/cgmounts.py
ANSWER_PREFIX = "mount.answer."
TABLE = "cgroup-mounts.json"
_ESCAPES = (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\"))


def _unescape(field: str) -> str:
    for code, char in _ESCAPES:
        field = field.replace(code, char)
    return field


def list_mounts(proc_mounts: str, table: list[dict[str, str]]) -> str:
    """toybox's listing of /proc/mounts, with the cgroup views as the kernel would show them."""
    views = {row["dir"]: row for row in table}
    inside = tuple(d.rstrip("/") + "/" for d in views)
    lines = []
    for line in proc_mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        device, where, kind, options = _unescape(fields[0]), _unescape(fields[1]), fields[2], fields[3]
        if where.startswith(inside):
            continue  # a group's tasks file bound inside a view: part of the cgroup mount
        row = views.get(where)
        if row is not None:
            device, kind, options = row["device"], row["type"], row["options"]
        lines.append(f"{device} on {where} type {kind} ({options})\n")
    return "".join(lines)


def _cgroup_mount(device: str, where: str, options: str) -> int:
    def fail(code: int) -> int:
        sys.stderr.write(f"mount: '{device}'->'{where}': {os.strerror(code)}\n")
        return 1

    if not ctlstore.is_root():
        return fail(errno.EPERM)
    target = os.path.realpath(where)
    if not os.path.exists(target):
        return fail(errno.ENOENT)
    if not os.path.isdir(target):
        return fail(errno.ENOTDIR)
    ident = str(os.getpid())
    request = {"device": device, "options": options, "dir": target}
    code = ctlstore.ask_daemon(
        ctlstore.shared(REQUEST_PREFIX + ident), ctlstore.shared(ANSWER_PREFIX + ident), request
    )
    return fail(code) if code else 0


def mount(args: list[str]) -> int:
    if not args:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            sys.stdout.write(list_mounts(f.read(), ctlstore.read_json(TABLE, [])))
        return 0
    kind, i = "", 0
    options: list[str] = []
    positional: list[str] = []
    while i < len(args):
        arg = args[i]
        if arg in ("-t", "-o") and i + 1 < len(args):
            kind, options = (args[i + 1], options) if arg == "-t" else (kind, [*options, args[i + 1]])
            i += 2
            continue
        if arg.startswith("-t") and len(arg) > 2:
            kind = arg[2:]
        elif arg.startswith("-o") and len(arg) > 2:
            options.append(arg[2:])
        elif not arg.startswith("-"):
            positional.append(arg)
        i += 1
    if kind == "cgroup" and len(positional) == 2:
        return _cgroup_mount(positional[0], positional[1], ",".join(options))
    return subprocess.run([TOYBOX, "mount", *args], check=False).returncode
