"""pure-python-adb (ppadb, a widely used pure-Python adb client, pip extra `clients`) drives the
virtual phones unmodified (issue #28.4): it speaks the adb server's smart-socket protocol itself
(host:transport, shell:, sync:) to an unrooted (adreno-sd8gen2) and a rooted (adreno-sd865) phone,
and its device plugins parse the phone's tools: getprop's `[key]: [value]` lines, `pm list
packages|features`, `pm path`, `wm size|density`, `dumpsys battery`, /proc/stat, `input`, and a
file pushed and pulled over sync.

The independent truths are the phone's own state read another way: adbutils' shell for getprop,
/proc and the input log, and the bytes of the pushed file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adbutils
import pytest
from vphone.testing.phones import AdbServer, PhoneFactory

ppadb_client = pytest.importorskip("ppadb.client", reason="pure-python-adb is in the `clients` extra")

pytestmark = pytest.mark.integration

PROFILES = {"unrooted": "adreno-sd8gen2", "rooted": "adreno-sd865"}


@pytest.fixture(scope="module")
def devices(module_virtual_phones: PhoneFactory, module_adb_server: AdbServer) -> Iterator[dict[str, Any]]:
    phones = module_virtual_phones(count=2, profiles=list(PROFILES.values()))
    client = ppadb_client.Client(host="127.0.0.1", port=module_adb_server.port)
    adb = module_adb_server.client()
    made: dict[str, Any] = {"client": client}
    for kind, phone in zip(PROFILES, phones, strict=True):
        made[kind] = client.device(phone.adb_serial)
        made[f"{kind}-adbutils"] = adb.device(phone.adb_serial)
    yield made


@pytest.mark.parametrize("kind", PROFILES)
def test_device_is_listed_and_its_properties_parse(devices: dict[str, Any], kind: str) -> None:
    device = devices[kind]
    truth: adbutils.AdbDevice = devices[f"{kind}-adbutils"]
    assert device.serial in [d.serial for d in devices["client"].devices()]
    props = device.get_properties()
    assert props["ro.serialno"] == truth.shell("getprop ro.serialno")
    assert props["ro.build.version.sdk"] == truth.shell("getprop ro.build.version.sdk")
    assert device.shell("id -u").strip() == "2000"
    device.wait_boot_complete(timeout=30)


@pytest.mark.parametrize("kind", PROFILES)
def test_package_and_display_plugins(devices: dict[str, Any], kind: str) -> None:
    device = devices[kind]
    assert "com.android.shell" in device.list_packages()
    assert device.is_installed("com.android.shell")
    assert not device.is_installed("org.nosuch.app")
    assert device.list_features()["android.hardware.touchscreen"] is True
    size = device.wm_size()
    assert size is not None and size.width > 0 and size.height > size.width
    density = int(devices[f"{kind}-adbutils"].shell("wm density").split(": ")[1])
    assert device.wm_density() == density // 160  # ppadb's bucket: dpi / 160


@pytest.mark.parametrize("kind", PROFILES)
def test_battery_cpu_and_input_plugins(devices: dict[str, Any], kind: str) -> None:
    device = devices[kind]
    truth: adbutils.AdbDevice = devices[f"{kind}-adbutils"]
    capacity = int(truth.shell("cat /sys/class/power_supply/battery/capacity"))
    assert abs(device.get_battery_level() - capacity) <= 1
    assert device.cpu_count() == len(
        [c for c in truth.shell("ls /sys/devices/system/cpu").split() if c[3:].isdigit()]
    )
    assert device.cpu_times().total() > 0
    device.input_keyevent(224)  # KEYCODE_WAKEUP
    device.input_tap(540, 1200)
    device.input_text("farm")
    log = truth.shell("logcat -d -b main -v raw -s InputDispatcher")
    assert "keyevent 224" in log and "tap 540 1200" in log and "text farm" in log


@pytest.mark.parametrize("kind", PROFILES)
def test_push_and_pull_over_sync(devices: dict[str, Any], kind: str, tmp_path: Path) -> None:
    device = devices[kind]
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(200_000))
    remote = "/data/local/tmp/ppadb-blob.bin"
    device.push(str(source), remote)
    back = tmp_path / "back.bin"
    device.pull(remote, str(back))
    assert back.read_bytes() == source.read_bytes()
    assert devices[f"{kind}-adbutils"].shell(f"stat -c %s {remote}") == str(200_000)
