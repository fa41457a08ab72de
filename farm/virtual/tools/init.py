#!/usr/bin/python3
"""The phone's init (runs inside the sandbox, as root on a privileged host).

It keeps the phone's PID namespace alive, tells the world it is up (ctl/init.ready), and on rooted
profiles serves `su` like Magisk's daemon: the su client passes its stdio fds over a unix socket and
init runs the command as uid 0, forwarding signals and the exit status. (bwrap mounts everything
nosuid, so a set-uid su binary cannot work.)
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading

CTL = "/dev/.farm"
SU_SOCKET = f"{CTL}/su.sock"
MAX_FDS = 3
# As for `adb root` (farm/virtual/sandbox.py): root here must not reach the host.
DROP_CAPS = [
    "setpriv",
    "--bounding-set",
    "-sys_admin,-mknod,-sys_module,-sys_rawio,-sys_boot,-sys_time,-net_admin,-sys_ptrace",
    "--",
]


def _recv_request(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    fds = array.array("i")
    msg, ancdata, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return json.loads(msg.decode()), list(fds)


def _serve_su(conn: socket.socket) -> None:
    fds: list[int] = []
    try:
        request, fds = _recv_request(conn)
        if len(fds) != MAX_FDS:
            conn.sendall(b'{"exit": 1}\n')
            return
        argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
        env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
        env.update(USER="root", LOGNAME="root")
        cwd = str(request.get("cwd", "/"))
        if not os.path.isdir(cwd):
            cwd = "/"
        child = subprocess.Popen(
            DROP_CAPS + argv,
            stdin=fds[0],
            stdout=fds[1],
            stderr=fds[2],
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        for fd in fds:
            os.close(fd)
        fds = []

        def watch() -> None:
            # A signal number per line from the client; EOF means the client died: kill the command.
            buf = b""
            while True:
                data = conn.recv(64)
                if not data:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(child.pid, signal.SIGKILL)
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.killpg(child.pid, int(line))

        threading.Thread(target=watch, daemon=True).start()
        code = child.wait()
        status = 128 - code if code < 0 else code
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"exit": status}).encode() + b"\n")
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            conn.sendall(b'{"exit": 1}\n')
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def _name_self_init() -> None:
    """Show as `init` in ps (comm), like Android's first process."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, b"init", 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def main() -> int:
    _name_self_init()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    server = None
    if os.getuid() == 0 and os.path.exists(f"{CTL}/rooted"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SU_SOCKET)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(SU_SOCKET)
        os.chmod(SU_SOCKET, 0o666)
        server.listen(16)
    with open(f"{CTL}/init.ready", "w") as ready:
        ready.write(f"{os.getpid()}\n")
    if server is None:
        while True:
            signal.pause()
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve_su, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
