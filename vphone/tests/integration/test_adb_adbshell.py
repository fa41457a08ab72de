"""adb-shell (a widely used pure-Python implementation of the ADB device protocol, pip extra
`clients`) drives the virtual phones unmodified (issue #28.4): with no adb server at all it opens
the phone's adbd port itself (CNXN with its RSA key, as a real phone asks for), runs shell
commands, reads the settings provider through `content query`, lists, stats, pushes and pulls
over sync v1, and streams logcat, on an unrooted (adreno-sd8gen2) and a rooted (adreno-sd865)
phone. The unrooted one is a user build (ro.adb.secure=1): adb-shell signs its AUTH token with
this host's adb key, the one the phone was brought up trusting.

The independent truths: adbutils through Debian's adb server on the same phone, and the bytes of
the files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbutils
import pytest
from vphone.testing.adb_wire import host_adb_key_path
from vphone.testing.phones import AdbServer, PhoneFactory

adb_device = pytest.importorskip("adb_shell.adb_device", reason="adb-shell is in the `clients` extra")
sign_cryptography = pytest.importorskip("adb_shell.auth.sign_cryptography")

pytestmark = pytest.mark.integration

PROFILES = {"unrooted": "adreno-sd8gen2", "rooted": "adreno-sd865"}
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def devices(
    module_virtual_phones: PhoneFactory,
    module_adb_server: AdbServer,
) -> Iterator[dict[str, Any]]:
    phones = module_virtual_phones(count=2, profiles=list(PROFILES.values()))
    # The unrooted phone is a user build (ro.adb.secure=1): it trusts the key it was brought up
    # with, this host's adb key, as a lab phone that "always allow"ed this computer once. adb-shell
    # signs with that key file, as its README shows for ~/.android/adbkey.
    signer = sign_cryptography.CryptographySigner(str(host_adb_key_path()))
    adb = module_adb_server.client()
    made: dict[str, Any] = {}
    for kind, phone in zip(PROFILES, phones, strict=True):
        device = adb_device.AdbDeviceTcp("127.0.0.1", phone.port, default_transport_timeout_s=TIMEOUT_S)
        assert device.connect(rsa_keys=[signer], auth_timeout_s=TIMEOUT_S)
        made[kind] = device
        made[f"{kind}-adbutils"] = adb.device(phone.adb_serial)
    yield made
    for kind in PROFILES:
        made[kind].close()


@pytest.mark.parametrize("kind", PROFILES)
def test_shell_runs_as_shell_and_root_only_where_rooted(devices: dict[str, Any], kind: str) -> None:
    device = devices[kind]
    truth: adbutils.AdbDevice = devices[f"{kind}-adbutils"]
    assert device.shell("getprop ro.serialno").strip() == truth.shell("getprop ro.serialno")
    assert device.shell("id -u").strip() == "2000"
    su = device.shell("su -c id -u 2>&1").strip()
    assert su == "0" if kind == "rooted" else su.endswith("not found")


@pytest.mark.parametrize("kind", PROFILES)
def test_framework_commands_through_the_device_protocol(devices: dict[str, Any], kind: str) -> None:
    device = devices[kind]
    truth: adbutils.AdbDevice = devices[f"{kind}-adbutils"]
    row = device.shell(
        "content query --uri content://settings/secure --projection name:value --where \"name='android_id'\""
    )
    match = re.fullmatch(r"Row: 0 name=android_id, value=([0-9a-f]{16})\n", row)
    assert match, row
    assert match[1] == truth.shell("settings get secure android_id")
    level = re.search(r"^  level: (\d+)$", device.shell("dumpsys battery"), re.MULTILINE)
    assert level and 0 <= int(level[1]) <= 100
    paths = dict(
        line.removeprefix("package:").rsplit("=", 1)[::-1]
        for line in device.shell("pm list packages -f").splitlines()
    )
    assert paths["com.android.shell"] == truth.shell("pm path com.android.shell").removeprefix("package:")


@pytest.mark.parametrize("kind", PROFILES)
def test_sync_push_stat_list_pull(devices: dict[str, Any], kind: str, tmp_path: Path) -> None:
    device = devices[kind]
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(150_000))
    remote = "/data/local/tmp/adbshell-blob.bin"
    device.push(str(source), remote, st_mode=0o100640)
    mode, size, _mtime = device.stat(remote)
    assert (mode & 0o777, size) == (0o640, 150_000)
    assert "adbshell-blob.bin" in [entry.filename.decode() for entry in device.list("/data/local/tmp")]
    back = tmp_path / "back.bin"
    device.pull(remote, str(back))
    assert back.read_bytes() == source.read_bytes()
    assert devices[f"{kind}-adbutils"].shell(f"stat -c %a {remote}") == "640"


@pytest.mark.parametrize("kind", PROFILES)
def test_streaming_logcat_sees_a_new_line(devices: dict[str, Any], kind: str) -> None:
    device = devices[kind]
    device.shell("logcat -c")
    stream = device.streaming_shell("logcat -v brief -s AdbShellProbe:I", read_timeout_s=TIMEOUT_S)
    devices[f"{kind}-adbutils"].shell("log -t AdbShellProbe streamed")
    seen = ""
    for chunk in stream:
        seen += chunk
        if "streamed" in seen:
            break
    assert re.search(r"I/AdbShellProbe\(\s*\d+\): streamed", seen), seen
