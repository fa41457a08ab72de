#!/usr/bin/python3
"""Entry point of the phone's Android tools: /system/bin/<tool> links here; dispatch on the name.

Runs INSIDE the sandbox with the host's /usr/bin/python3 (stdlib only). State shared with the
world lives in the control dir /dev/.farm (ctl/ in the phone's state dir on the host).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

TOOLS = {
    "getprop": ("t_props", "getprop"),
    "setprop": ("t_props", "setprop"),
    "dumpsys": ("t_dumpsys", "dumpsys"),
    "cmd": ("t_dumpsys", "cmd"),
    "settings": ("t_settings", "settings"),
    "svc": ("t_misc", "svc"),
    "input": ("t_misc", "input_"),
    "am": ("t_misc", "am"),
    "wm": ("t_misc", "wm"),
    "reboot": ("t_misc", "reboot"),
    "ps": ("t_ps", "ps"),
    "su": ("t_su", "su"),
    "pm": ("t_pm", "pm"),
}


def main() -> int:
    name = os.path.basename(sys.argv[0])
    if name not in TOOLS:
        sys.stderr.write(f"{name}: inaccessible or not found\n")
        return 127
    module_name, func_name = TOOLS[name]
    module = __import__(module_name)
    try:
        return int(getattr(module, func_name)(sys.argv[1:]))
    except BrokenPipeError:
        return 141
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
