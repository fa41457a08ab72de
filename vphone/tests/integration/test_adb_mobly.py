"""Google's Mobly (a widely used Android test framework, pip extra `clients`) accepts the virtual
phones unmodified (issue #10.6): its AndroidDevice controller starts on an unrooted
(adreno-sd8gen2) and a rooted userdebug (adreno-sd865) phone, reads the build identity, runs its
default logcat service, roots the debuggable phone and turns on persistent logs there, takes a
bug report (the path a failing test takes), and reboots.

Mobly drives the `adb` command line; it finds our private adb server through
ANDROID_ADB_SERVER_PORT. The independent truths are the phone's own files and tools: the
/system/build.prop pulled over sync, `getprop`, and Debian adb's `adb bugreport`, whose client
speaks bugreportz's progress protocol (Mobly uses only its last line).
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vphone.testing.phones import AdbServer, PhoneFactory

android_device = pytest.importorskip(
    "mobly.controllers.android_device", reason="mobly is in the `clients` extra"
)

pytestmark = pytest.mark.integration

PROFILES = {"unrooted": "adreno-sd8gen2", "rooted": "adreno-sd865"}
LOG_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def devices(
    module_virtual_phones: PhoneFactory,
    module_adb_server: AdbServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    phones = module_virtual_phones(count=2, profiles=list(PROFILES.values()))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANDROID_ADB_SERVER_PORT", str(module_adb_server.port))
        # AndroidDevice keeps its logs (logcat, bug reports) under mobly's log path.
        env.setattr(logging, "log_path", str(tmp_path_factory.mktemp("mobly")), raising=False)
        ads = android_device.create([{"serial": phone.adb_serial} for phone in phones])
        made: dict[str, Any] = {}
        for kind, phone in zip(PROFILES, phones, strict=True):
            made[kind] = next(ad for ad in ads if ad.serial == phone.adb_serial)
            made[f"{kind}-phone"] = phone
        yield made
        android_device.destroy(ads)


def _build_prop(ad: Any, tmp_path: Path) -> dict[str, str]:
    local = tmp_path / f"build-{ad.serial.replace(':', '-')}.prop"
    ad.adb.pull(["/system/build.prop", str(local)])
    pairs = (line.split("=", 1) for line in local.read_text(encoding="utf-8").splitlines() if "=" in line)
    return dict(pairs)


@pytest.mark.parametrize("kind", PROFILES)
def test_build_info_is_the_phones_build_prop(devices: dict[str, Any], kind: str, tmp_path: Path) -> None:
    ad = devices[kind]
    info = ad.build_info
    prop = _build_prop(ad, tmp_path)
    assert info["build_id"] and info["build_id"] == prop["ro.build.id"]
    assert info["build_version_incremental"] == prop["ro.build.version.incremental"]
    assert info["build_version_codename"] == "REL"  # a released build, as every lab phone runs
    assert info["build_product"] == prop["ro.build.product"] == prop["ro.product.device"]
    assert info["build_characteristics"] == prop["ro.build.characteristics"]
    assert info["build_version_sdk"] == prop["ro.build.version.sdk"]
    # brand/name/device:release/id/incremental:type/tags, from the same build.prop
    expected = (
        f"{prop['ro.product.brand']}/{prop['ro.product.name']}/{prop['ro.product.device']}:"
        f"{prop['ro.build.version.release']}/{prop['ro.build.id']}/{prop['ro.build.version.incremental']}:"
        f"{prop['ro.build.type']}/{prop['ro.build.tags']}"
    )
    assert info["build_fingerprint"] == expected
    assert info["debuggable"] == ("1" if kind == "rooted" else "0")


def test_the_logcat_service_records_what_the_phone_logs(devices: dict[str, Any]) -> None:
    for kind in PROFILES:
        ad = devices[kind]
        assert ad.services.logcat.is_alive
        marker = f"mobly-{uuid.uuid4().hex[:12]}"
        ad.adb.shell(["log", "-t", "farmtest", marker])
        path = Path(ad.services.logcat.adb_logcat_file_path)
        deadline = time.monotonic() + LOG_DEADLINE_S
        while marker not in (path.read_text(errors="replace") if path.exists() else ""):
            assert time.monotonic() < deadline, f"{kind}: {marker} never reached {path}"
            time.sleep(0.2)
        line = next(ln for ln in path.read_text(errors="replace").splitlines() if marker in ln)
        # threadtime: date time pid tid priority tag: message
        assert re.match(r"\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +\d+ +\d+ I farmtest+ *: ", line), line


def test_the_debuggable_phone_is_rooted_and_keeps_persistent_logs(devices: dict[str, Any]) -> None:
    rooted, unrooted = devices["rooted"], devices["unrooted"]
    assert rooted.is_rootable and not unrooted.is_rootable
    assert rooted.adb.shell("id -u").strip() == b"0"  # Mobly ran `adb root` on it
    assert unrooted.adb.shell("id -u").strip() == b"2000"
    # Mobly's logcat service ran logpersist.start on the rootable phone (no warning path taken).
    assert rooted.adb.shell("getprop persist.logd.logpersistd").strip() == b"logcatd"
    assert rooted.adb.has_shell_command("logpersist.start")
    assert not unrooted.adb.has_shell_command("logpersist.start")  # user builds ship none


@pytest.mark.parametrize("kind", PROFILES)
def test_take_bug_report_brings_back_dumpstates_zip(
    devices: dict[str, Any], kind: str, tmp_path: Path
) -> None:
    ad = devices[kind]
    marker = f"report-{uuid.uuid4().hex[:12]}"
    ad.adb.shell(["log", "-t", "farmtest", marker])
    path = ad.take_bug_report(destination=str(tmp_path))
    with zipfile.ZipFile(path) as archive:
        entry = archive.read("main_entry.txt").decode()
        text = archive.read(entry).decode()
        assert archive.read("version.txt").decode() == "2.0"
    fingerprint = ad.adb.shell("getprop ro.build.fingerprint").decode().strip()
    build_id = ad.adb.shell("getprop ro.build.id").decode().strip()
    assert entry.startswith(f"bugreport-{ad.build_info['build_product']}-{build_id}-")
    assert entry.endswith(".txt")
    assert f"Build fingerprint: '{fingerprint}'" in text
    assert "------ SYSTEM PROPERTIES (getprop) ------" in text and f"[ro.build.id]: [{build_id}]" in text
    assert marker in text  # the system log section
    level = re.search(r"DUMP OF SERVICE battery:\n.*?  level: (\d+)", text, re.S)
    assert level is not None and 0 <= int(level.group(1)) <= 100
    # Mobly removes the phone's copy after pulling it.
    assert entry.removesuffix(".txt") + ".zip" not in ad.adb.shell("ls /bugreports/").decode()


def test_debian_adb_bugreport_follows_bugreportz_progress(
    devices: dict[str, Any], module_adb_server: AdbServer, tmp_path: Path
) -> None:
    phone = devices["unrooted-phone"]
    env = {"ANDROID_ADB_SERVER_PORT": str(module_adb_server.port), "PATH": "/usr/bin:/bin"}
    argv = ["adb", "-s", phone.adb_serial, "bugreport", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    (zip_path,) = tmp_path.glob("bugreport-*.zip")
    with zipfile.ZipFile(zip_path) as archive:
        assert "== dumpstate: " in archive.read(archive.read("main_entry.txt").decode()).decode()
    # bugreportz -v answers on stderr, where adb's client reads it
    version = subprocess.run(
        ["adb", "-s", phone.adb_serial, "shell", "bugreportz", "-v"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert (version.returncode, version.stdout, version.stderr.strip()) == (0, "", "1.2")


def test_reboot_brings_the_rooted_phone_and_its_services_back(devices: dict[str, Any]) -> None:
    ad = devices["rooted"]
    ad.adb.shell("echo kept > /data/local/tmp/mobly-reboot")
    ad.reboot()  # adb reboot, wait for boot completion, root again, restart the logcat service
    assert ad.adb.shell("getprop sys.boot_completed").strip() == b"1"
    assert ad.adb.shell("id -u").strip() == b"0"
    assert ad.services.logcat.is_alive
    assert ad.adb.shell("cat /data/local/tmp/mobly-reboot").strip() == b"kept"
