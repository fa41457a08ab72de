"""One client floods one phone (issue #18.2): streams, WRTEs past flow control, connections.
Each flood is a bounded loop on loopback; the phone refuses what is over its limits, the other
phone (same daemon) and the flooded one keep serving, and the daemon's memory stays bounded
(peak RSS, VmHWM, before and after)."""

from __future__ import annotations

import pytest
from vphone.adb import packets as p
from vphone.adb.server import MAX_CONNECTIONS
from vphone.adb.transport import MAX_STREAMS_PER_CONNECTION
from vphone.testing.adb_wire import WireHost
from vphone.testing.phones import AdbServer, PhoneFactory, PhoneSet, VirtualPhone
from vphone.testing.waiting import eventually

pytestmark = pytest.mark.integration

STREAM_FLOOD = 100
WRTE_FLOOD = 400  # x 1 MiB: the flood, which grew the daemon by 440 MB
CONNECTION_FLOOD = 40
MEMORY_BOUND_KB = 48 * 1024
SLEEPER = "sleep 307"


@pytest.fixture(scope="module")
def phones(module_virtual_phones: PhoneFactory) -> PhoneSet:
    return module_virtual_phones(count=2, profiles=["adreno-sd8gen2"])


@pytest.fixture(scope="module")
def adb_server(module_adb_server: AdbServer) -> AdbServer:
    return module_adb_server


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of the daemon, in kB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {key: int(fields[key].split()[0]) for key in ("VmRSS", "VmHWM")}


def both_answer(adb_server: AdbServer, phones: PhoneSet) -> bool:
    return all(
        adb_server.adb("-s", phone.adb_serial, "shell", "echo alive").stdout == "alive\n" for phone in phones
    )


def sleepers(adb_server: AdbServer, phone: VirtualPhone) -> int:
    listing = adb_server.adb("-s", phone.adb_serial, "shell", "ps -A -o ARGS").stdout.splitlines()
    return sum(line.strip() == SLEEPER for line in listing)


def test_stream_flood_is_capped_per_connection_and_its_processes_end(
    adb_server: AdbServer, phones: PhoneSet
) -> None:
    target = phones[0]
    assert phones.daemon_pid is not None
    before = memory_kb(phones.daemon_pid)
    with WireHost.connect(target.port) as flood:
        answers = [flood.open(100 + i, f"shell:{SLEEPER}") for i in range(STREAM_FLOOD)]
        opened = [local for local in answers if local is not None]
        assert len(opened) == MAX_STREAMS_PER_CONNECTION
        assert all(local is None for local in answers[MAX_STREAMS_PER_CONNECTION:])
        assert eventually(lambda: sleepers(adb_server, target) == MAX_STREAMS_PER_CONNECTION)
        assert both_answer(adb_server, phones)
    # The host hung up: every stream's shell gets SIGHUP, like adbd's children.
    assert eventually(lambda: sleepers(adb_server, target) == 0)
    after = memory_kb(phones.daemon_pid)
    assert after["VmHWM"] - before["VmHWM"] < MEMORY_BOUND_KB, (before, after)


def test_wrte_flood_past_flow_control_ends_that_connection_with_bounded_memory(
    adb_server: AdbServer, phones: PhoneSet
) -> None:
    target = phones[0]
    assert phones.daemon_pid is not None
    before = memory_kb(phones.daemon_pid)
    chunk = bytes(p.MAX_PAYLOAD_BYTES)
    sent = 0
    with WireHost.connect(target.port) as flood:
        # The service never reads its stdin, so the stream's one WRTE in flight is never taken.
        local = flood.open(1, f"exec:{SLEEPER}")
        assert local is not None
        try:
            for _ in range(WRTE_FLOOD):
                flood.send(p.A_WRTE, 1, local, chunk)
                sent += 1
        except OSError:
            pass  # the phone closed the connection: what it must do
        assert flood.closed_by_phone()
    assert sent < WRTE_FLOOD  # the phone stopped reading long before 400 MiB were in
    after = memory_kb(phones.daemon_pid)
    assert after["VmHWM"] - before["VmHWM"] < MEMORY_BOUND_KB, (before, after)
    assert eventually(lambda: sleepers(adb_server, target) == 0)
    assert both_answer(adb_server, phones)


def test_connection_flood_is_capped_per_phone_and_the_slots_come_back(
    adb_server: AdbServer, phones: PhoneSet
) -> None:
    target = phones[0]
    hosts: list[WireHost] = []
    refused = 0
    try:
        for _ in range(CONNECTION_FLOOD):
            try:
                hosts.append(WireHost.connect(target.port))
            except (ConnectionError, OSError):
                refused += 1
        # The adb server holds one connection to each phone; the flood gets the rest.
        assert (len(hosts), refused) == (MAX_CONNECTIONS - 1, CONNECTION_FLOOD - MAX_CONNECTIONS + 1)
        assert both_answer(adb_server, phones)  # through the adb server's own connections
    finally:
        for host in hosts:
            host.close()
    assert eventually(lambda: _accepted(target))


def _accepted(phone: VirtualPhone) -> bool:
    try:
        WireHost.connect(phone.port).close()
    except (ConnectionError, OSError):
        return False
    return True
