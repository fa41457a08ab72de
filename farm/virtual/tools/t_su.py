"""su (rooted profiles): asks the phone's init (root) to run the command, like Magisk's su.

`su` (interactive sh), `su -c CMD`, `su 0 CMD...`, `su root -c CMD`. stdio is passed over the
unix socket, signals are forwarded, the exit status comes back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys

import ctlstore


def _argv(args: list[str]) -> list[str] | None:
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


def su(args: list[str]) -> int:
    if not os.path.exists(ctlstore.path("rooted")):
        # Production builds ship no su; host /usr/bin/su must not show through either.
        sys.stderr.write("/system/bin/sh: su: inaccessible or not found\n")
        return 127
    argv = _argv(args)
    if argv is None:
        sys.stderr.write("usage: su [WHO] [-c COMMAND | COMMAND...]\n")
        return 1
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(ctlstore.path("su.sock"))
    except OSError:
        sys.stderr.write("su: not permitted\n")
        return 1
    env = dict(os.environ)
    request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd()}).encode()
    sock.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(_fds()))])

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(f"{signum}\n".encode())

    for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(s, forward)
    buf = b""
    while b"\n" not in buf:
        try:
            data = sock.recv(256)
        except InterruptedError:
            continue
        if not data:
            return 1
        buf += data
    return int(json.loads(buf.split(b"\n", 1)[0])["exit"])


def _fds() -> bytes:
    import array

    return array.array("i", [0, 1, 2]).tobytes()
