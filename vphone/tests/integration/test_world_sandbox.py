"""The phone side without ADB: start worlds, run shell_argv for real, check the Android face."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from vphone.errors import EnvironmentProblem
from vphone.testing.waiting import eventually
from vphone.world import SandboxWorld, make_world
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]


@pytest.fixture
def phone(tmp_path: Path) -> Iterator[WorldThread]:
    world = make_world("adreno-sd8gen2", "VTEST0001", tmp_path / "p1")
    assert isinstance(world, SandboxWorld)
    with WorldThread(world) as w:
        yield w


def test_getprop_lists_identity_and_unique_serial(phone: WorldThread, tmp_path: Path) -> None:
    out = phone.sh("getprop ro.product.model; getprop ro.serialno; getprop ro.product.cpu.abi").stdout
    assert out.splitlines() == ["SM-S911B", "VTEST0001", "x86_64"]
    listing = phone.sh("getprop").stdout.splitlines()
    assert "[ro.board.platform]: [kalama]" in listing
    assert all(re.fullmatch(r"\[[^\]]+\]: \[.*\]", line) for line in listing)
    keys = [line[1 : line.index("]")] for line in listing]
    assert keys == sorted(keys)
    assert phone.world.banner_props()["ro.product.model"] == "SM-S911B"


def test_setprop_shell_may_set_debug_only_and_reboot_forgets(phone: WorldThread) -> None:
    res = phone.sh("setprop debug.farm.x 5 && setprop persist.farm.y 7 && getprop debug.farm.x")
    assert res.returncode == 0 and res.stdout == "5\n"
    denied = phone.sh("setprop ro.product.model Evil; echo rc=$?; setprop sys.x 1; echo rc=$?")
    assert denied.stdout.splitlines() == ["rc=1", "rc=1"]
    assert phone.sh("getprop ro.product.model").stdout == "SM-S911B\n"
    phone.call(phone.world.reboot())
    assert phone.sh("getprop debug.farm.x; getprop persist.farm.y").stdout == "\n7\n"


def test_shell_environment_and_android_layout(phone: WorldThread) -> None:
    script = (
        'id -u; echo "$HOME $TMPDIR $USER"; pwd; '
        "echo hi > /data/local/tmp/f && cat /data/local/tmp/f; "
        "printf '#!/system/bin/sh\\necho ran $?\\n' > /data/local/tmp/x.sh && chmod 755 /data/local/tmp/x.sh "
        "&& /data/local/tmp/x.sh; "
        "echo s > /sdcard/a.txt && cat /storage/emulated/0/a.txt; "
        "echo nope > /system/z 2>/dev/null || echo ro; "
        "v=$(echo abc | tr a-c x-z); echo $v; false || echo $?"
    )
    res = phone.sh(script)
    assert res.stdout.splitlines() == [
        "2000",
        "/ /data/local/tmp shell",
        "/",
        "hi",
        "ran 0",
        "s",
        "ro",
        "xyz",
        "1",
    ]
    assert phone.sh("ls /vendor/lib64/libOpenCL.so").returncode == 0


def test_commands_share_one_pid_namespace(phone: WorldThread) -> None:
    pid = phone.sh("sleep 60 >/dev/null 2>&1 & echo $!").stdout.strip()
    assert pid.isdigit() and int(pid) < 100  # a small number: the phone's own PID namespace
    listing = phone.sh("ps -A -o PID,NAME").stdout
    assert re.search(rf"^\s*{pid} sleep$", listing, re.M)
    assert "sleep" in phone.sh(f"cat /proc/{pid}/status").stdout
    assert phone.sh(f"kill {pid}").returncode == 0
    time.sleep(0.2)
    assert phone.sh(f"cat /proc/{pid}/status").returncode != 0


def test_killpg_of_shell_argv_reaches_shell_and_children(phone: WorldThread) -> None:
    proc = subprocess.Popen(
        phone.world.shell_argv("sleep 300 & sleep 301; echo never"),
        env=phone.world.shell_env(None),
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    # Whole lines: the shell's own line names both sleeps before either has started.
    assert _wait_for_ps(phone, lambda ps: {"sleep 300", "sleep 301"} <= _lines(ps))
    os.killpg(proc.pid, signal.SIGHUP)
    assert proc.wait(5) != 0
    assert proc.stdout is not None and proc.stdout.read() == b""
    assert _wait_for_ps(phone, lambda ps: not {"sleep 300", "sleep 301"} & _lines(ps))


def test_two_phones_are_isolated(phone: WorldThread, tmp_path: Path) -> None:
    other = make_world("mali-tensor", "VTEST0002", tmp_path / "p2")
    assert isinstance(other, SandboxWorld)
    with WorldThread(other) as w2:
        pid = phone.sh("sleep 60 >/dev/null 2>&1 & echo $!").stdout.strip()
        phone.sh("echo mine > /data/local/tmp/secret")
        assert w2.sh("cat /data/local/tmp/secret").returncode != 0
        assert "sleep" not in w2.sh("ps -A").stdout
        assert w2.sh(f"kill {pid}").returncode != 0 or "sleep" in phone.sh(f"cat /proc/{pid}/comm").stdout
        assert w2.sh("getprop ro.serialno").stdout == "VTEST0002\n"
        assert w2.sh("cat /sys/kernel/gpu/gpu_busy").stdout.endswith(" %\n")
        assert w2.sh("ls /sys/class/kgsl").returncode != 0


def test_mode_000_node_and_charging_node_are_root_only_for_shell(phone: WorldThread) -> None:
    res = phone.sh("cat /sys/class/kgsl/kgsl-3d0/devfreq/trans_stat")
    assert res.returncode != 0 and "Permission denied" in res.stderr
    res = phone.sh("echo 1 > /sys/class/power_supply/battery/input_suspend")
    assert res.returncode != 0
    assert phone.sh("su -c id").returncode == 127  # production build: no su
    with pytest.raises(PermissionError):
        phone.world.set_adbd_root(True)


def test_file_service_acts_as_shell_with_the_phones_errors(phone: WorldThread) -> None:
    files = phone.call(phone.world.open_files())
    try:
        fd = files.create("/data/local/tmp/new.bin", 0o644)
        os.write(fd, b"x")
        os.close(fd)
        assert phone.sh("cat /data/local/tmp/new.bin; stat -c '%U:%G %a' /data/local/tmp/new.bin").stdout == (
            "xshell:shell 644\n"
        )
        assert files.stat("/sdcard/", follow=True).is_dir
        cases = [
            (lambda: files.create("/system/bin/newtool", 0o755), errno.EROFS),
            (lambda: files.open_read("/data/nothing/here"), errno.ENOENT),
            (lambda: files.open_read("/sys/class/kgsl/kgsl-3d0/devfreq/trans_stat"), errno.EACCES),
            (lambda: files.create("/data/local/tmp/new.bin/x", 0o644), errno.ENOTDIR),
            (lambda: files.list_dir("/data"), errno.EACCES),
        ]
        for attempt, code in cases:
            with pytest.raises(OSError) as info:
                attempt()
            assert info.value.errno == code
    finally:
        files.close()


def test_dumpsys_battery_layout_and_unplug(phone: WorldThread) -> None:
    lines = phone.sh("dumpsys battery").stdout.splitlines()
    assert lines[0] == "Current Battery Service state:"
    keys = [line.split(":")[0].strip() for line in lines[1:]]
    assert keys[:3] == ["AC powered", "USB powered", "Wireless powered"]
    for key in ("status", "health", "present", "level", "scale", "voltage", "temperature", "technology"):
        assert key in keys
    level = int(phone.sh("cat /sys/class/power_supply/battery/capacity").stdout)
    assert f"  level: {level}" in lines
    out = phone.sh("dumpsys battery unplug && cmd battery set level 42 && dumpsys battery").stdout
    assert "(UPDATES STOPPED -- use 'reset' to restart)" in out
    assert "  USB powered: false" in out and "  level: 42" in out
    assert "UPDATES STOPPED" not in phone.sh("dumpsys battery reset; dumpsys battery").stdout


def test_meminfo_of_a_real_process(phone: WorldThread) -> None:
    pid = phone.sh("sleep 30 >/dev/null 2>&1 & echo $!").stdout.strip()
    out = phone.sh(f"dumpsys meminfo {pid}").stdout
    m = re.search(r"TOTAL PSS:\s+(\d+)\s+TOTAL RSS:\s+(\d+)", out)
    assert m and 0 < int(m.group(1)) <= int(m.group(2))
    total = phone.sh("head -1 /proc/meminfo").stdout
    assert total.split()[1] == str(8192 * 1024)


def test_cpuinfo_lists_the_profiles_cpus_as_sysfs_does(phone: WorldThread) -> None:
    # One shell round trip: /proc/cpuinfo's processors and clocks, and what sysfs says of them.
    out = phone.sh(
        "grep -c '^processor' /proc/cpuinfo; cat /sys/devices/system/cpu/possible"
        " /sys/devices/system/cpu/present /sys/devices/system/cpu/online;"
        " grep '^cpu MHz' /proc/cpuinfo | tr -d ' \\t' | cut -d: -f2;"
        " for c in /sys/devices/system/cpu/cpu[0-9]*; do cat $c/cpufreq/cpuinfo_max_freq; done"
    ).stdout.split()
    count = int(out[0])
    assert out[1:4] == [f"0-{count - 1}"] * 3
    mhz, max_khz = out[4 : 4 + count], out[4 + count :]
    assert len(max_khz) == count == 8  # the profile's 8 CPUs, not the host's
    # cpu N's clock is its own cpufreq policy's top one (little, big and prime cores differ)
    assert [round(float(m) * 1000) for m in mhz] == [int(k) for k in max_khz]
    assert len(set(max_khz)) > 1


def test_no_opencl_profile_hides_the_icd(tmp_path: Path) -> None:
    world = make_world("no-opencl", "VTEST0003", tmp_path / "p3")
    assert isinstance(world, SandboxWorld)
    with WorldThread(world) as w:
        assert w.sh("ls /vendor/lib64/libOpenCL.so").returncode != 0
        assert w.sh("ls /etc/OpenCL/vendors").returncode != 0


def test_rooted_profile_su_and_adb_root(tmp_path: Path) -> None:
    world = make_world("adreno-nexus6p", "VTEST0004", tmp_path / "p4")
    assert isinstance(world, SandboxWorld)
    with WorldThread(world) as w:
        assert w.sh("su -c id -u").stdout == "0\n"
        assert w.sh("su -c 'exit 3'").returncode == 3
        assert w.sh("su 0 cat /sys/class/power_supply/battery/charging_enabled").stdout == "1\n"
        world.set_adbd_root(True)
        assert (
            w.sh("id -u; echo 0 > /sys/class/power_supply/battery/charging_enabled; echo $?").stdout
            == "0\n0\n"
        )
        assert w.sh("cat /sys/class/power_supply/battery/charging_enabled").stdout == "0\n"


def test_reboot_from_inside_kills_everything_and_forgets_volatile_state(phone: WorldThread) -> None:
    phone.sh("setprop debug.farm.r 1; sleep 60 >/dev/null 2>&1 &")
    old_init = phone.world.sandbox.init_pid
    res = phone.sh("reboot", timeout_s=20)
    assert res.returncode != 0  # the reboot killed the shell that asked for it
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(EnvironmentProblem):
            if phone.world.sandbox.init_pid != old_init:
                break
        time.sleep(0.05)
    out = phone.sh("getprop debug.farm.r; ps -A -o NAME").stdout
    assert out.splitlines()[0] == "" and "sleep" not in out


def test_sdcard_is_noexec_and_data_local_tmp_is_exec(phone: WorldThread) -> None:
    script = (
        "cp /system/bin/sh /sdcard/x && chmod 755 /sdcard/x; /sdcard/x -c true; echo sd=$?; "
        "cp /system/bin/sh /data/local/tmp/x && chmod 755 /data/local/tmp/x; "
        "/data/local/tmp/x -c true; echo tmp=$?"
    )
    assert phone.sh(script).stdout.splitlines() == ["sd=126", "tmp=0"]


def test_controls_settings_svc_input_pm(phone: WorldThread) -> None:
    physics, screen_mw = phone.world.physics, phone.world.profile.power.screen_mw
    assert eventually(lambda: physics.last_power_mw > 0)  # a first tick, screen on
    screen_on_mw = physics.last_power_mw
    script = (
        "settings put global stay_on_while_plugged_in 0; svc power stayon usb; "
        "settings get global stay_on_while_plugged_in; settings get system no_such_key; "
        "input keyevent KEYCODE_SLEEP; input tap 10 20; input bogus; echo input=$?; "
        "cp /system/build.prop /data/local/tmp/org.farm.demo.apk && "
        "pm install -r -t /data/local/tmp/org.farm.demo.apk | cut -d: -f1; pm list packages -3; "
        "wm size; cmd nosuch; echo cmd=$?"
    )
    out = phone.sh(script).stdout.splitlines()
    assert out == [
        "2",
        "null",
        "input=1",
        "Failure [INSTALL_PARSE_FAILED_NOT_APK",  # a build.prop is no APK (t_pm's tests)
        "Physical size: 1080x2400",
        "cmd=20",
    ]
    # Wait for each step itself. The screen goes off with the key, while the script's later tools
    # still burn CPU: the screen-off power to compare with is the one with the CPU idle again.
    assert eventually(
        lambda: (
            physics.last_sample.cpu_busy_cores == 0 and physics.last_power_mw < screen_on_mw - screen_mw / 2
        )
    )
    screen_off_mw = physics.last_power_mw
    phone.sh("input keyevent KEYCODE_WAKEUP")
    assert eventually(lambda: physics.last_power_mw >= screen_off_mw + screen_mw * 0.9)


def test_setsid_escapes_the_stream_group_like_on_a_phone(phone: WorldThread) -> None:
    proc = subprocess.Popen(
        phone.world.shell_argv("setsid sleep 302 >/dev/null 2>&1 < /dev/null & sleep 303"),
        env=phone.world.shell_env(None),
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )

    # Both must run before the kill, and setsid must have left the group. toybox runs its own
    # applets in place (the line stays `setsid sleep 302`), so that is read from the kernel: the
    # process leads a process group of its own (PGID = PID).
    def left(ps: str) -> bool:
        rows = [line.split(None, 2) for line in ps.splitlines()[1:]]
        leader = any(r[0] == r[1] and r[2].endswith("sleep 302") for r in rows if len(r) == 3)
        return leader and any(len(r) == 3 and r[2] == "sleep 303" for r in rows)

    assert eventually(lambda: left(phone.sh("ps -A -o PID,PGID,ARGS").stdout), 20.0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(5)
    assert _wait_for_ps(phone, lambda ps: "sleep 303" not in _lines(ps))
    assert any(line.endswith("sleep 302") for line in _lines(phone.sh("ps -A -o ARGS").stdout))


def _lines(ps: str) -> set[str]:
    return {line.strip() for line in ps.splitlines()}


def _wait_for_ps(phone: WorldThread, ready: Callable[[str], bool], timeout_s: float = 20.0) -> bool:
    return eventually(lambda: ready(phone.sh("ps -A -o ARGS").stdout), timeout_s)
