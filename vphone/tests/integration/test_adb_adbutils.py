"""adbutils (and the adb of the adbutils wheel, platform-tools 36) against virtual phones."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

import adbutils
import pytest
from vphone.testing.phones import AdbServer, kill_adb_server, start_adb_server

pytestmark = pytest.mark.integration

WHEEL_ADB = Path(adbutils.__file__).parent / "binaries" / "adb"


def test_adbutils_shell_sync_getprop_battery(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1)
    device = phones[0].device(phones.client())

    assert device.shell("echo hello") == "hello"
    v1 = device.shell2("echo out; (exit 5)")  # v1: adbutils appends `; echo X4EXIT:$?`
    assert (v1.returncode, v1.output.strip()) == (5, "out")
    v2 = device.shell2("echo out; echo err >&2; exit 9", v2=True)
    assert v2.returncode == 9
    assert v2.stdout.strip() == "out" and v2.stderr.strip() == "err"

    assert device.getprop("ro.serialno") == phones[0].serial
    assert "shell_v2" in device.get_features()

    payload = os.urandom(300_000)
    written = device.sync.push(payload, "/data/local/tmp/dir/x.bin", mode=0o755)
    assert written == len(payload)
    assert device.sync.read_bytes("/data/local/tmp/dir/x.bin") == payload
    info = device.sync.stat("/data/local/tmp/dir/x.bin")
    assert info.size == len(payload)
    assert stat.S_IMODE(info.mode) == 0o755  # the mode the host sent, as adbd keeps it
    assert not device.sync.exists("/data/local/tmp/none")
    assert "x.bin" in {entry.path for entry in device.sync.list("/data/local/tmp/dir")}
    back = tmp_path / "x.bin"
    device.sync.pull("/data/local/tmp/dir/x.bin", back)
    assert back.read_bytes() == payload
    with pytest.raises(adbutils.AdbError):
        device.sync.read_bytes("/data/local/tmp/none")

    battery = device.battery()
    assert 0 <= battery.level <= 100


def test_wheel_adb_platform_tools_36_basic_set(tmp_path: Path, virtual_phones) -> None:
    if not os.access(WHEEL_ADB, os.X_OK):
        pytest.skip("adbutils wheel has no adb binary")
    phones = virtual_phones(count=1)
    phone = phones[0]
    server = start_adb_server(adb_binary=str(WHEEL_ADB))
    try:
        connected = server.adb("connect", phone.adb_serial)
        assert "connected to" in connected.stdout
        deadline = time.monotonic() + 15
        while phone.adb_serial + "\tdevice" not in server.adb("devices").stdout:
            assert time.monotonic() < deadline, server.adb("devices").stdout
            time.sleep(0.2)
        result = server.adb("-s", phone.adb_serial, "shell", "echo out; echo err >&2; exit 4")
        assert (result.returncode, result.stdout, result.stderr.strip()) == (4, "out\n", "err")
        source = tmp_path / "f.bin"
        source.write_bytes(os.urandom(2_000_000))
        assert (
            server.adb("-s", phone.adb_serial, "push", str(source), "/data/local/tmp/f.bin").returncode == 0
        )
        back = tmp_path / "back.bin"
        assert server.adb("-s", phone.adb_serial, "pull", "/data/local/tmp/f.bin", str(back)).returncode == 0
        assert hashlib.sha256(back.read_bytes()).digest() == hashlib.sha256(source.read_bytes()).digest()
    finally:
        kill_adb_server(server)


def test_process_still_running_when_its_stream_closes_is_killed(virtual_phones) -> None:
    phones = virtual_phones(count=1)
    device = phones[0].device(phones.client())
    connection = device.shell("echo $$; exec sleep 1000", stream=True)
    pid = connection.conn.makefile("rb").readline().decode().strip()
    assert pid.isdigit()
    survivor = device.shell("nohup sleep 1000 >/dev/null 2>&1 & echo $!")
    assert device.shell(f"kill -0 {pid} && echo alive") == "alive"
    connection.close()
    deadline = time.monotonic() + 5
    while device.shell(f"kill -0 {pid} 2>/dev/null && echo alive") == "alive":
        assert time.monotonic() < deadline, "sleep survived its stream being closed"
        time.sleep(0.1)
    # nohup'd background work outlives the stream that started it, as on a phone
    assert device.shell(f"kill -0 {survivor} && echo alive") == "alive"
    device.shell(f"kill {survivor}")


def test_root_unroot_and_tcpip_replies(adb_server: AdbServer, virtual_phones) -> None:
    phones = virtual_phones(count=2, profiles=["adreno-nexus6p", "adreno-sd8gen2"])  # userdebug, user
    debug, production = phones

    refused = adb_server.adb("-s", production.adb_serial, "root")
    assert "adbd cannot run as root in production builds" in refused.stdout + refused.stderr
    assert adb_server.adb("-s", production.adb_serial, "shell", "id -u").stdout.strip() == "2000"

    first = adb_server.adb("-s", debug.adb_serial, "root", timeout_s=60)
    assert "restarting adbd as root" in first.stdout + first.stderr
    adb_server.adb("-s", debug.adb_serial, "wait-for-device", timeout_s=30)
    assert adb_server.adb("-s", debug.adb_serial, "shell", "id -u").stdout.strip() == "0"
    again = adb_server.adb("-s", debug.adb_serial, "root")
    assert "adbd is already running as root" in again.stdout
    adb_server.adb("-s", debug.adb_serial, "unroot", timeout_s=60)
    adb_server.adb("-s", debug.adb_serial, "wait-for-device", timeout_s=30)
    assert adb_server.adb("-s", debug.adb_serial, "shell", "id -u").stdout.strip() == "2000"

    device = debug.device(phones.client())
    assert device.tcpip(5555) == "restarting in TCP mode port: 5555\n"
    assert adb_server.adb("-s", debug.adb_serial, "wait-for-device", timeout_s=30).returncode == 0


def test_unknown_service_is_refused_with_closed(virtual_phones) -> None:
    phones = virtual_phones(count=1)
    device = phones[0].device(phones.client())
    connection = device.open_transport()
    connection.send_command("no-such-service:")
    with pytest.raises(adbutils.AdbError, match="closed"):
        connection.check_okay()
    connection.close()
    assert device.shell("echo still") == "still"
