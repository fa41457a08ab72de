"""Thousands of malformed and mutated packets against one phone over raw TCP (seeded): the
daemon never dies, the fuzzed phone and its neighbour keep answering `adb shell echo`."""

from __future__ import annotations

import os
import random
import socket
import struct

import pytest

from farm.virtual.adb import packets as p
from tests.fixtures.phones import AdbServer

pytestmark = pytest.mark.integration

SEED = 20261129
CONNECTIONS = 250
PACKETS_PER_CONNECTION = 12
# Services that do not restart the phone (reboot/root/usb/tcpip would only make the test slow).
SERVICES = [b"shell,v2,raw:cat\0", b"shell:cat\0", b"sync:\0", b"exec:cat\0", b"bogus:\0", b"shell,v2,pty:\0"]


def packet(command: int, arg0: int, arg1: int, payload: bytes) -> bytes:
    return p.encode(command, arg0, arg1, payload, version=p.A_VERSION_MIN)


def random_packet(rng: random.Random, *, well_formed: bool) -> bytes:
    """A packet; with well_formed only framing-valid ones (random payloads, ids and services),
    so the connection lives on and the services' byte-stream parsers get the garbage."""
    choice = rng.randrange(4, 10) if well_formed else rng.randrange(10)
    if choice == 0:
        return rng.randbytes(rng.randrange(1, 60))  # line noise
    if choice == 1:  # bad magic
        raw = bytearray(packet(p.A_OKAY, 1, 1, b""))
        raw[20] ^= 0xFF
        return bytes(raw)
    if choice == 2:  # oversize length
        return struct.pack(
            "<6I", p.A_WRTE, 1, 1, p.MAX_PAYLOAD_BYTES + rng.randrange(1, 1 << 20), 0, p.A_WRTE ^ 0xFFFFFFFF
        )
    if choice == 3:  # unknown command, valid magic
        command = rng.getrandbits(32)
        return struct.pack("<6I", command, 0, 0, 0, 0, command ^ 0xFFFFFFFF)
    if choice == 4:
        return packet(p.A_OPEN, rng.randrange(0, 50), 0, rng.choice(SERVICES))
    if choice == 5:  # shell-v2 / sync garbage into whatever stream may exist
        return packet(
            p.A_WRTE, rng.randrange(0, 50), rng.randrange(0, 8), rng.randbytes(rng.randrange(0, 3000))
        )
    if choice == 6:
        return packet(p.A_CLSE, rng.randrange(0, 50), rng.randrange(0, 8), b"")
    if choice == 7:
        return packet(p.A_OKAY, rng.randrange(0, 50), rng.randrange(0, 8), b"")
    if choice == 8:  # a valid packet with one byte flipped
        raw = bytearray(packet(p.A_OPEN, 7, 0, rng.choice(SERVICES)))
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        return bytes(raw)
    return packet(p.A_CNXN, rng.getrandbits(32), rng.getrandbits(32), rng.randbytes(rng.randrange(0, 200)))


def fuzz_connection(port: int, rng: random.Random) -> int:
    data = b""
    if rng.random() < 0.8:
        data += packet(p.A_CNXN, p.A_VERSION, p.MAX_PAYLOAD_BYTES, b"host::features=shell_v2\0")
    sent = 0
    well_formed = rng.random() < 0.5
    for _ in range(PACKETS_PER_CONNECTION):
        data += random_packet(rng, well_formed=well_formed)
        sent += 1
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        try:
            sock.sendall(data)
            sock.settimeout(0.05)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # the phone dropped us: exactly what a malformed packet should do
    return sent


def test_fuzzed_phone_survives_and_neighbour_answers(adb_server: AdbServer, virtual_phones) -> None:
    phones = virtual_phones(count=2)
    target, neighbour = phones
    rng = random.Random(SEED)
    sent = sum(fuzz_connection(target.port, rng) for _ in range(CONNECTIONS))
    assert sent >= 3000

    state = (phones.state_dir / "state.json").read_text()
    pid = int(state.split('"pid":')[1].split(",")[0])
    os.kill(pid, 0)  # the daemon is alive
    for phone in (neighbour, target):
        result = adb_server.adb("-s", phone.adb_serial, "shell", "echo alive")
        assert result.stdout == "alive\n", result.stderr
