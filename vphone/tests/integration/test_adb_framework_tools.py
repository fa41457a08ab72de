"""The framework commands automation stacks send (issue #28.4): content, am, pm, wm, input,
dumpsys services, as the phone's own shell commands print them. Each expected text is quoted from
the AOSP source that prints it; checked through adb (adbutils) on an unrooted Android 14 phone
and a rooted Android 12 one.
"""

from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path

import adbutils
import pytest
from vphone.testing.apks import build_apk, missing_tools, rewrite
from vphone.testing.phones import PhoneFactory, PhoneSet

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]

PROFILES = ("adreno-sd8gen2", "adreno-sd865")  # Android 14 unrooted, Android 12 rooted


@pytest.fixture(scope="module")
def phones(module_virtual_phones: PhoneFactory) -> PhoneSet:
    return module_virtual_phones(count=2, profiles=list(PROFILES))


@pytest.fixture(scope="module")
def devices(phones: PhoneSet) -> dict[str, adbutils.AdbDevice]:
    client = phones.client()
    return {phone.profile: phone.device(client) for phone in phones}


@pytest.fixture
def phone(devices: dict[str, adbutils.AdbDevice]) -> adbutils.AdbDevice:
    return devices["adreno-sd8gen2"]


def run(device: adbutils.AdbDevice, command: str) -> tuple[int, str, str]:
    result = device.shell2(command, v2=True, rstrip=False)
    return result.returncode, result.stdout, result.stderr


# -- content (frameworks/base/cmds/content/src/com/android/commands/content/Content.java) ---------


def test_content_query_of_one_setting_as_devlib_sends_it(phone: adbutils.AdbDevice) -> None:
    """Content.QueryCommand prints each cursor row as
    `builder.append("Row: ").append(rowIndex).append(" ")`, then `name=value` per column joined by
    ", "; SettingsProvider.Arguments takes the setting from `name='X'`. ANDROID_ID is 64 bits in
    hex (Settings.Secure.ANDROID_ID; SettingsProvider makes it at first boot)."""
    command = "content query --uri content://settings/secure --projection value --where \"name='android_id'\""
    code, out, err = run(phone, command)
    assert (code, err) == (0, "")
    assert re.fullmatch(r"Row: 0 value=[0-9a-f]{16}\n", out), out
    assert out.split("=")[1].strip() == phone.shell("settings get secure android_id")
    # A uri of two segments names the setting itself (Arguments, case 2); getType says item/dir.
    assert (
        phone.shell("content query --uri content://settings/secure/android_id --projection value")
        == out.strip()
    )
    assert (
        phone.shell("content gettype --uri content://settings/secure")
        == "Result: vnd.android.cursor.dir/secure"
    )


def test_content_insert_update_delete_share_the_settings_store(phone: adbutils.AdbDevice) -> None:
    """insert binds COLUMN:TYPE:VALUE (Content.Parser.parseBindValue); SettingsProvider.update
    returns 0 unless a `name` binding is given (`values.getAsString(NAME)`, then isKeyValid) and
    writes the setting the where clause names; a missing row prints `No result found.`."""
    uri = "--uri content://settings/system"
    where = "--where \"name='farm_probe'\""
    assert run(phone, f"content insert {uri} --bind name:s:farm_probe --bind value:i:7") == (0, "", "")
    assert phone.shell("settings get system farm_probe") == "7"
    _code, out, _err = run(phone, f"content query {uri} --projection name:value {where}")
    assert out == "Row: 0 name=farm_probe, value=7\n"
    run(phone, f"content update {uri} --bind value:s:8 {where}")  # no name binding: no change
    assert phone.shell("settings get system farm_probe") == "7"
    run(phone, f"content update {uri} --bind name:s:farm_probe --bind value:s:8 {where}")
    assert phone.shell("settings get system farm_probe") == "8"
    assert run(phone, f"content delete {uri} {where}") == (0, "", "")
    assert run(phone, f"content query {uri} {where}") == (0, "No result found.\n", "")
    assert phone.shell("settings get system farm_probe") == "null"


