"""The tools' view of the control dir (/dev/.farm): small JSON files written atomically.

The host side (vphone/src/vphone/world.py, physics) reads and writes the same files under
<state_dir>/ctl/; the file names here and there must agree (see vphone/src/vphone/ctlfiles.py).
/dev/.farm itself is root's and closed to shell: every file a tool writes lives in its shared/
folder (sticky, shell's group), the tool socket, the rooted marker and props/ro.json above it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from typing import Any

CTL = os.environ.get("FARM_CTL_DIR", "/dev/.farm")
SHARED = "shared"  # the one folder here where shell's tools (and root's) write
POWER_FILE = f"{SHARED}/power.json"
POWER_HINT_FILE = f"{SHARED}/power_hint"
WM_FILE = f"{SHARED}/wm.json"
REBOOT_FILE = f"{SHARED}/reboot"
SELINUX_FILE = f"{SHARED}/selinux"
PACKAGES_FILE = f"{SHARED}/packages.json"
PERMISSIONS_FILE = f"{SHARED}/permissions.json"  # what each installed package requests
BATTERY_OVERRIDE_FILE = f"{SHARED}/battery-override.json"
ANSWER_TIMEOUT_S = 10.0
ANSWER_POLL_S = 0.001


def path(*parts: str) -> str:
    return os.path.join(CTL, *parts)


def shared(name: str) -> str:
    return f"{SHARED}/{name}"


def read_json(rel: str, default: Any) -> Any:
    try:
        with open(path(rel), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def open_nofollow(rel: str, flags: int, mode: int = 0o666) -> int:
    """A descriptor of a file in the control dir, never through a link at its name: shell may
    plant one in its folders (shared/, logcat/, ...), and a tool run as root would otherwise
    write to whatever file of the phone it names. Never blocks on a FIFO either."""
    return os.open(path(rel), flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)


def write_text(rel: str, text: str) -> None:
    """Atomic replace, world-writable so root- and shell-run tools can both update it later."""
    final = path(rel)
    tmp = f"{final}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover, or a link another user planted at this predictable name
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o666)
    try:
        os.replace(tmp, final)
    except PermissionError:
        # shared/ is sticky: shell cannot rename over a file root's tool made there; it
        # rewrites it in place instead (0666, the mode every tool gives these files).
        os.unlink(tmp)
        fd = os.open(final, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)


def write_request(rel: str, value: Any) -> None:
    """A request to the daemon, which judges it by its file's owner: written only by the caller
    (0644, a fresh file, never through a link planted in its place), then renamed into place, so
    no other user of the phone can change what a root tool asked for before the daemon reads it."""
    final = path(rel)
    tmp = f"{final}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(value, f, sort_keys=True)
    os.replace(tmp, final)


def ask_daemon(request_rel: str, answer_rel: str, value: Any) -> int:
    """Write a request, wait for the daemon's answer file and take it: its errno (0: done;
    ETIMEDOUT when no answer came, EIO when the answer is unreadable)."""
    write_request(request_rel, value)
    answer = path(answer_rel)
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while not os.path.exists(answer):
        if time.monotonic() > deadline:
            return errno.ETIMEDOUT
        time.sleep(ANSWER_POLL_S)
    code = int(read_json(answer_rel, {}).get("errno", errno.EIO))
    with contextlib.suppress(OSError):
        os.unlink(answer)
    return code


def write_json(rel: str, value: Any) -> None:
    write_text(rel, json.dumps(value, sort_keys=True) + "\n")


def is_root() -> bool:
    return os.geteuid() == 0


def read_text(rel: str, default: str) -> str:
    try:
        with open(path(rel), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return default
