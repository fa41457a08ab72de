"""What a tool that ends by running a command (taskset MASK cmd) hands back to init.

Init runs `argv` as its own child, on the caller's descriptors and environment, as the caller,
forwarding the caller's signals to it, and answers its exit status (tools/init.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exec:
    argv: list[str]
    tool: str  # names the tool in `TOOL: exec CMD: error` when the command cannot run
