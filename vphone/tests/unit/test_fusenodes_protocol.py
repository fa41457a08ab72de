"""The FUSE clock-node server's answers to kernel requests, byte for byte (pure: no mount).
The layouts are <linux/fuse.h>'s; vphone/tests/integration/test_fusenodes.py checks the same
server against the real kernel."""

from __future__ import annotations

import errno
import stat
import struct

from vphone import fusenodes as f

NODES = (f.ServedNode("devices/system/cpu/cpufreq/policy0/scaling_governor", 0o644, 2000, 2001),)


def _server(written: list[bytes]) -> f.NodeServer:
    def write(rel: str, data: bytes) -> int | None:
        written.append(data)
        return errno.EINVAL if data.startswith(b"bogus") else None

    return f.NodeServer(NODES, lambda rel: b"schedutil\n", write)


def _request(opcode: int, nodeid: int, body: bytes = b"", unique: int = 7) -> bytes:
    return f.IN_HEADER.pack(f.IN_HEADER.size + len(body), opcode, unique, nodeid, 0, 0, 1, 0, 0) + body


def _reply(raw: bytes | None) -> tuple[int, bytes]:
    assert raw is not None
    length, error, unique = f.OUT_HEADER.unpack_from(raw)
    assert length == len(raw) and unique == 7
    return error, raw[f.OUT_HEADER.size :]


def test_init_negotiates_the_kernels_minor_up_to_ours_and_only_atomic_o_trunc() -> None:
    s = _server([])
    error, out = _reply(s.answer(_request(f.INIT, 0, f.INIT_IN.pack(7, 41, 131072, 0xFFFFFFFF))))
    assert error == 0 and len(out) == 64
    major, minor, _readahead, flags, *_rest = f.INIT_OUT.unpack(out)
    assert (major, minor, flags) == (7, f.FUSE_MINOR_MAX, f.FUSE_ATOMIC_O_TRUNC)
    error, _ = _reply(s.answer(_request(f.INIT, 0, f.INIT_IN.pack(8, 0, 0, 0))))
    assert error == -errno.EPROTO


def test_lookup_finds_only_the_served_names() -> None:
    s = _server([])
    error, out = _reply(s.answer(_request(f.LOOKUP, f.ROOT_ID, b"n0\0")))
    assert error == 0
    nodeid = f.ENTRY_OUT.unpack_from(out)[0]
    attr = f.ATTR.unpack_from(out, f.ENTRY_OUT.size)
    assert nodeid == 2 and attr[0] == 2
    mode, _nlink, uid, gid = attr[9:13]
    assert mode == stat.S_IFREG | 0o644 and (uid, gid) == (2000, 2001)
    for name in (b"..\0", b"n1\0", b"../etc/passwd\0", b"devices\0"):
        assert _reply(s.answer(_request(f.LOOKUP, f.ROOT_ID, name)))[0] == -errno.ENOENT
    assert _reply(s.answer(_request(f.LOOKUP, 2, b"x\0")))[0] == -errno.ENOTDIR


def test_reads_give_the_current_text_and_writes_the_handlers_errno() -> None:
    written: list[bytes] = []
    s = _server(written)
    error, out = _reply(s.answer(_request(f.OPEN, 2, struct.pack("<II", 0, 0))))
    assert error == 0 and f.OPEN_OUT.unpack(out)[1] == f.FOPEN_DIRECT_IO
    assert _reply(s.answer(_request(f.READ, 2, f.IO_IN.pack(0, 3, 4096, 0, 0, 0, 0)))) == (0, b"edutil\n")
    ok = f.IO_IN.pack(0, 0, 12, 0, 0, 0, 0) + b"performance\n"
    assert _reply(s.answer(_request(f.WRITE, 2, ok))) == (0, f.WRITE_OUT.pack(12, 0))
    bad = f.IO_IN.pack(0, 0, 6, 0, 0, 0, 0) + b"bogus\n"
    assert _reply(s.answer(_request(f.WRITE, 2, bad))) == (-errno.EINVAL, b"")
    assert written == [b"performance\n", b"bogus\n"]
    assert _reply(s.answer(_request(f.READ, 9, f.IO_IN.pack(0, 0, 10, 0, 0, 0, 0))))[0] == -errno.ENOENT


def test_names_modes_and_owners_cannot_change() -> None:
    s = _server([])
    for opcode in f.NAME_CHANGES:
        assert _reply(s.answer(_request(opcode, f.ROOT_ID, b"x\0")))[0] == -errno.EPERM
    chmod = struct.pack("<IIQQ", f.FATTR_MODE, 0, 0, 0) + bytes(56)
    assert _reply(s.answer(_request(f.SETATTR, 2, chmod)))[0] == -errno.EPERM
    truncate = struct.pack("<IIQQ", 1 << 3, 0, 0, 0) + bytes(56)  # FATTR_SIZE: sysfs ignores it
    assert _reply(s.answer(_request(f.SETATTR, 2, truncate)))[0] == 0
    assert _reply(s.answer(_request(f.READLINK, 2)))[0] == -errno.EINVAL
    assert _reply(s.answer(_request(22, 2, bytes(8) + b"security.capability\0")))[0] == -errno.ENOSYS
    assert s.answer(_request(f.FORGET, 2, bytes(8))) is None
