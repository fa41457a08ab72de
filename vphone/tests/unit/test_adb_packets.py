"""Framing, checksum rule, banner and the pure parsers of the ADB services."""

from __future__ import annotations

import struct

import pytest
from vphone.adb import packets as p
from vphone.adb.services import misc, shell, sync


def test_header_roundtrip_and_magic() -> None:
    raw = p.encode(p.A_WRTE, 3, 9, b"abc")
    header = p.parse_header(raw[:24], max_payload=4096)
    assert (header.command, header.arg0, header.arg1, header.length) == (p.A_WRTE, 3, 9, 3)
    assert struct.unpack("<6I", raw[:24])[5] == p.A_WRTE ^ 0xFFFFFFFF
    assert raw[24:] == b"abc"


def test_checksum_only_below_skip_checksum_version() -> None:
    payload = bytes(range(256)) * 3
    old = struct.unpack("<6I", p.encode(p.A_WRTE, 1, 2, payload, version=p.A_VERSION_MIN)[:24])
    new = struct.unpack("<6I", p.encode(p.A_WRTE, 1, 2, payload, version=p.A_VERSION)[:24])
    assert old[4] == sum(payload) % 2**32
    assert new[4] == 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (struct.pack("<6I", p.A_OKAY, 0, 0, 0, 0, 0x12345678), "bad magic"),
        (struct.pack("<6I", p.A_SYNC, 0, 0, 0, 0, p.A_SYNC ^ 0xFFFFFFFF), "unknown command"),
        (struct.pack("<6I", p.A_STLS, 0, 0, 0, 0, p.A_STLS ^ 0xFFFFFFFF), "unknown command"),
        (struct.pack("<6I", p.A_WRTE, 0, 0, 4097, 0, p.A_WRTE ^ 0xFFFFFFFF), "exceeds"),
    ],
)
def test_malformed_headers_are_rejected(raw: bytes, message: str) -> None:
    with pytest.raises(p.ProtocolError, match=message):
        p.parse_header(raw, max_payload=4096)


def test_checksum_is_ignored_on_receive() -> None:
    raw = struct.pack("<6I", p.A_OKAY, 1, 2, 0, 0xDEADBEEF, p.A_OKAY ^ 0xFFFFFFFF)
    assert p.parse_header(raw, max_payload=4096).command == p.A_OKAY


def test_banner_fields_and_forbidden_characters() -> None:
    banner = p.device_banner(
        {"ro.product.name": "a:b", "ro.product.model": "Pixel 7;x=y", "ro.product.device": "dev"}
    ).decode()
    assert banner.startswith(
        "device::ro.product.name=a_b;ro.product.model=Pixel 7_x_y;ro.product.device=dev;"
    )
    assert banner.endswith(
        "features=shell_v2,cmd,stat_v2,ls_v2,fixed_push_mkdir,fixed_push_symlink_timestamp"
    )


def test_service_name_strips_trailing_nuls() -> None:
    assert p.service_name(b"shell:echo hi\0") == "shell:echo hi"


@pytest.mark.parametrize(
    ("name", "v2", "pty", "term", "command"),
    [
        ("shell:", False, True, "dumb", None),
        ("shell:ls", False, False, "dumb", "ls"),
        ("shell,v2,TERM=xterm,raw:echo hi", True, False, "xterm", "echo hi"),
        ("shell,v2,TERM=xterm,pty:", True, True, "xterm", None),
        ("shell,v2:pm list", True, False, "dumb", "pm list"),
        ("shell,v2,pty:top -n 1", True, True, "dumb", "top -n 1"),
        ("shell,weird,v2,raw:a:b", True, False, "dumb", "a:b"),
    ],
)
def test_parse_shell_service(name: str, v2: bool, pty: bool, term: str, command: str | None) -> None:
    assert shell.parse_shell_service(name) == shell.ShellRequest(v2=v2, pty=pty, term=term, command=command)


def test_shell_v2_packet_layout() -> None:
    assert shell.pack_v2(shell.ID_EXIT, bytes([7])) == b"\x03\x01\x00\x00\x00\x07"


@pytest.mark.parametrize(
    ("text", "mode"), [("33188", 0o100644), ("0755", 0o755), ("0x81ed", 0o100755), ("", 0)]
)
def test_send_mode_parses_like_strtoul(text: str, mode: int) -> None:
    assert sync.parse_mode(text) == mode


@pytest.mark.parametrize(
    ("mode", "kept"), [(0o100644, 0o644), (0o100755, 0o755), (0o100600, 0o600), (0o104711, 0o711)]
)
def test_file_mode_keeps_the_permission_bits_the_host_sent(mode: int, kept: int) -> None:
    assert sync.file_mode(mode) == kept


def test_sync_records_are_full_size() -> None:
    assert len(sync.stat_v1(None)) == 16
    assert sync.stat_v1(None) == b"STAT" + bytes(12)
    missing = sync.stat_v2(b"STA2", None, 2)
    assert len(missing) == 72 and missing[:8] == b"STA2\x02\x00\x00\x00"
    assert sync.DENT_V1.size == 20 and sync.DENT_V2.size == 76


def test_root_and_tcpip_texts() -> None:
    assert misc.root_reply(is_root=True, can_root=True) == ("adbd is already running as root\n", False)
    assert misc.root_reply(is_root=False, can_root=False) == (
        "adbd cannot run as root in production builds\n",
        False,
    )
    assert misc.root_reply(is_root=False, can_root=True) == ("restarting adbd as root\n", True)
    assert misc.unroot_reply(is_root=False) == ("adbd not running as root\n", False)
    assert misc.unroot_reply(is_root=True) == ("restarting adbd as non root\n", True)
    assert misc.parse_tcpip_port("5555") == 5555
    assert misc.parse_tcpip_port("abc") is None