def test_content_query_of_a_whole_table_lists_every_column(phone: adbutils.AdbDevice) -> None:
    """Without --projection the columns are SettingsProvider.ALL_COLUMNS (_id, name, value); the
    rows are those `settings list` shows (SettingsService prints `name=value`)."""
    _code, out, _err = run(phone, "content query --uri content://settings/global")
    rows = out.splitlines()
    listed = phone.shell("settings list global").splitlines()
    assert len(rows) == len(listed) > 0
    for index, row in enumerate(rows):
        match = re.fullmatch(rf"Row: {index} _id=\d+, name=([^,]+), value=(.*)", row)
        assert match, row
        assert f"{match[1]}={match[2]}" in listed


def test_content_errors_as_the_tool_reports_them(phone: adbutils.AdbDevice) -> None:
    """Content.main returns normally, so the status is 0 whatever happened. A parse error prints
    USAGE then `[ERROR] ` + the message on stdout; a provider exception goes to stderr after
    `Error while accessing provider:` + the authority (Command.execute)."""
    code, out, err = run(phone, "content query --projection value")
    assert (code, err) == (0, "")
    assert out.startswith("usage: adb shell content [subcommand] [options]\n")
    assert out.endswith("\n[ERROR] Content provider URI not specified. Did you specify --uri argument?\n")
    code, out, err = run(phone, "content query --uri content://settings/secure --projection bogus")
    assert (code, out) == (0, "")
    assert err == (
        "Error while accessing provider:settings\njava.lang.IllegalArgumentException: Invalid column: bogus\n"
    )
    code, out, err = run(phone, "content query --uri content://settings/secure --where 'value=1'")
    assert (code, out) == (0, "")
    provider = "Error while accessing provider:"
    assert err.startswith(f"{provider}settings\njava.lang.IllegalArgumentException: Supported SQL:\n")
    code, _out, err = run(phone, "content query --uri content://nosuch/x")
    assert err == f"{provider}nosuch\njava.lang.IllegalStateException: Could not find provider: nosuch\n"
    assert run(phone, "content insert --uri content://settings/secure")[1].endswith(
        "[ERROR] Bindings not specified. Did you specify --bind argument(s)?\n"
    )


# -- logcat (system/logging/liblog/logprint.cpp android_log_formatLogLine, logcat/logcat.cpp) -----


def test_logcat_formats_pad_the_tag_as_liblog_does(phone: adbutils.AdbDevice) -> None:
    """logprint.cpp: brief "%c/%-8.*s(%s%5d): ", time "%s %c/%-8.*s(%s%5d): ", tag "%c/%-8.*s: ",
    threadtime "%s %s%5d %5d %c %-8.*s: ", process "%c(%s%5d) " + message + "  (%.*s)"; `epoch`
    prints the stamp as "%19lld" seconds, `usec` ".%06ld", `year` "%Y-%m-%d %H:%M:%S"."""
    run(phone, "logcat -c && log -t Fmt -p w short tag")
    dump = {
        fmt: phone.shell(f"logcat -d -b main -v {fmt} -s Fmt")
        for fmt in ("brief", "tag", "time", "threadtime", "process", "raw", "epoch", "time,usec,year")
    }
    pid = r" *\d+"
    assert re.fullmatch(rf"W/Fmt     \({pid}\): short tag", dump["brief"]), dump["brief"]
    assert dump["tag"] == "W/Fmt     : short tag"
    stamp = r"\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}"
    assert re.fullmatch(rf"{stamp} W/Fmt     \({pid}\): short tag", dump["time"]), dump["time"]
    assert re.fullmatch(rf"{stamp} {pid} {pid} W Fmt     : short tag", dump["threadtime"])
    assert re.fullmatch(rf"W\({pid}\) short tag  \(Fmt\)", dump["process"])
    assert dump["raw"] == "short tag"
    assert re.fullmatch(rf" *\d{{10}}\.\d{{3}} {pid} {pid} W Fmt     : short tag", dump["epoch"])
    assert len(dump["epoch"].split(".")[0]) == 19  # "%19lld"
    year = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}"
    assert re.fullmatch(rf"{year} W/Fmt     \({pid}\): short tag", dump["time,usec,year"])
    code, _out, err = run(phone, "logcat -d -v nosuchformat")
    assert code == 1 and err.startswith("logcat: unknown format nosuchformat\n")


