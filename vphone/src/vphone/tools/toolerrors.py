"""How Android's tools answer bad input, in the two families a phone has.

toybox tools (getprop, setprop, getenforce, setenforce, log): "NAME: Unknown option 'x' (see
"NAME --help")", "Needs N argument(s)" / "Max N argument(s)" on stderr, exit 1; `--help` prints
the usage on stdout, exit 0.
Framework shell commands (cmd SERVICE, am, pm, wm, settings, input on Android 11+; AOSP
BasicShellCommandHandler): an unknown command prints "Unknown command: X" on stdout and exits
255 (-1); no command or `help` prints the help text and also exits 255.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

SHELL_COMMAND_FAILED = 255  # onCommand's -1


def toybox_error(name: str, message: str) -> int:
    sys.stderr.write(f'{name}: {message} (see "{name} --help")\n')
    return 1


def toybox_check(
    name: str, args: Sequence[str], *, usage: str, flags: str = "", least: int = 0, most: int = 99
) -> int | None:
    """toybox's check of `args` against its single-letter `flags` and operand count: None when
    they are fine, else the exit status after printing what toybox prints (--help: usage, 0)."""
    if "--help" in args:
        sys.stdout.write(usage)
        return 0
    operands = 0
    for arg in args:
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            operands += 1
            continue
        bad = arg[2:] if arg.startswith("--") else next((c for c in arg[1:] if c not in flags), None)
        if bad is not None:
            return toybox_error(name, f"Unknown option '{bad}'")
    plural = "s" if least != 1 else ""
    if operands < least:
        return toybox_error(name, f"Needs {least} argument{plural}")
    if operands > most:
        return toybox_error(name, f"Max {most} argument{'s' if most != 1 else ''}")
    return None


def unknown_command(verb: str) -> int:
    sys.stdout.write(f"Unknown command: {verb}\n")
    return SHELL_COMMAND_FAILED


def help_text(text: str) -> int:
    sys.stdout.write(text)
    return SHELL_COMMAND_FAILED
