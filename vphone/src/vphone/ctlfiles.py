"""Host side of the control dir shared with the phone's tools (tools/ctlstore.py is the phone side).

<state_dir>/ctl/ is bound at /dev/.farm inside the phone. The folder itself is the phone root's
and 0755: shell cannot create, rename or replace anything in it, so root's tools.sock, the
daemon's rooted marker, props/ro.json and the other files the daemon or init write are safe from
shell. What the tools write (as shell or as root) lives in shared/ (root's, sticky, shell's group:
layout.SHARED_MODE) and in shell's own subfolders (settings/, logcat/, props/set, props/persist).
The daemon reads every file here through beneath.py (no link followed, no FIFO waited on,
bounded), and everything in the shell-writable folders is hostile input.
Files (JSON unless noted); written by the daemon or init, unless under shared/ or shell's folders:
  tools.sock             init's tool socket (farmtool.c)
  init.ready             written by the phone's init once it is up
  rooted                 present on rooted profiles, for the tools to read (init serves su only
                         when the daemon's command line says --rooted, not by it)
  su.prompt_ms, su.granted  the su prompt's length (daemon) and its grant (init, as root)
  props/ro.json          read-only props (identity, serial, boot state), written by the world
  props/set/<key>        runtime setprop values (text, shell's folder); cleared on reboot
  props/persist/<key>    persist.* values (text, shell's folder); survive reboot
  battery/state.json     the true battery state, written by the physics for `dumpsys battery`
  settings/<ns>.json     `settings` store (system, secure, global; shell's folder)
  logcat/<buffer>        the log buffers (shell's folder)
  thermalservice.txt     `dumpsys thermalservice` as ThermalManagerService prints it (Android 10+),
                         written by the physics; the tool prints it (text)
  fixed_performance.supported  present when the profile's power HAL has the mode (world)
  fixed_performance.applied    "1"/"0": the mode in force, written by the physics once the clock
                         nodes show it; `cmd power` waits for it, as the HAL call returns only then
  kmsg                   kernel-log lines, e.g. a refused sysfs write (text, appended, bounded)
  cgroup-mounts.json     what `mount` lists for the phone's cgroup views (cgmounts.py)
  shared/power.json      screen / stay-awake state from `svc power` and `input keyevent`
  shared/power_hint      the last boost the framework sent the power HAL (`input`, deviceidle)
  shared/wm.json, shared/selinux, shared/packages.json, shared/apks/, shared/deviceidle.json,
  shared/input.log, shared/am.log   the tools' own state
  shared/battery-override.json  `dumpsys battery set|unplug` overrides; {} after reset
  shared/reboot          present when `reboot` asked the world to reboot the phone
  shared/fixed_performance  `cmd power set-fixed-performance-mode-enabled`: "1"/"0" (text)
  shared/thermal_override   `cmd thermalservice override-status N`: N; removed by `reset` (text)
  shared/taskset.request.<id>, shared/mount.request.<id>  the tools' requests, judged by their
                         file's owner (affinity.py, cgmounts.py)
  shared/taskset.answer.<id>, shared/mount.answer.<id>  the daemon's answers: {"errno", ...}
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vphone import beneath

RO_PROPS = "props/ro.json"
SET_PROPS = "props/set"
PERSIST_PROPS = "props/persist"
BATTERY_STATE = "battery/state.json"
SHARED = "shared"  # the tools' folder (shell may write there); tools/ctlstore.py
BATTERY_OVERRIDE = f"{SHARED}/battery-override.json"
POWER = f"{SHARED}/power.json"
REBOOT_REQUEST = f"{SHARED}/reboot"
ROOTED_FLAG = "rooted"
# The last boost the framework sent the power HAL ("interaction NS"): `input` writes it.
POWER_HINT = f"{SHARED}/power_hint"
DEVICEIDLE = f"{SHARED}/deviceidle.json"  # Doze's forced state (tools/t_deviceidle.py)
# The su prompt (profile su_prompt_s, in ms) until the first grant; the grant, kept like Magisk's.
SU_PROMPT_MS = "su.prompt_ms"
SU_GRANTED = "su.granted"
THERMALSERVICE = "thermalservice.txt"
FIXED_PERFORMANCE = f"{SHARED}/fixed_performance"
FIXED_PERFORMANCE_SUPPORTED = "fixed_performance.supported"
FIXED_PERFORMANCE_APPLIED = "fixed_performance.applied"
THERMAL_OVERRIDE = f"{SHARED}/thermal_override"
HAL_FLAGS = (FIXED_PERFORMANCE, THERMAL_OVERRIDE)  # the tools write them; the physics watches
KMSG = "kmsg"
KMSG_MAX_BYTES = 64 * 1024
MAX_REQUEST_BYTES = 64 * 1024  # a taskset or mount request is one short JSON line
MAX_PROP_BYTES = 64 * 1024  # far above any property value (PROP_VALUE_MAX is 92 bytes but for ro.*)


def write_text(ctl: Path, rel: str, text: str, *, mode: int = 0o644, owner_uid: int | None = None) -> None:
    """Atomic replace of a text file (readers never see half of it). The phone's shell writes
    in the control dir: no link in it is followed (beneath.py)."""
    beneath.replace_text(ctl, rel, text, mode, owner_uid)


def read_text(ctl: Path, rel: str) -> str | None:
    try:
        return beneath.read_text(ctl, rel)
    except OSError:
        return None


def append_kmsg(ctl: Path, line: str) -> None:
    """One kernel-log line; the oldest half is dropped once the file passes KMSG_MAX_BYTES. What
    the phone's shell put at the name before the daemon made it (a FIFO, a link) is removed."""
    text = line.rstrip("\n") + "\n"
    try:
        size = beneath.append_text(ctl, KMSG, text)
    except OSError:
        remove(ctl, KMSG)
        try:
            size = beneath.append_text(ctl, KMSG, text)
        except OSError:
            return
    if size > KMSG_MAX_BYTES:
        try:
            text = beneath.read_text(ctl, KMSG, 2 * KMSG_MAX_BYTES)
        except OSError:  # grown past any line of ours: start over
            text = ""
        write_text(ctl, KMSG, text[len(text) // 2 :].split("\n", 1)[-1])


def write_json(ctl: Path, rel: str, value: Any, *, mode: int = 0o644, owner_uid: int | None = None) -> None:
    """Atomic replace (readers inside the phone never see a half-written file)."""
    write_text(ctl, rel, json.dumps(value, sort_keys=True) + "\n", mode=mode, owner_uid=owner_uid)


def read_json(ctl: Path, rel: str, default: Any) -> Any:
    try:
        return json.loads(beneath.read_text(ctl, rel))
    except (OSError, ValueError):
        return default


@dataclass(frozen=True)
class ToolRequest:
    """A request a phone tool left in the control dir: who wrote it and what it says."""

    owner_uid: int  # host uid of the file's owner: the tool runs as its caller
    body: Any  # the JSON


def take_request(ctl: Path, name: str) -> ToolRequest | None:
    """Read and remove the request file `name` (a tool's `mount -t cgroup`, `taskset`); None
    when it is gone (answered already), is a link, or holds no JSON. Its owner is the fstat of
    what was read, never of a link's target."""
    try:
        fd = beneath.open_file(ctl, name, os.O_RDONLY)
    except OSError:
        remove(ctl, name)  # a FIFO or link named like a request: gone, never read
        return None
    try:
        owner = os.fstat(fd).st_uid
        body = json.loads(beneath.read_fd(fd, MAX_REQUEST_BYTES))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
        remove(ctl, name)
    return ToolRequest(owner, body)


def read_props(ctl: Path) -> dict[str, str]:
    """Every property as getprop shows it: a read-only (ro.*) one of props/ro.json, which the
    daemon writes, wins over a file of the same name in props/set or props/persist (shell's)."""
    props: dict[str, str] = dict(read_json(ctl, RO_PROPS, {}))
    fixed = {name for name in props if name.startswith("ro.")}
    for sub in (PERSIST_PROPS, SET_PROPS):
        try:
            names = beneath.list_dir(ctl, sub)
        except OSError:
            continue
        for name in names:
            if not name.endswith(".tmp") and name not in fixed:
                with contextlib.suppress(OSError):
                    props[name] = beneath.read_text(ctl, f"{sub}/{name}", MAX_PROP_BYTES)
    return props


def shared(name: str) -> str:
    """The control dir's path of `name` in the tools' folder."""
    return f"{SHARED}/{name}"


def remove(ctl: Path, rel: str) -> None:
    """Unlink ctl/rel whatever it is (a link is removed, not followed); gone already is fine."""
    parent, _, name = rel.strip("/").rpartition("/")
    try:
        dfd = beneath.open_dir(ctl, parent)
    except OSError:
        return
    try:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)


def reset_volatile(ctl: Path) -> None:
    """What a reboot forgets: runtime setprops, battery overrides, a pending reboot request, power
    HAL modes, a thermal status override and the kernel log."""
    shutil.rmtree(ctl / SET_PROPS, ignore_errors=True)
    (ctl / SET_PROPS).mkdir(exist_ok=True)
    for rel in (
        BATTERY_OVERRIDE,
        REBOOT_REQUEST,
        FIXED_PERFORMANCE,
        FIXED_PERFORMANCE_APPLIED,
        THERMAL_OVERRIDE,
        KMSG,
        POWER_HINT,
        DEVICEIDLE,
    ):
        remove(ctl, rel)