def test_logcat_marks_each_buffer_and_takes_a_time_for_T(phone: adbutils.AdbDevice) -> None:
    """logcat.cpp maybePrintStart: with more than one buffer, the first entry printed from each
    is preceded by "--------- beginning of NAME"; one buffer prints none. -T/-t take a count or a
    time ('MM-DD hh:mm:ss.mmm' or 'sssss.mmm') and print the entries since then."""
    run(phone, "logcat -c && log -t Marks first")
    both = phone.shell("logcat -d -b main,system -v brief -s Marks").splitlines()
    assert both[0] == "--------- beginning of main" and both[1].startswith("I/Marks")
    assert not phone.shell("logcat -d -b main -v brief -s Marks").startswith("---------")
    epoch = phone.shell("logcat -d -b main -v epoch -s Marks").split()[0]
    later = f"{int(epoch.split('.')[0]) + 1}.000"
    assert phone.shell(f"logcat -d -b main -v raw -T {epoch} -s Marks") == "first"
    assert phone.shell(f"logcat -d -b main -v raw -T {later} -s Marks") == ""
    assert phone.shell("logcat -d -b main -v raw -T 1 -s Marks") == "first"


# -- pm (services/core/java/com/android/server/pm/PackageManagerShellCommand.java) ----------------


def test_pm_list_packages_flags_as_run_list_packages_prints_them(phone: adbutils.AdbDevice) -> None:
    """runListPackages: pw.print("package:"); -f: sourceDir + "="; then the name; -U: " uid:" +
    uid. -s keeps system packages, -3 third-party ones; an unknown option prints
    "Error: Unknown option: -x" and fails (-1, status 255)."""
    everything = phone.shell("pm list packages").splitlines()
    assert "package:com.android.shell" in everything
    with_paths = phone.shell("pm list packages -f com.android.shell").splitlines()
    assert with_paths == ["package:/system/priv-app/Shell/Shell.apk=com.android.shell"]
    assert phone.shell("pm list packages -U com.android.shell") == "package:com.android.shell uid:2000"
    system = phone.shell("pm list packages -s").splitlines()
    assert set(system) <= set(everything) and "package:android" in system
    assert not set(phone.shell("pm list packages -3").splitlines()) & set(system)
    assert phone.shell("pm path com.android.shell") == "package:/system/priv-app/Shell/Shell.apk"
    assert run(phone, "pm path org.nosuch.app") == (1, "", "")
    assert run(phone, "pm list packages -z") == (255, "Error: Unknown option: -z\n", "")
    assert "feature:android.hardware.touchscreen\n" in run(phone, "pm list features")[1]


