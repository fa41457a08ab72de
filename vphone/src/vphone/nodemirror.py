"""The nodes whose values change by themselves (battery, load, clocks, temperatures,
/proc/meminfo), served over FUSE by a process of their own, so that every read is a snapshot of
one value as a kernel's show() gives it.

Why FUSE: the daemon rewrites a plain node in place (pwrite, then ftruncate: the inode must stay
for readers that keep it open and re-read it at offset 0), and a reader between the two calls
sees the new value followed by the old one's tail (CI once read time_in_state with an empty line
in it). A kernel has no call that replaces a file's bytes and its size at once for readers that
take no lock, so the reads must come from a filesystem that answers them: fusenodes.NodeServer,
whose reads are per-open snapshots as kernfs's are.

Why a process: a read must not wait for the daemon. A thread of the daemon waits for the GIL
while the daemon's loop computes a tick (measured: p99 15 ms per read while the phone spun two
shells, against 20 us at p50), and farm-sampler reads ~20 nodes per 20 ms tick: it missed one
tick in seven. This process holds the nodes' texts and nothing else; the daemon sends each new
text down a pipe as it writes the plain node (`NodeMirror.update`), and the process takes every
text already sent before it answers a request, so a read that follows a write sees it.

The plain files stay what they were (the fallback where FUSE cannot be used, and what the
daemon's host-side readers read); the phone sees the served files bound over them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import select
import struct
import subprocess
import sys
import threading

from vphone.fusenodes import NodeServer, ServedNode

log = logging.getLogger(__name__)

FRAME = struct.Struct("<HI")  # len(rel) len(text), then both
PIPE_BYTES = 1 << 20  # a minute of updates at the physics' rate, if the server stalls
F_SETPIPE_SZ = 1031
TAKE_EVERY_S = 0.25
SERVER_RT_PRIORITY = 1
SERVER_NICE = -10


def frame(rel: str, text: str) -> bytes:
    raw_rel, raw_text = rel.encode(), text.encode()
    return FRAME.pack(len(raw_rel), len(raw_text)) + raw_rel + raw_text


def unframe(buffer: bytearray, values: dict[str, bytes]) -> None:
    """Apply every whole message at the front of `buffer` to `values`; leave a partial one."""
    at = 0
    while len(buffer) - at >= FRAME.size:
        n_rel, n_text = FRAME.unpack_from(buffer, at)
        end = at + FRAME.size + n_rel + n_text
        if end > len(buffer):
            break
        rel = bytes(buffer[at + FRAME.size : at + FRAME.size + n_rel]).decode()
        values[rel] = bytes(buffer[end - n_text : end])
        at = end
    del buffer[:at]


def _refuse(_rel: str, _data: bytes) -> int:
    return errno.EACCES  # never asked: OPEN refuses writers of a node without write bits


class NodeMirror(NodeServer):
    """The daemon's side: mounts the filesystem, hands its connection to a child process that
    answers it (`python -m vphone.nodemirror`), and sends it each node's new text."""

    NAME = "farm-sysfs"

    def __init__(self, nodes: tuple[ServedNode, ...], texts: dict[str, str]) -> None:
        super().__init__(nodes, lambda _rel: b"", _refuse, name=self.NAME)
        self._texts = texts  # the first values, sent with the node table
        self._child: subprocess.Popen[bytes] | None = None
        self._updates: int | None = None
        self._send = threading.Lock()  # the loop's ticks and FUSE-judged writes both update
        self._broken = False

    def _start_serving(self) -> None:
        with self._send:  # a text written meanwhile goes with the table, or down the pipe after
            self._spawn()

    def _spawn(self) -> None:
        assert self._fd is not None
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            fcntl.fcntl(write_end, F_SETPIPE_SZ, PIPE_BYTES)
        table = {
            "nodes": [[n.rel, n.mode, n.uid, n.gid] for n in self.nodes],
            "texts": self._texts,
            "born_s": self._born_s,
        }
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "vphone.nodemirror", str(self._fd), str(read_end)],
                stdin=subprocess.PIPE,
                pass_fds=(self._fd, read_end),
                start_new_session=True,
            )
            assert self._child.stdin is not None
            self._child.stdin.write(json.dumps(table).encode())
            self._child.stdin.close()
        finally:
            os.close(read_end)
        self._updates = write_end
        os.close(self._fd)  # the child's now: the connection ends with it
        self._fd = None

    def update(self, rel: str, text: str) -> None:
        """A node's new text (after its plain file was written)."""
        data = frame(rel, text)
        with self._send:
            if self._updates is None:
                if self._child is None:  # not started yet: it starts with this text
                    self._texts[rel] = text
                return
            if self._broken:
                return
            try:
                while data:
                    data = data[os.write(self._updates, data) :]
            except OSError as error:
                self._broken = True
                log.warning("%s: its server is gone (%s); the phone's reads fail", self.FS_NAME, error)

    def close(self) -> None:
        self.detach()
        if self._updates is not None:
            os.close(self._updates)  # EOF: the child ends
            self._updates = None
        if self._child is not None:
            # It holds nothing to keep (the texts are the daemon's), and it would see the EOF
            # only at its next take (TAKE_EVERY_S): each phone's stop would wait for it.
            self._child.kill()
            self._child.wait()
            self._child = None
        super().close()


def serve(fuse_fd: int, updates_fd: int, table: dict[str, object]) -> None:
    """The child's loop: answer the connection, taking the sent texts before each answer."""
    rows = table["nodes"]
    texts = table["texts"]
    assert isinstance(rows, list) and isinstance(texts, dict)
    values = {rel: text.encode() for rel, text in texts.items()}
    nodes = tuple(ServedNode(rel, mode, uid, gid) for rel, mode, uid, gid in rows)
    server = NodeServer(nodes, lambda rel: values.get(rel, b""), _refuse, name=NodeMirror.NAME)
    born = table.get("born_s")
    server.born_at(born if isinstance(born, int) else 0)
    os.set_blocking(updates_fd, False)
    pending = bytearray()

    def take() -> bool:
        """Apply what the daemon sent; False once it closed its end."""
        while True:
            try:
                chunk = os.read(updates_fd, PIPE_BYTES)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            pending.extend(chunk)
            unframe(pending, values)

    while True:
        # The texts are taken before each answer, and at least every TAKE_EVERY_S else, so
        # that the pipe never fills while nobody reads (a wake-up per update would cost more).
        ready, _, _ = select.select([fuse_fd], [], [], TAKE_EVERY_S)
        if not take():
            return
        if not ready:
            continue
        try:
            request = os.read(fuse_fd, 64 * 1024 + 4096)
        except BlockingIOError:
            continue
        except OSError as error:
            if error.errno in (errno.EINTR, errno.ENOENT):
                continue
            return  # ENODEV: unmounted everywhere
        reply = server.answer(request)
        if reply is not None:
            with contextlib.suppress(FileNotFoundError):
                os.write(fuse_fd, reply)


def main() -> None:
    fuse_fd, updates_fd = int(sys.argv[1]), int(sys.argv[2])
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(SERVER_RT_PRIORITY))
    except OSError:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, SERVER_NICE)
    serve(fuse_fd, updates_fd, json.loads(sys.stdin.buffer.read()))


if __name__ == "__main__":
    main()
