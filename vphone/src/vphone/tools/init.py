"""The phone's init: pid 1 of its PID namespace, root of the phone (not of the host).

It keeps the namespaces alive, reaps orphans, tells the world it is up (ctl/init.ready) and serves
the Android tools: /system/bin/<tool> is farmtool (native/farmtool.c), which passes its argv,
environment, working directory and stdio over /dev/.farm/tools.sock. Each request is served by a
child of init (the tools' modules are imported once, here) that becomes the caller's user, runs
the tool on the caller's descriptors and answers the exit status; two such children are forked
ahead and wait in accept() (`_spare`), so a call pays no fork on its way. On rooted profiles `su`
is served the same way, like Magisk's daemon, running its command as uid 0 (bwrap mounts
everything nosuid, so a set-uid su cannot exist). Only processes of this phone are served: the
peer must be visible in our PID namespace (SO_PEERCRED pid > 0), so a host process that reaches
the socket's path on the host gets nothing.

Runs with the host's Python (stdlib only) as `python3 -I -S init.py`; bwrap already set
no_new_privs, the seccomp filter and the capability set; init also trims its bounding set to that.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import ctlstore
import farmtool
import toolexec

TOOLS_SOCKET = ctlstore.path("tools.sock")
MAGIC = b"FARM1\n"
MAX_REQUEST_BYTES = 1 << 20
STATUS = struct.Struct("<i")
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_NAME = 15
SPARES = 2  # children waiting in accept(): concurrent tool calls beyond this wait for a fork
_libc = ctypes.CDLL(None, use_errno=True)


def _trim_capabilities() -> None:
    """Bound what any later exec can get to the capabilities bwrap left us."""
    permitted = 0
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("CapPrm:"):
                permitted = int(line.split()[1], 16)
    with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if not permitted >> cap & 1:
            _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def _recv_request(conn: socket.socket) -> tuple[list[str], dict[str, str], str, list[int]]:
    fds = array.array("i")
    data, ancdata, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        raise ValueError("not a farmtool request")
    argc, envc = struct.unpack_from("<II", data, len(MAGIC))
    want = argc + envc + 1
    buf = bytearray(data[len(MAGIC) + 8 :])
    while buf.count(b"\0") < want:
        if len(buf) > MAX_REQUEST_BYTES:
            raise ValueError("request too long")
        chunk = conn.recv(65536)
        if not chunk:
            raise ValueError("short request")
        buf += chunk
    strings = [s.decode("utf-8", errors="surrogateescape") for s in bytes(buf).split(b"\0")[:want]]
    env = dict(item.partition("=")[::2] for item in strings[argc : argc + envc])
    return strings[:argc], env, strings[-1], list(fds)


def _become(uid: int, gid: int) -> None:
    if os.geteuid() == uid:
        return
    os.setgroups([gid])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _watch_signals(conn: socket.socket, on_signal: Callable[[int], None]) -> None:
    """Call on_signal(N) for each signal number the client forwards (one per line), and
    on_signal(SIGHUP) when the client is gone. SIGIO-driven: a thread would cost milliseconds."""
    conn.setblocking(False)
    buf = bytearray()

    def readable(_signum: int, _frame: object) -> None:
        while True:
            try:
                data = conn.recv(64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                on_signal(signal.SIGHUP)
                return
            buf.extend(data)
            while b"\n" in buf:
                line, _, rest = bytes(buf).partition(b"\n")
                buf[:] = rest
                with contextlib.suppress(ValueError):
                    on_signal(int(line))

    signal.signal(signal.SIGIO, readable)
    fcntl.fcntl(conn.fileno(), fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(conn.fileno(), fcntl.F_SETFL, fcntl.fcntl(conn.fileno(), fcntl.F_GETFL) | os.O_ASYNC)
    readable(signal.SIGIO, None)  # anything that came before we asked


def _answer(conn: socket.socket, status: int) -> None:
    with contextlib.suppress(OSError):
        conn.setblocking(True)
        conn.sendall(STATUS.pack(status))


def _await_grant() -> None:
    """The first su waits while the root manager's prompt is on screen, until it is granted."""
    granted = ctlstore.path("su.granted")
    try:
        with open(ctlstore.path("su.prompt_ms"), encoding="utf-8") as f:
            prompt_ms = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return
    if prompt_ms <= 0 or os.path.exists(granted):
        return
    time.sleep(prompt_ms / 1000)
    with contextlib.suppress(OSError):
        open(granted, "a").close()