def test_pm_grant_clear_and_dump_errors(devices: dict[str, adbutils.AdbDevice]) -> None:
    """An exception in a shell command: "\\nException occurred while executing 'grant':" and the
    exception on stderr, status 255 (BasicShellCommandHandler.exec); runClear: "Success", else
    "Failed" on stderr and status 1; dumpsys package prints "userId=" before Android 14 and
    "appId=" from it (services/core/java/com/android/server/pm/Settings.java)."""
    phone = devices["adreno-sd8gen2"]
    code, out, err = run(phone, "pm grant org.nosuch.app android.permission.CAMERA")
    assert (code, out) == (255, "")
    assert err == (
        "\nException occurred while executing 'grant':\n"
        "java.lang.IllegalArgumentException: Unknown package: org.nosuch.app\n"
    )
    # A permission no package defines is refused before the request is looked at.
    code, _out, err = run(phone, "pm grant com.android.shell android.permission.NOT_A_RUNTIME_ONE")
    unknown = "java.lang.IllegalArgumentException: Unknown permission: android.permission.NOT_A_RUNTIME_ONE"
    assert code == 255 and unknown in err
    assert run(phone, "pm clear org.nosuch.app") == (1, "", "Failed\n")
    assert "    appId=2000\n" in phone.shell("dumpsys package com.android.shell") + "\n"
    assert "    userId=2000" in devices["adreno-sd865"].shell("dumpsys package com.android.shell")


@pytest.mark.parametrize("profile", PROFILES)
def test_adbutils_app_info_of_a_platform_package(
    devices: dict[str, adbutils.AdbDevice], profile: str
) -> None:
    """adbutils' app_info reads `pm path` and dumpsys package's versionName=/versionCode=. A
    platform app's are the build's (Soong aapt2 link: --version-code PlatformSdkVersion,
    --version-name AppsDefaultVersionName, the release)."""
    device = devices[profile]
    info = device.app_info("com.android.settings")
    assert info is not None
    assert info.version_code == int(device.getprop("ro.build.version.sdk"))
    assert info.version_name == device.getprop("ro.build.version.release")
    assert info.path == device.shell("pm path com.android.settings").removeprefix("package:")
    assert device.app_info("org.nosuch.app") is None


# -- am (services/core/java/com/android/server/am/ActivityManagerShellCommand.java) ---------------


def test_am_start_of_a_missing_class_and_instrument_of_a_missing_runner(phone: adbutils.AdbDevice) -> None:
    """runStartActivity prints "Starting: " + intent, then for START_CLASS_NOT_FOUND
    NO_CLASS_ERROR_CODE ("Error type 3") and "Error: Activity class {pkg/cls} does not exist." on
    stderr (stdout with -W), and returns 0. am instrument: the watcher's
    "INSTRUMENTATION_STATUS: Error=Unable to find instrumentation info for: ComponentInfo{..}",
    then an AndroidException "INSTRUMENTATION_FAILED: pkg/cls" (status 255)."""
    code, out, err = run(phone, "am start -n org.nosuch.app/.Main")
    assert (code, out) == (0, "Starting: Intent { cmp=org.nosuch.app/.Main }\n")
    assert err == "Error type 3\nError: Activity class {org.nosuch.app/org.nosuch.app.Main} does not exist.\n"
    code, out, err = run(phone, "am instrument -w org.nosuch.test/androidx.test.runner.AndroidJUnitRunner")
    assert code == 255
    assert out == (
        "INSTRUMENTATION_STATUS: Error=Unable to find instrumentation info for: "
        "ComponentInfo{org.nosuch.test/androidx.test.runner.AndroidJUnitRunner}\n"
        "INSTRUMENTATION_STATUS_CODE: -1\n"
    )
    assert err.endswith(
        "android.util.AndroidException: INSTRUMENTATION_FAILED: "
        "org.nosuch.test/androidx.test.runner.AndroidJUnitRunner\n"
    )
    code, out, _err = run(phone, "am broadcast -a org.farm.PING")
    assert (code, out) == (
        0,
        "Broadcasting: Intent { act=org.farm.PING flg=0x400000 }\nBroadcast completed: result=0\n",
    )
    assert run(phone, "cmd activity force-stop org.nosuch.app") == (0, "", "")


# -- wm and dumpsys window (services/core/java/com/android/server/wm/DisplayContent.java) ---------


