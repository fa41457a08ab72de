"""Thousands of malformed and mutated packets against one phone over raw TCP (seeded): every
CNXN is answered, every framing error and every flow-control violation ends its connection, the
daemon never dies, and the fuzzed phone and its neighbour keep answering `adb shell echo`."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import struct
from dataclasses import dataclass

import pytest
from vphone.adb import packets as p
from vphone.testing.adb_wire import WireHost
from vphone.testing.phones import AdbServer
from vphone.testing.waiting import eventually

pytestmark = pytest.mark.integration

SEED = 20261129
CONNECTIONS = 250
PACKETS_PER_CONNECTION = 12
FLOW_CONTROL_VIOLATIONS = 5
REPLY_TIMEOUT_S = 10.0
# Services that do not restart the phone (reboot/root/usb/tcpip would only make the test slow).
SERVICES = [b"shell,v2,raw:cat\0", b"shell:cat\0", b"sync:\0", b"exec:cat\0", b"bogus:\0", b"shell,v2,pty:\0"]


def packet(command: int, arg0: int, arg1: int, payload: bytes) -> bytes:
    return p.encode(command, arg0, arg1, payload, version=p.A_VERSION_MIN)


def random_packet(rng: random.Random, choice: int) -> bytes:
    """A packet of kind `choice` (0-9); 4-9 are framing-valid (random payloads, ids and
    services), so the connection lives on and the services' byte-stream parsers get the garbage."""
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


# Choices that end the connection for sure when the phone reaches them (bad magic, oversize,
# unknown command), and those after which framing may be lost (noise, a flipped byte).
_CLOSING = {1, 2, 3}
_DESYNCING = {0, 8}


@dataclass(frozen=True)
class Outcome:
    had_cnxn: bool
    must_close: bool  # a closing packet comes before anything that could desynchronise framing
    banner: bool  # the phone's CNXN reached us
    closed: bool  # the phone ended the connection (FIN or reset)


def fuzz_connection(port: int, rng: random.Random) -> Outcome:
    data = b""
    had_cnxn = rng.random() < 0.8
    if had_cnxn:
        data += packet(p.A_CNXN, p.A_VERSION, p.MAX_PAYLOAD_BYTES, b"host::features=shell_v2\0")
    well_formed = rng.random() < 0.5
    choices = [
        rng.randrange(4, 10) if well_formed else rng.randrange(10) for _ in range(PACKETS_PER_CONNECTION)
    ]
    data += b"".join(random_packet(rng, choice) for choice in choices)
    first_risky = next((c for c in choices if c in _CLOSING | _DESYNCING), None)
    must_close = first_risky in _CLOSING
    received = b""
    closed = False
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        try:
            sock.sendall(data)
            # Wait for what is asserted (the banner, the end); only drain the rest.
            sock.settimeout(REPLY_TIMEOUT_S if had_cnxn or must_close else 0.05)
            while not (b"device::" in received or not had_cnxn) or (must_close and not closed):
                chunk = sock.recv(65536)
                received += chunk
                closed = not chunk
                if closed:
                    break
        except TimeoutError:
            pass
        except OSError:
            closed = True  # reset: the phone dropped us with our bytes unread
    return Outcome(had_cnxn, must_close, b"device::" in received, closed)


def connect_when_a_slot_is_free(port: int) -> WireHost:
    """A connection with its banner, once the phone has one free: a fuzzed connection keeps its
    slot (MAX_CONNECTIONS) until its streams' processes are ended, which takes a while under load."""
    hosts: list[WireHost] = []

    def connected() -> bool:
        with contextlib.suppress(ConnectionError, OSError):
            hosts.append(WireHost.connect(port))
        return bool(hosts)

    assert eventually(connected, timeout_s=60), f"the phone on port {port} never took a connection again"
    return hosts[0]


def violate_flow_control(port: int, remote_id: int) -> tuple[bool, bool]:
    """OPEN a stream, then two WRTEs without waiting for OKAY: (stream opened, connection ended)."""
    with connect_when_a_slot_is_free(port) as host:
        local = host.open(remote_id, "shell,v2,raw:cat")
        if local is None:
            return False, False
        with contextlib.suppress(OSError):
            host.sock.sendall(
                packet(p.A_WRTE, remote_id, local, b"one") + packet(p.A_WRTE, remote_id, local, b"two")
            )
        return True, host.closed_by_phone(REPLY_TIMEOUT_S)


def test_fuzzed_phone_survives_and_neighbour_answers(adb_server: AdbServer, virtual_phones) -> None:
    phones = virtual_phones(count=2)
    target, neighbour = phones
    rng = random.Random(SEED)
    outcomes = [fuzz_connection(target.port, rng) for _ in range(CONNECTIONS)]
    # Every CNXN is answered unless the phone reset the connection first (a reset may drop the
    # banner on our side); every closing packet ends its connection.
    unanswered = [o for o in outcomes if o.had_cnxn and not (o.banner or o.closed)]
    assert not unanswered, unanswered[:5]
    assert sum(o.banner for o in outcomes) > CONNECTIONS // 4
    must_close = [o for o in outcomes if o.must_close]
    assert len(must_close) > CONNECTIONS // 4 and all(o.closed for o in must_close)
    # A host that ignores one-WRTE-in-flight loses its connection, every time.
    violations = [violate_flow_control(target.port, 40 + i) for i in range(FLOW_CONTROL_VIOLATIONS)]
    assert violations == [(True, True)] * FLOW_CONTROL_VIOLATIONS

    assert phones.daemon_pid is not None
    os.kill(phones.daemon_pid, 0)  # the daemon is alive
    for phone in (neighbour, target):
        result = adb_server.adb("-s", phone.adb_serial, "shell", "echo alive")
        assert result.stdout == "alive\n", result.stderr
