"""A virtual phone's userland and file semantics as Android's (issue #10.1, #10.2, bad input):
mksh + toybox and no GNU tools, shell:shell ownership, the modes a push sent, logcat as test
frameworks drive it, tools that exist by release, and the usage text and exit codes Android's
tools give for unknown options and commands. Checked through adb (adbutils), as a client sees it.
"""

from __future__ import annotations

import hashlib
import re
import shutil

import adbutils
import pytest
from vphone.layout import HOST_MKSH
from vphone.testing.phones import PhoneFactory, PhoneSet
from vphone.testing.waiting import eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]

# An Android 14 unrooted phone, an Android 12 rooted one, an Android 8.1 one.
PROFILES = ("adreno-sd8gen2", "adreno-sd865", "adreno-nexus6p")
THREADTIME = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +\d+ +\d+ I FarmUserland: hello there$")


@pytest.fixture(scope="module")
def phones(module_virtual_phones: PhoneFactory) -> PhoneSet:
    return module_virtual_phones(count=3, profiles=list(PROFILES))


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


# -- userland -----------------------------------------------------------------------------------


def test_no_gnu_userland_sh_is_mksh_and_the_abi_agrees(phone: adbutils.AdbDevice) -> None:
    assert phone.shell("ls --version").startswith("toybox ")
    assert phone.shell("readlink /proc/$$/exe") == "/system/bin/sh"
    with open(HOST_MKSH, "rb") as f:
        mksh_sha = hashlib.sha256(f.read()).hexdigest()
    assert phone.shell("sha256sum /system/bin/sh").split()[0] == mksh_sha
    assert phone.shell("echo $KSH_VERSION").startswith("@(#)MIRBSD KSH")
    listing = phone.shell(
        'for d in $(echo "$PATH" | tr : " ") /system/bin /system/xbin /vendor/bin; do ls "$d"; done'
    ).split()
    assert "getprop" in listing and "toybox" in listing and "awk" in listing
    assert not {"bash", "dash", "busybox", "coreutils", "gawk", "mawk"} & set(listing)
    assert phone.shell("uname -m") == phone.getprop("ro.product.cpu.abi") == "x86_64"
    # Host executables are not reachable under any path.
    assert run(phone, "ls /usr/bin /bin/bash")[0] != 0


def test_files_shell_makes_are_shell_shell_and_pushes_keep_their_mode(phone: adbutils.AdbDevice) -> None:
    out = phone.shell(
        "cd /data/local/tmp && rm -rf own && mkdir own && touch own/f && echo x > /sdcard/own.txt && "
        "stat -c '%U:%G %a' own own/f /sdcard/own.txt"
    )
    assert out.splitlines()[0:2] == ["shell:shell 755", "shell:shell 644"]  # umask 022, as adbd's shell
    assert out.splitlines()[2].startswith("shell:")
    for mode in (0o644, 0o755):
        path = f"/data/local/tmp/mode{mode:o}"
        phone.sync.push(b"#!/system/bin/sh\necho ran\n", path, mode=mode)
        assert phone.shell(f"stat -c '%U:%G %a' {path}") == f"shell:shell {mode:o}"
    assert phone.shell("/data/local/tmp/mode755") == "ran"
    assert run(phone, "/data/local/tmp/mode644")[0] == 126


def test_root_makes_root_files_and_shell_cannot_change_them(devices: dict[str, adbutils.AdbDevice]) -> None:
    rooted = devices["adreno-sd865"]
    out = rooted.shell(
        "rm -f /data/local/tmp/r; su -c 'touch /data/local/tmp/r'; stat -c %U:%G /data/local/tmp/r"
    )
    assert out == "root:root"
    code, _out, err = run(rooted, "chmod 666 /data/local/tmp/r")
    assert code != 0 and "Operation not permitted" in err
    assert rooted.shell("su -c 'rm /data/local/tmp/r' && echo gone") == "gone"


def test_getenforce(phone: adbutils.AdbDevice) -> None:
    assert phone.shell("getenforce") == "Enforcing"


# -- logcat -------------------------------------------------------------------------------------


def test_logcat_clear_dump_threadtime_and_buffers(phone: adbutils.AdbDevice) -> None:
    assert run(phone, "log -t FarmUserland before && logcat -c")[0] == 0
    assert run(phone, "log -t FarmUserland hello there")[0] == 0
    dumped = phone.shell("logcat -d -v threadtime -b main").splitlines()
    assert [line for line in dumped if "FarmUserland" in line] == [
        next(line for line in dumped if THREADTIME.match(line))
    ]
    assert phone.shell("logcat -d -b system,crash -s FarmUserland") == ""  # not in those buffers
    code, _out, err = run(phone, "logcat -d -b nosuch")
    assert code == 1 and "unknown buffer nosuch" in err


