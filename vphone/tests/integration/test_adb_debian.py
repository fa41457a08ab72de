"""Debian's adb (29.0.6) against virtual phones: connect, devices -l, shell, push/pull, reboot.

The tests of this module share two phones and one private adb server (module fixtures); each
test uses its own paths."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from vphone.testing.phones import AdbServer, PhoneSet

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def adb_server(module_adb_server: AdbServer) -> AdbServer:
    return module_adb_server


@pytest.fixture(scope="module")
def two_phones(module_virtual_phones) -> PhoneSet:
    return module_virtual_phones(count=2)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_devices_lists_the_model_and_shell_keeps_exit_code_and_stderr(
    adb_server: AdbServer, two_phones: PhoneSet
) -> None:
    phone = two_phones[0]
    listing = adb_server.adb("devices", "-l").stdout
    line = next(row for row in listing.splitlines() if row.startswith(phone.adb_serial))
    assert " device " in line
    model = adb_server.adb("-s", phone.adb_serial, "shell", "getprop", "ro.product.model").stdout.strip()
    assert model and "model:" + "".join(c if c.isalnum() else "_" for c in model) in line

    result = adb_server.adb("-s", phone.adb_serial, "shell", "echo out; echo err >&2; exit 7")
    assert result.returncode == 7
    assert result.stdout == "out\n"
    assert "err\n" in result.stderr and "out" not in result.stderr

    serial = adb_server.adb("-s", phone.adb_serial, "shell", "getprop", "ro.serialno").stdout.strip()
    assert serial == phone.serial

    # stdin travels as shell-v2 packets, then close-stdin ends `wc`'s input
    lines = "".join(f"{i}\n" for i in range(50_000))
    counted = adb_server.adb("-s", phone.adb_serial, "shell", "wc -l", input=lines)
    assert counted.stdout.strip() == "50000"
    killed = adb_server.adb("-s", phone.adb_serial, "shell", "kill -9 $$")
    assert killed.returncode == 128 + 9  # exit packet 0x80|signal


def test_shell_v1_merges_output_and_exec_out_is_raw(adb_server: AdbServer, two_phones: PhoneSet) -> None:
    phone = two_phones[0]
    v1 = adb_server.adb("-s", phone.adb_serial, "shell", "-x", "echo a; echo b >&2; exit 3")
    assert v1.stdout.split() == ["a", "b"]
    assert v1.returncode == 0  # shell v1 has no exit code
    raw = adb_server.adb("-s", phone.adb_serial, "exec-out", "printf 'x\\ny\\0z'")
    assert raw.stdout == "x\ny\0z"
    pty = adb_server.adb("-s", phone.adb_serial, "shell", "-tt", "echo one; echo two >&2; exit 3")
    assert (pty.stdout, pty.stderr) == ("one\ntwo\n", "")  # a PTY merges stderr (\r\n read as text)
    assert pty.returncode == 3


def test_push_then_pull_20mb_keeps_the_bytes(
    adb_server: AdbServer, two_phones: PhoneSet, tmp_path: Path
) -> None:
    phone = two_phones[0]
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(20 * 1024 * 1024))
    source.chmod(0o644)
    pushed = adb_server.adb("-s", phone.adb_serial, "push", str(source), "/data/local/tmp/")
    assert pushed.returncode == 0, pushed.stderr
    back = tmp_path / "back.bin"
    pulled = adb_server.adb("-s", phone.adb_serial, "pull", "/data/local/tmp/blob.bin", str(back))
    assert pulled.returncode == 0, pulled.stderr
    assert sha256(back) == sha256(source)
    # push keeps the host file's mode, as adbd does (issue #10: 0644 stays 0644)
    mode = adb_server.adb(
        "-s", phone.adb_serial, "shell", "stat -c %a:%U:%G /data/local/tmp/blob.bin"
    ).stdout.strip()
    assert mode == "644:shell:shell"


def test_push_a_directory_and_list_it(adb_server: AdbServer, two_phones: PhoneSet, tmp_path: Path) -> None:
    phone = two_phones[0]
    tree = tmp_path / "tree"
    (tree / "sub" / "deeper").mkdir(parents=True)
    (tree / "a.txt").write_text("alpha\n")
    (tree / "sub" / "deeper" / "b.txt").write_text("beta\n")
    result = adb_server.adb("-s", phone.adb_serial, "push", str(tree), "/data/local/tmp/")
    assert result.returncode == 0, result.stderr
    found = adb_server.adb("-s", phone.adb_serial, "shell", "cat /data/local/tmp/tree/sub/deeper/b.txt")
    assert found.stdout == "beta\n"
    listing = adb_server.adb("-s", phone.adb_serial, "ls", "/data/local/tmp/tree").stdout
    names = {line.split()[-1] for line in listing.splitlines()}
    assert {"a.txt", "sub", ".", ".."} <= names
    missing = adb_server.adb("-s", phone.adb_serial, "pull", "/data/local/tmp/nope", str(tmp_path / "x"))
    assert missing.returncode != 0 and "No such file or directory" in missing.stdout + missing.stderr


def _wait_state(adb_server: AdbServer, adb_serial: str, wanted: set[str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    state = "?"
    while time.monotonic() < deadline:
        rows = dict(
            line.split()[:2] for line in adb_server.adb("devices").stdout.splitlines()[1:] if line.strip()
        )
        state = rows.get(adb_serial, "missing")
        if state in wanted:
            return state
        time.sleep(0.1)
    return state


def test_reboot_goes_offline_then_comes_back(adb_server: AdbServer, two_phones: PhoneSet) -> None:
    phone = two_phones[0]
    adb_server.adb("-s", phone.adb_serial, "shell", "echo before > /data/local/tmp/marker")
    result = adb_server.adb("-s", phone.adb_serial, "reboot")
    assert result.returncode == 0
    assert _wait_state(adb_server, phone.adb_serial, {"offline", "missing"}, 5) in {"offline", "missing"}
    assert _wait_state(adb_server, phone.adb_serial, {"device"}, 30) == "device"
    after = adb_server.adb("-s", phone.adb_serial, "shell", "cat /data/local/tmp/marker")
    assert after.stdout == "before\n"  # /data survives a reboot

    # `reboot` run inside the phone drops adb the same way
    adb_server.adb("-s", phone.adb_serial, "shell", "reboot")
    assert _wait_state(adb_server, phone.adb_serial, {"offline", "missing"}, 5) in {"offline", "missing"}
    assert _wait_state(adb_server, phone.adb_serial, {"device"}, 30) == "device"


def test_two_phones_are_isolated(adb_server: AdbServer, two_phones: PhoneSet) -> None:
    first, second = two_phones
    assert first.serial != second.serial
    adb_server.adb("-s", first.adb_serial, "shell", "echo mine > /data/local/tmp/only-here")
    seen = adb_server.adb("-s", second.adb_serial, "shell", "cat /data/local/tmp/only-here")
    assert seen.returncode != 0
    assert adb_server.adb("-s", first.adb_serial, "shell", "cat /data/local/tmp/only-here").stdout == "mine\n"
