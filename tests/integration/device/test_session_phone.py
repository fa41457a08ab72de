"""DeviceSession against a real virtual phone through the real adb server."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from vphone.testing.old_adbd import OldAdbd

from farm.device.session import BIN_DIR, DeviceSession
from farm.errors import CommandTimeout

pytestmark = pytest.mark.integration


@pytest.fixture
def session(virtual_phones) -> DeviceSession:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1)
    phone = phones[0]
    return DeviceSession(phone.device(phones.client()), f"local/{phone.serial}", default_timeout_s=20)


def test_shell_exit_code_stdout_stderr_and_literal_arguments(session: DeviceSession) -> None:
    result = session.script('echo "out:$1"; echo "err:$2" >&2; exit 7', "a b", "$(id)")
    assert result.exit_code == 7
    assert result.stdout.strip() == "out:a b"
    assert result.stderr.strip() == "err:$(id)"
    assert session.shell(["echo", "x;y", "`z`"]).stdout.strip() == "x;y `z`"


def test_shell_deadline_raises_command_timeout(session: DeviceSession) -> None:
    started = time.monotonic()
    with pytest.raises(CommandTimeout):
        session.shell(["sleep", "10"], timeout_s=1.0)
    assert time.monotonic() - started < 5
    assert session.shell(["true"]).ok  # the phone still serves the next call


def test_push_cached_skips_same_content_and_is_executable(session: DeviceSession, tmp_path: Path) -> None:
    program = tmp_path / "hello"
    program.write_text("#!/system/bin/sh\necho hello-from-phone\n")
    path, pushed = session.push_cached(program)
    assert pushed and path.startswith(BIN_DIR + "/")
    assert session.shell(["test", "-x", path]).ok
    assert session.shell(["sh", path]).stdout.strip() == "hello-from-phone"
    again, pushed_again = session.push_cached(program)
    assert again == path and not pushed_again
    program.write_text("#!/system/bin/sh\necho changed\n")
    changed, pushed_changed = session.push_cached(program)
    assert pushed_changed and changed != path


def test_background_process_by_pid_survives_the_stream_and_is_killed_with_its_group(
    session: DeviceSession,
) -> None:
    session.shell(["mkdir", "-p", "/data/local/tmp/farm/t"], check=True)
    pid = session.start(
        ["sleep", "31.5"],
        workdir="/data/local/tmp/farm/t",
        stdout="o",
        stderr="e",
        exit_file="/data/local/tmp/farm/t/exit",
    )
    listing = 'for p in /proc/[0-9]*; do tr "\\000" " " < "$p/cmdline" 2>/dev/null; echo; done'
    time.sleep(0.5)
    assert session.is_running(pid)
    assert "sleep 31.5" in session.script(listing).stdout
    session.stop(pid, grace_s=2)
    deadline = time.monotonic() + 5
    while "sleep 31.5" in session.script(listing).stdout and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not session.is_running(pid)
    assert "sleep 31.5" not in session.script(listing).stdout  # the program, not only its wrapper


def test_background_exit_code_is_recorded(session: DeviceSession) -> None:
    session.shell(["mkdir", "-p", "/data/local/tmp/farm/u"], check=True)
    session.start(
        ["sh", "-c", "echo hi; exit 3"],
        workdir="/data/local/tmp/farm/u",
        stdout="o",
        stderr="e",
        exit_file="/data/local/tmp/farm/u/exit",
    )
    deadline = time.monotonic() + 10
    code = None
    while code is None and time.monotonic() < deadline:
        code = session.read_text("/data/local/tmp/farm/u/exit")
        time.sleep(0.1)
    assert code is not None and code.strip() == "3"
    assert (session.read_text("/data/local/tmp/farm/u/o") or "").strip() == "hi"


def test_shell_v1_fallback_exit_code_and_binary_bundle(virtual_phones) -> None:  # type: ignore[no-untyped-def]
    """Old phones without shell v2 (before Android 7): the phone says so in its features and refuses
    `shell,v2`, and the session falls back to v1 by itself: exit code from a marker, files over sync."""
    phones = virtual_phones(count=1)
    (phone,) = phones
    direct = DeviceSession(phone.device(phones.client()), f"local/{phone.serial}", default_timeout_s=20)
    binary = bytes(range(256)) * 4
    direct.shell(["mkdir", "-p", "/data/local/tmp/farm/v1"], check=True)
    direct.script('printf "$1" > /data/local/tmp/farm/v1/bin', "".join(f"\\{b:03o}" for b in binary))
    via_v2 = direct.pull_many(["/data/local/tmp/farm/v1/bin", "/data/local/tmp/farm/v1/missing"])
    with OldAdbd(phone.port) as old:
        adb = ["adb", "-P", str(phones.adb_port)]
        subprocess.run([*adb, "connect", old.serial], capture_output=True, timeout=60, check=True)
        try:
            deadline = time.monotonic() + 60
            while (
                f"{old.serial}\tdevice"
                not in subprocess.run(
                    [*adb, "devices"], capture_output=True, text=True, timeout=30, check=True
                ).stdout
            ):
                assert time.monotonic() < deadline, "the old-adbd phone never came online"
                time.sleep(0.2)
            session = DeviceSession(phones.client().device(old.serial), "local/old", default_timeout_s=20)
            result = session.script('echo "out:$1"; exit 5', "x y")
            via_v1 = session.pull_many(["/data/local/tmp/farm/v1/bin", "/data/local/tmp/farm/v1/missing"])
        finally:
            subprocess.run([*adb, "disconnect", old.serial], capture_output=True, timeout=60, check=False)
    assert old.refused and all(s.startswith("shell,v2") for s in old.refused)  # it asked, was refused
    assert any(s.startswith("shell:") for s in old.services)  # and spoke v1 instead
    assert result.exit_code == 5 and result.stdout.strip() == "out:x y"
    assert via_v2 == via_v1 == {"/data/local/tmp/farm/v1/bin": binary}
