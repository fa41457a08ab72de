"""A tool that ends by running a command in the caller's own process (`taskset MASK cmd`).

toybox's taskset pins itself and execs cmd, so cmd keeps taskset's pid, parent and signals. The
phone's tools run in init's children, not in the caller, so such a tool answers an exec reply
instead of an exit status: native/farmtool.c (the caller) then execs its own argv from the
given operand on, in its own process, environment and working directory, and prints toybox's
`TOOL: exec CMD: error` (exit 127, or 126) when it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass

EXEC_TAG = 0x58 << 24  # 'X' in the reply's top byte (exit statuses fit in the low 16 bits)


@dataclass(frozen=True)
class Exec:
    first: int  # index into the tool's arguments (argv[1:]) of the command to exec


@dataclass
class Caller:
    """The process that called the tool (its pid in the phone), set by init per request."""

    pid: int = 0


CALLER = Caller()


def exec_reply(request: Exec) -> int:
    """The reply word for native/farmtool.c: the tag and the index into its own argv."""
    return EXEC_TAG | (request.first + 1)
