"""The phone's Android tools, by name: what init (tools/init.py) runs for a farmtool request.

Runs INSIDE the phone, in a child forked from init that already is the caller's user, with the
caller's stdio as sys.stdin/stdout/stderr (stdlib only). State shared with the world lives in the
control dir /dev/.farm (ctl/ in the phone's state dir on the host).
"""

from __future__ import annotations

import functools
import os
import sys

import t_bugreport
import t_content
import t_dumpsys
import t_logcat
import t_misc
import t_mount
import t_pm
import t_props
import t_settings
import t_su
import t_taskset
import toolexec

TOOLS = {
    "getprop": t_props.getprop,
    "setprop": t_props.setprop,
    "dumpsys": t_dumpsys.dumpsys,
    "cmd": t_dumpsys.cmd,
    "settings": t_settings.settings,
    "content": t_content.content,
    "svc": t_misc.svc,
    "input": t_misc.input_,
    "am": t_misc.am,
    "wm": t_misc.wm,
    "reboot": t_misc.reboot,
    "getenforce": t_misc.getenforce,
    "setenforce": t_misc.setenforce,
    "pm": t_pm.pm,
    "logcat": t_logcat.logcat,
    "log": t_logcat.log,
    "mount": t_mount.mount,
    "taskset": t_taskset.taskset,
    "bugreportz": t_bugreport.bugreportz,
    "bugreport": t_bugreport.bugreport,
    **{name: functools.partial(t_logcat.logpersist, name) for name in t_logcat.LOGPERSIST_TOOLS},
}


ROOTED = False  # set by init from its command line: the daemon's word, not a file of the phone


def rooted() -> bool:
    return ROOTED


def su_argv(args: list[str]) -> list[str] | None:
    return t_su.su_argv(args)


def run(argv: list[str]) -> int | toolexec.Exec:
    """Exit status of tool argv[0] with arguments argv[1:], or the command it ends by running
    (init runs it, tools/toolexec.py)."""
    name = os.path.basename(argv[0])
    if name == "su":
        # Production builds ship no su (rooted ones are served by init before this).
        sys.stderr.write("/system/bin/sh: su: inaccessible or not found\n")
        return 127
    tool = TOOLS.get(name)
    if tool is None:
        sys.stderr.write(f"{name}: inaccessible or not found\n")
        return 127
    try:
        status = tool(argv[1:])
        return status if isinstance(status, toolexec.Exec) else int(status)
    except BrokenPipeError:
        return 141
    except KeyboardInterrupt:
        return 130