def test_wm_size_override_shows_in_dumpsys_window_displays(phone: adbutils.AdbDevice) -> None:
    """WindowManagerShellCommand: "Physical size: WxH", "Override size: WxH" once overridden;
    DisplayContent.dump: "init=WxH DENSITYdpi", " base=..." when overridden, " cur=WxH" (what
    devlib's screen_resolution reads with cur=(\\d+)x(\\d+))."""
    physical = phone.shell("wm size")
    assert re.fullmatch(r"Physical size: \d+x\d+", physical)
    size = physical.split(": ")[1]
    assert f"init={size} " in phone.shell("dumpsys window displays")
    try:
        assert run(phone, "wm size 720x1600") == (0, "", "")
        assert phone.shell("wm size") == f"Physical size: {size}\nOverride size: 720x1600"
        shown = phone.shell("dumpsys window displays")
        assert re.search(rf"init={size} \d+dpi base=720x1600 \d+dpi cur=720x1600 app=720x\d+", shown), shown
    finally:
        run(phone, "cmd window size reset")
    assert "cur=" + size in phone.shell("dumpsys window displays")
    assert re.fullmatch(r"Physical density: \d+", phone.shell("wm density"))


# -- input (services/core/java/com/android/server/input/InputShellCommand.java) -------------------


def test_input_keyevent_takes_names_without_the_prefix_and_unknown_ones(phone: adbutils.AdbDevice) -> None:
    """runKeyEvent sends KeyEvent.keyCodeFromString(arg) for each argument, which takes a number
    or a name with or without "KEYCODE_" and gives KEYCODE_UNKNOWN for anything else, injected
    without an error (only keycombination checks for 0): adbutils sends `input keyevent VOLUME_UP`."""
    for command in (
        "input keyevent VOLUME_UP",
        "input keyevent KEYCODE_VOLUME_DOWN 24",
        "input keyevent NOSUCHKEY",
    ):
        assert run(phone, command) == (0, "", ""), command
    assert "keyevent VOLUME_UP" in phone.shell("logcat -d -b main -v raw -s InputDispatcher")
    assert run(phone, "cmd input tap 5 6") == (0, "", "")  # `input` is `cmd input` from Android 11
    assert "  input\n" in phone.shell("cmd -l") + "\n"


# -- pm install (PackageManagerShellCommand.runInstall; the parse PackageManager does first) -------


@pytest.mark.skipif(bool(missing_tools()), reason="needs aapt, keytool and jarsigner")
def test_pm_install_parses_the_apk_and_checks_its_signature(
    phone: adbutils.AdbDevice, tmp_path: Path
) -> None:
    """runInstall prints "Failure [" + the session's message + "]": a file that is no APK is
    INSTALL_PARSE_FAILED_NOT_APK; an APK without a signature, with signature files that hold
    nothing, or tampered after signing is INSTALL_PARSE_FAILED_NO_CERTIFICATES (ApkSignatureVerifier
    and StrictJarVerifier); a jarsigner-signed APK installs under its manifest's package name."""
    code, out, _err = run(
        phone, "cp /system/build.prop /data/local/tmp/x.apk && pm install /data/local/tmp/x.apk"
    )
    assert (code, out.split(":")[0]) == (1, "Failure [INSTALL_PARSE_FAILED_NOT_APK")
    signed = build_apk(tmp_path, "org.farm.probe", ("android.permission.CAMERA",))
    unsigned = build_apk(tmp_path / "u", "org.farm.probe", signed=False)
    fake = Path(shutil.copy(unsigned, tmp_path / "fake.apk"))
    with zipfile.ZipFile(fake, "a") as archive:  # what the old check took as signed
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        archive.writestr("META-INF/CERT.SF", "Signature-Version: 1.0\n")
        archive.writestr("META-INF/CERT.RSA", b"\x30\x82")
    tampered = rewrite(signed, tmp_path / "tampered.apk", "AndroidManifest.xml")
    for bad, reason in ((unsigned, "null array"), (fake, "signature block"), (tampered, "invalid digest")):
        phone.sync.push(str(bad), "/data/local/tmp/bad.apk")
        code, out, _err = run(phone, "pm install /data/local/tmp/bad.apk")
        assert code == 1 and out.startswith(
            "Failure [INSTALL_PARSE_FAILED_NO_CERTIFICATES: Failed collecting certificates"
        ), (bad.name, out)
        assert reason in out, (bad.name, out)
    assert "package:org.farm.probe" not in phone.shell("pm list packages -3")
    phone.sync.push(str(signed), "/data/local/tmp/any-name.apk")
    assert run(phone, "pm install -r -t /data/local/tmp/any-name.apk") == (0, "Success\n", "")
    try:
        assert phone.shell("pm list packages -3") == "package:org.farm.probe"
        assert phone.shell("pm path org.farm.probe") == "package:/data/app/org.farm.probe/base.apk"
    finally:
        assert run(phone, "pm uninstall org.farm.probe") == (0, "Success\n", "")