def test_logcat_streams_until_its_stream_closes(phone: adbutils.AdbDevice) -> None:
    stream = phone.shell("logcat -v brief -s FarmStream:I", stream=True)
    try:
        stream.conn.settimeout(30)
        phone.shell("log -t FarmStream tick")
        seen = b""
        while b"I/FarmStream" not in seen:
            chunk = stream.conn.recv(4096)
            assert chunk, "logcat ended before the line came"
            seen += chunk
        assert b"tick" in seen
    finally:
        stream.close()
    # adbd hangs up the stream's process group: the follower ends with it.
    assert eventually(lambda: "logcat" not in phone.shell("ps -A -o ARGS"))


# -- tools by release -----------------------------------------------------------------------------


def test_cmd_power_from_android_11_and_thermalservice_from_android_10(
    devices: dict[str, adbutils.AdbDevice],
) -> None:
    new, old = devices["adreno-sd865"], devices["adreno-nexus6p"]  # Android 12, 8.1
    assert run(new, "cmd power set-fixed-performance-mode-enabled false")[0] == 0
    assert run(new, "dumpsys thermalservice")[1].startswith("IsStatusOverride:")
    code, _out, err = run(old, "cmd power set-fixed-performance-mode-enabled false")
    assert (code, err) == (20, "cmd: Can't find service: power\n")
    assert "thermalservice" not in old.shell("dumpsys -l")


# -- bad input, as Android's tools answer it ------------------------------------------------------

TOYBOX_CASES = [
    ("getprop -x", "getprop: Unknown option 'x' (see \"getprop --help\")\n"),
    ("getprop a b c", 'getprop: Max 2 arguments (see "getprop --help")\n'),
    ("setprop debug.x", 'setprop: Needs 2 arguments (see "setprop --help")\n'),
    ("getenforce now", 'getenforce: Max 0 arguments (see "getenforce --help")\n'),
    ("setenforce", 'setenforce: Needs 1 argument (see "setenforce --help")\n'),
    ("setenforce sometimes", "setenforce: Invalid state: sometimes\n"),
]


@pytest.mark.parametrize(("command", "stderr"), TOYBOX_CASES)
def test_toybox_tools_refuse_bad_options_and_counts(
    phone: adbutils.AdbDevice, command: str, stderr: str
) -> None:
    assert run(phone, command) == (1, "", stderr)


SHELL_COMMAND_CASES = ["am bogus", "pm bogus", "wm bogus", "cmd battery bogus", "cmd power bogus"]


@pytest.mark.parametrize("command", SHELL_COMMAND_CASES)
def test_framework_commands_answer_unknown_command_with_255(phone: adbutils.AdbDevice, command: str) -> None:
    assert run(phone, command) == (255, "Unknown command: bogus\n", "")


def test_help_texts_and_the_other_conventions(phone: adbutils.AdbDevice) -> None:
    code, out, _err = run(phone, "getprop --help")
    assert (code, out.splitlines()[0]) == (0, "usage: getprop [NAME [DEFAULT]]")
    code, out, _err = run(phone, "pm")
    assert code == 255 and out.startswith("Package manager (package) commands:")
    no_service = "cmd: No service specified; use -l to list all running services."
    assert run(phone, "cmd") == (20, "", f"{no_service} Use -w to start and wait for a service.\n")
    assert run(phone, "cmd nosuch") == (20, "", "cmd: Can't find service: nosuch\n")
    code, _out, err = run(phone, "dumpsys --bogus")
    assert code == 255 and err.startswith("dumpsys: unrecognized option '--bogus'")
    code, _out, err = run(phone, "logcat -x")
    assert code == 1 and err.startswith("logcat: invalid option -- 'x'\nUsage: logcat [options]")
    assert run(phone, "dumpsys battery bogus") == (0, "Unknown command: bogus\n", "")  # dumpsys' own status
    assert run(phone, "dumpsys nosuch") == (0, "", "Can't find service: nosuch\n")


def test_tool_input_never_breaks_the_phone(phone: adbutils.AdbDevice) -> None:
    for command in ("getprop ''", "setprop '' ''", "logcat -t notanumber", "settings get", "input"):
        _code, _out, err = run(phone, command)
        assert "Traceback" not in err and "farmtool:" not in err, (command, err)
    assert phone.shell("getprop ro.product.cpu.abi") == "x86_64"
