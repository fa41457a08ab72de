"""su (rooted profiles): which command `su ARGS` runs as root; init (tools/init.py) runs it.

`su` (interactive sh), `su -c CMD`, `su 0 CMD...`, `su root -c CMD`, like Magisk's su.
"""

from __future__ import annotations


def su_argv(args: list[str]) -> list[str] | None:
    """The root command for `su ARGS`, or None for a usage error."""
    if args and args[0] in ("0", "root"):
        args = args[1:]
    if args and args[0] in ("-", "-l", "--login"):
        args = args[1:]
    if not args:
        return ["/system/bin/sh"]
    if args[0] in ("-c", "--command"):
        return ["/system/bin/sh", "-c", " ".join(args[1:])] if len(args) > 1 else None
    if args[0].startswith("-"):
        return None
    return ["/system/bin/sh", "-c", " ".join(args)]