@pytest.mark.skipif(bool(missing_tools()), reason="needs aapt, keytool and jarsigner")
def test_pm_grant_takes_only_runtime_permissions_the_manifest_requests(
    phone: adbutils.AdbDevice, tmp_path: Path
) -> None:
    """PermissionManagerServiceImpl.grantRuntimePermissionInternal's checks, in order, each an
    exception that BasicShellCommandHandler prints on stderr with status 255."""
    apk = build_apk(tmp_path, "org.farm.perms", ("android.permission.CAMERA", "android.permission.INTERNET"))
    phone.sync.push(str(apk), "/data/local/tmp/perms.apk")
    assert run(phone, "pm install /data/local/tmp/perms.apk") == (0, "Success\n", "")
    sdk = int(phone.shell("getprop ro.build.version.sdk"))
    by = "package org.farm.perms" if sdk >= 34 else "org.farm.perms"
    try:
        assert run(phone, "pm grant org.farm.perms android.permission.CAMERA") == (0, "", "")
        for permission, error in (
            (
                "android.permission.RECORD_AUDIO",
                "java.lang.SecurityException: Package org.farm.perms "
                "has not requested permission android.permission.RECORD_AUDIO",
            ),
            (
                "android.permission.INTERNET",
                "java.lang.SecurityException: Permission "
                f"android.permission.INTERNET requested by {by} is not a changeable permission type",
            ),
            ("org.farm.NO_SUCH", "java.lang.IllegalArgumentException: Unknown permission: org.farm.NO_SUCH"),
        ):
            code, out, err = run(phone, f"pm grant org.farm.perms {permission}")
            assert (code, out) == (255, ""), permission
            assert err == f"\nException occurred while executing 'grant':\n{error}\n", permission
    finally:
        assert run(phone, "pm uninstall org.farm.perms") == (0, "Success\n", "")


def test_dumpsys_display_viewport_as_adbutils_reads_it(devices: dict[str, adbutils.AdbDevice]) -> None:
    """DisplayManagerService dumps "  mViewports=" + its list; DisplayViewport.toString is
    "DisplayViewport{type=..., valid=..., [isActive=..., Android 12+] displayId=..., uniqueId='...',
    physicalPort=..., orientation=..., logicalFrame=..., physicalFrame=..., deviceWidth=...,
    deviceHeight=...}". adbutils' rotation() takes the first "orientation=N"."""
    for profile, device in devices.items():
        shown = device.shell("dumpsys display")
        size = device.shell("wm size").split(": ")[1]
        width, height = size.split("x")
        viewport = re.search(r"mViewports=\[DisplayViewport\{(.*)\}\]", shown)
        assert viewport, shown
        fields = viewport[1]
        assert fields.startswith("type=INTERNAL, valid=true, ")
        assert ("isActive=true" in fields) == (int(device.getprop("ro.build.version.sdk")) >= 31), profile
        assert fields.endswith(f"deviceWidth={width}, deviceHeight={height}")
        assert f"physicalFrame=Rect(0, 0 - {width}, {height})" in fields
        assert device.rotation() == 0