def _run_su(conn: socket.socket, argv: list[str], env: dict[str, str]) -> int:
    command = farmtool.su_argv(argv[1:])
    if command is None:
        os.write(2, b"usage: su [WHO] [-c COMMAND | COMMAND...]\n")
        return 1
    env.update(USER="root", LOGNAME="root")
    _await_grant()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.execve(command[0], command, env)
        finally:
            os._exit(127)

    def forward(signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL if signum == signal.SIGHUP else signum)

    _watch_signals(conn, forward)
    _pid, status = os.waitpid(pid, 0)
    signal.signal(signal.SIGIO, signal.SIG_IGN)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _serve(conn: socket.socket, pid: int, uid: int, gid: int) -> None:
    """In the forked child: run one tool for the peer (`pid` in the phone), as the peer."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv, env, cwd, fds = _recv_request(conn)
    if len(fds) != 3:
        raise ValueError("a request needs stdin, stdout and stderr")
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    name = argv[0]
    _libc.prctl(PR_SET_NAME, os.path.basename(name).encode()[:15], 0, 0, 0)  # ps shows the tool
    if name == "su" and farmtool.rooted():
        _answer(conn, _run_su(conn, argv, env))
        return
    _become(uid, gid)
    with contextlib.suppress(OSError):
        os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115

    def stop(signum: int) -> None:
        _answer(conn, 128 + signum)
        os._exit(128 + signum)

    _watch_signals(conn, stop)
    toolexec.CALLER.pid = pid
    status = farmtool.run(argv)
    if isinstance(status, toolexec.Exec):  # taskset MASK cmd: the caller execs cmd itself
        status = toolexec.exec_reply(status)
    signal.signal(signal.SIGIO, signal.SIG_IGN)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    _answer(conn, status)


def _reap(_signum: int, _frame: object) -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _serve_connection(conn: socket.socket) -> None:
    """In a child: serve one request for a process of this phone, then exit."""
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    code = 0
    try:
        _serve(conn, pid, uid, gid)
    except Exception as error:  # one request's failure must never reach init
        with contextlib.suppress(OSError):
            os.write(2, f"farmtool: {error}\n".encode())
        _answer(conn, 1)
        code = 1
    os._exit(code)


def _spare(server: socket.socket, taken_fd: int) -> None:
    """A child forked ahead of time that waits in accept(): a request costs no fork of init on
    its way. On taking a connection it tells init (one byte), which forks the next spare."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _libc.prctl(PR_SET_NAME, b"farm-toolsd", 0, 0, 0)
    while True:
        try:
            conn, _ = server.accept()
        except InterruptedError:
            continue
        pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        if pid <= 0:  # not a process of this phone (its PID namespace)
            conn.close()
            continue
        os.write(taken_fd, b"x")
        os.close(taken_fd)
        server.close()
        _serve_connection(conn)


def main() -> int:
    # Whether su is served comes from the daemon's command line: /dev/.farm/rooted is only what
    # the phone's tools read (a file there made by the phone's shell once made shell root).
    farmtool.ROOTED = "--rooted" in sys.argv[1:]
    _libc.prctl(PR_SET_NAME, b"init", 0, 0, 0)  # `init` in ps, like Android's first process
    if os.geteuid() == 0:
        _trim_capabilities()
    signal.signal(signal.SIGCHLD, _reap)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(TOOLS_SOCKET)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(TOOLS_SOCKET)
    os.chmod(TOOLS_SOCKET, 0o666)
    server.listen(64)
    taken_r, taken_w = os.pipe()

    def fork_spare() -> None:
        if os.fork() == 0:
            os.close(taken_r)
            _spare(server, taken_w)

    for _ in range(SPARES):
        fork_spare()
    with open(ctlstore.path("init.ready"), "w", encoding="ascii") as ready:
        ready.write(f"{os.getpid()}\n")
    while True:
        for _ in os.read(taken_r, 64):  # EINTR (SIGCHLD) is retried by Python
            fork_spare()


if __name__ == "__main__":
    sys.exit(main())
