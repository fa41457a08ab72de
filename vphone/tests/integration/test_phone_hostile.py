"""What a phone controls cannot freeze the daemon, make it read host files, or forge root
(issue #27, items 1 and 2). Each test attacks one phone of a daemon and then checks that the
daemon goes on: the physics keeps ticking (its ground truth grows by TICKS rows, at 10 Hz, which
takes the slow ~1 Hz tick that reads power.json and the charging node) and the other phone answers
a shell command. Before the fixes, each attack froze the daemon for good: the wait for those rows
runs out (a bounded wait, never a sleep)."""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from pathlib import Path

import pytest
from vphone.adb import packets as p
from vphone.cgroup import FARM_GROUP, phone_group_name, read_host_cgroups
from vphone.physics import CLOCK_FUSE_ENV
from vphone.testing.adb_wire import WireHost
from vphone.testing.phones import AdbServer, PhoneFactory, PhoneSet, VirtualPhone
from vphone.testing.waiting import eventually
from vphone.userdata import image_path

from vphone import control, daemoncpu

pytestmark = pytest.mark.integration

MANY = 100_000
FLOOD_OPENS = 20_000  # ~0.5 s of the daemon's CPU: past a phone's burst of its share
FLOOD_DAEMON_CORES = 0.2
REST_WINDOW_S = 3.0  # long enough for ~30 physics ticks of each phone
ONE_SHELL_CPU_S = 0.1  # the daemon's CPU for one short shell of a phone, generously
SMALL_RAM_MB = 384
HOG_BYTES = 2 * int(SMALL_RAM_MB * 0.65) << 20
TICKS = 25  # 2.5 s of physics: two slow ticks
ANSWER_TIMEOUT_S = 20.0
UNROOTED = "adreno-sd8gen2"
ROOTED = "adreno-sd865"


def rows(phone: VirtualPhone) -> int:
    try:
        with open(phone.ground_truth, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def shell(adb_server: AdbServer, phone: VirtualPhone, command: str, timeout_s: float = 60) -> str:
    result = adb_server.adb("-s", phone.adb_serial, "shell", command, timeout_s=timeout_s)
    return result.stdout + result.stderr


def answers(adb_server: AdbServer, phone: VirtualPhone) -> bool:
    try:
        return shell(adb_server, phone, "echo alive", ANSWER_TIMEOUT_S) == "alive\n"
    except subprocess.TimeoutExpired:
        return False


def assert_daemon_goes_on(adb_server: AdbServer, phones: PhoneSet) -> None:
    """The physics of every phone ticks on and the other phone answers."""
    start = {phone.serial: rows(phone) for phone in phones}
    assert eventually(lambda: all(rows(p) >= start[p.serial] + TICKS for p in phones), timeout_s=30), (
        "the daemon's physics stopped ticking"
    )
    assert answers(adb_server, phones[1]), "the other phone does not answer"


@pytest.fixture
def unrooted(virtual_phones: PhoneFactory) -> PhoneSet:
    return virtual_phones(count=2, profiles=[UNROOTED])


@pytest.fixture
def rooted(virtual_phones: PhoneFactory) -> PhoneSet:
    return virtual_phones(count=2, profiles=[ROOTED, UNROOTED])


def test_fifo_at_power_json_does_not_freeze_the_daemon(adb_server: AdbServer, unrooted: PhoneSet) -> None:
    out = shell(
        adb_server,
        unrooted[0],
        "rm -f /dev/.farm/shared/power.json; mkfifo /dev/.farm/shared/power.json; echo $?",
    )
    assert out.endswith("0\n"), out  # the shell may still make it: it is its own file
    assert_daemon_goes_on(adb_server, unrooted)


def test_fifo_named_like_a_taskset_request_does_not_freeze_the_daemon(
    adb_server: AdbServer, unrooted: PhoneSet
) -> None:
    shell(
        adb_server,
        unrooted[0],
        "mkfifo /dev/.farm/shared/f && mv /dev/.farm/shared/f /dev/.farm/shared/taskset.request.1",
    )
    assert_daemon_goes_on(adb_server, unrooted)
    # and taskset still works on that phone
    assert shell(adb_server, unrooted[0], "taskset -p $$").startswith("pid ")


@pytest.fixture
def rooted_plain_nodes(monkeypatch: pytest.MonkeyPatch, virtual_phones: PhoneFactory) -> PhoneSet:
    """Phones whose nodes are plain files, as on a host without FUSE: there the phone's root can
    replace the charging node or a telemetry node (over FUSE each is a bound file it cannot
    remove)."""
    monkeypatch.setenv(CLOCK_FUSE_ENV, "0")
    return virtual_phones(count=2, profiles=[ROOTED, UNROOTED])


def test_charging_node_replaced_by_a_link_to_a_host_fifo_is_not_read(
    adb_server: AdbServer, rooted_plain_nodes: PhoneSet, tmp_path: Path
) -> None:
    rooted = rooted_plain_nodes
    host_fifo = tmp_path / "host-fifo"
    os.mkfifo(host_fifo)
    node = "/sys/class/power_supply/battery/input_suspend"
    out = shell(adb_server, rooted[0], f"su -c 'rm -f {node} && ln -s {host_fifo} {node} && echo linked'")
    assert out == "linked\n", out
    assert_daemon_goes_on(adb_server, rooted)


def test_telemetry_node_replaced_by_a_fifo_does_not_freeze_the_write_path(
    adb_server: AdbServer, rooted_plain_nodes: PhoneSet
) -> None:
    # current_now changes every fuel-gauge interval, so the physics rewrites it. Plain nodes: over
    # FUSE it is a bound file the phone's root cannot remove (a kernel's sysfs refuses too).
    rooted = rooted_plain_nodes
    node = "/sys/class/power_supply/battery/current_now"
    out = shell(adb_server, rooted[0], f"su -c 'rm -f {node} && mkfifo {node} && echo made'")
    assert out == "made\n", out
    assert_daemon_goes_on(adb_server, rooted)


def sync_request(host: WireHost, remote_id: int, request: bytes, path: str) -> None:
    """Open a sync stream and send one request on it (without waiting for the reply)."""
    local = host.open(remote_id, "sync:")
    assert local is not None
    raw = path.encode()
    host.send(p.A_WRTE, remote_id, local, request + len(raw).to_bytes(4, "little") + raw)


def test_raw_sync_recv_of_a_fifo_leaves_the_event_loop_free(
    adb_server: AdbServer, unrooted: PhoneSet
) -> None:
    shell(adb_server, unrooted[0], "mkfifo /data/local/tmp/fifo")
    with WireHost.connect(unrooted[0].port) as host:
        # Two RECVs, each waiting for a writer (as adbd's service thread would): before, each held
        # the event loop for the file service's 30 s timeout.
        sync_request(host, 1, b"RECV", "/data/local/tmp/fifo")
        sync_request(host, 2, b"RECV", "/data/local/tmp/fifo")
        assert_daemon_goes_on(adb_server, unrooted)
        assert answers(adb_server, unrooted[0])


def test_shell_cannot_forge_the_rooted_marker_or_su(adb_server: AdbServer, unrooted: PhoneSet) -> None:
    phone = unrooted[0]
    shell(adb_server, phone, "touch /dev/.farm/rooted; ln -s /system/bin/getprop /data/local/tmp/su")
    out = shell(adb_server, phone, "/data/local/tmp/su -c id")
    assert "uid=0" not in out, out
    assert shell(adb_server, phone, "id -u") == "2000\n"


def test_shell_cannot_replace_the_tools_socket(adb_server: AdbServer, unrooted: PhoneSet) -> None:
    phone = unrooted[0]
    result = adb_server.adb(
        "-s",
        phone.adb_serial,
        "shell",
        "rm -f /dev/.farm/tools.sock || mv /dev/.farm/tools.sock /dev/.farm/x",
    )
    # the folder is root's 0755 (EACCES; before, sticky: EPERM)
    assert result.returncode == 1 and "Permission denied" in result.stderr, result
    # the tools still work: the socket is init's
    assert shell(adb_server, phone, "getprop ro.serialno") == f"{phone.serial}\n"
    st = os.stat(phone.state_dir / "ctl" / "tools.sock")
    assert st.st_uid != os.stat(phone.state_dir / "data" / "local" / "tmp").st_uid  # not shell's


def test_shell_cannot_create_rename_or_replace_in_the_control_dir(
    adb_server: AdbServer, unrooted: PhoneSet
) -> None:
    """/dev/.farm is root's and closed to shell (before, it was sticky with shell's group: shell
    added files there, e.g. a FIFO next to the daemon's). The tools' files are in shared/."""
    phone = unrooted[0]
    ctl = phone.state_dir / "ctl"
    before = sorted(os.listdir(ctl))
    for attempt in (
        "touch /dev/.farm/new",
        "mkfifo /dev/.farm/fifo",
        "ln -s /data /dev/.farm/link",
        "mkdir /dev/.farm/dir",
        "mv /dev/.farm/props /dev/.farm/props.old",
        "mv /dev/.farm/shared /dev/.farm/shared.old",
        "mv /dev/.farm/rooted /dev/.farm/x",
        "touch /data/local/tmp/f && mv /data/local/tmp/f /dev/.farm/kmsg",
        "echo forged > /dev/.farm/kmsg",
    ):
        result = adb_server.adb("-s", phone.adb_serial, "shell", f"{attempt} && echo done")
        assert result.returncode != 0 and "done" not in result.stdout, (attempt, result)
    assert sorted(os.listdir(ctl)) == before
    st = os.stat(ctl)
    assert (
        st.st_mode & 0o7777 == 0o755
        and st.st_uid != os.stat(phone.state_dir / "data" / "local" / "tmp").st_uid
    )
    # What the tools write still works as shell: power, wm, settings, battery, pm, taskset.
    out = shell(
        adb_server,
        phone,
        "svc power stayon true; wm size 720x1280; wm size; dumpsys battery unplug; "
        "dumpsys battery | grep 'USB powered'; taskset -p $$ | cut -c1-4; ls /dev/.farm/shared",
    )
    assert "Override size: 720x1280" in out and "USB powered: false" in out and "pid " in out, out
    assert {"power.json", "wm.json", "battery-override.json"} <= set(os.listdir(ctl / "shared")), out


def test_a_link_shell_plants_in_the_tools_folder_is_not_written_through_by_root(
    adb_server: AdbServer, rooted: PhoneSet
) -> None:
    """shared/ and logcat/ are shell's to write: a link planted there must not make a tool run as
    root append to or replace a root-only file of the phone (shell would become root's writer)."""
    phone = rooted[0]
    shell(adb_server, phone, "su -c 'echo secret > /data/root-only && chmod 600 /data/root-only'")
    for planted in ("/dev/.farm/shared/input.log", "/dev/.farm/shared/power_hint", "/dev/.farm/logcat/main"):
        out = shell(adb_server, phone, f"rm -f {planted}; ln -s /data/root-only {planted} && echo planted")
        assert out == "planted\n", out
    shell(adb_server, phone, "su -c 'input keyevent 3'")
    assert shell(adb_server, phone, "su -c 'cat /data/root-only'") == "secret\n"


def test_shell_cannot_rewrite_the_phone_identity(adb_server: AdbServer, unrooted: PhoneSet) -> None:
    phone, other = unrooted
    forged = f'{{"ro.serialno": "{other.serial}"}}'
    shell(adb_server, phone, f"rm -f /dev/.farm/props/ro.json; echo '{forged}' > /dev/.farm/props/ro.json")
    shell(adb_server, phone, f"echo -n {other.serial} > /dev/.farm/props/set/ro.serialno")
    shell(adb_server, phone, f"setprop ro.serialno {other.serial}")
    assert shell(adb_server, phone, "getprop ro.serialno") == f"{phone.serial}\n"


def test_bogus_opens_do_not_flood_the_daemon_log(unrooted: PhoneSet) -> None:
    log = unrooted.state_dir / "daemon.log"
    before = log.stat().st_size
    name = "x" * 200_000
    with WireHost.connect(unrooted[0].port) as host:
        for i in range(300):
            assert host.open(1 + i, name) is None
    grown = log.stat().st_size - before
    assert grown < 64 * 1024, f"daemon.log grew {grown} bytes for 300 bogus OPENs"


def phone_infos(phones: PhoneSet) -> dict[str, control.PhoneInfo]:
    state = control.running_state(phones.state_dir)
    assert state is not None
    return {info.serial: info for info in state.phones}


def process_cpu_s(pid: int) -> float:
    """A process's CPU time, all threads (utime + stime of /proc/PID/stat): the kernel's count."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_quota_cores(phone: VirtualPhone) -> float:
    """The quota of the phone's cpu/ cgroup on the host (v1 or v2), in cores."""
    group = (
        read_host_cgroups().cpu_root / FARM_GROUP / phone_group_name(phone.serial, phone.state_dir) / "cpu"
    )
    if (group / "cpu.max").exists():
        quota, period = (group / "cpu.max").read_text().split()
        return int(quota) / int(period)
    return int((group / "cpu.cfs_quota_us").read_text()) / int((group / "cpu.cfs_period_us").read_text())


def flood(port: int, count: int) -> int:
    """`count` tiny OPENs (of no service) on one raw connection, sent at once; the CLSEs back."""
    closed = 0
    with WireHost.connect(port) as host:
        burst = b"".join(p.encode(p.A_OPEN, 1 + i, 0, b"x\0") for i in range(count))
        sender = threading.Thread(target=host.sock.sendall, args=(burst,), daemon=True)
        sender.start()
        while closed < count and (packet := host.recv(timeout_s=120)) is not None:
            closed += packet.command == p.A_CLSE
        sender.join(timeout=10)
    return closed


@pytest.fixture
def small_daemon_share(monkeypatch: pytest.MonkeyPatch, virtual_phones: PhoneFactory) -> PhoneSet:
    """Two phones sharing a fifth of a core of the daemon: on a loaded host the daemon's thread
    may get less than the default core, and a flood never passes a share the host never gives."""
    monkeypatch.setenv(daemoncpu.DAEMON_CORES_ENV, str(FLOOD_DAEMON_CORES))
    return virtual_phones(count=2, profiles=[UNROOTED])


def test_a_phone_flooding_the_daemon_is_charged_its_cpu(
    adb_server: AdbServer, small_daemon_share: PhoneSet
) -> None:
    """The daemon's CPU spent on a phone's requests is that phone's (issue #27, item 2): the flood
    is charged to the phone that sent it, its requests wait once it is over its share of the
    daemon's thread, and the other phone is charged nothing of it and keeps answering."""
    unrooted = small_daemon_share
    loud, quiet = unrooted
    assert unrooted.daemon_pid is not None
    quota_before = cpu_quota_cores(loud)
    # What the daemon spends on a phone at rest (its physics tick, charged to it too), per second:
    # the quiet phone is charged that much while the flood lasts, longer on a loaded host.
    rest_from, rest_started = phone_infos(unrooted), time.monotonic()
    time.sleep(REST_WINDOW_S)
    before, daemon_before = phone_infos(unrooted), process_cpu_s(unrooted.daemon_pid)
    rest_cores = (before[quiet.serial].daemon_cpu_s - rest_from[quiet.serial].daemon_cpu_s) / (
        time.monotonic() - rest_started
    )
    flood_started = time.monotonic()
    flooding = threading.Thread(target=lambda: results.append(flood(loud.port, FLOOD_OPENS)), daemon=True)
    results: list[int] = []
    flooding.start()
    # The phone's own CPU quota pays for the daemon's work too, while the flood lasts.
    seen: list[float] = []
    # A step down at least (0.85 - 0.05 is 0.7999... in floats: compared with a tolerance, as a
    # quota read back as 0.8 failed once).
    lowered_to = quota_before - daemoncpu.QUOTA_STEP_CORES + 1e-9

    def lowered() -> bool:
        seen.append(cpu_quota_cores(loud))
        return seen[-1] <= lowered_to or not flooding.is_alive()

    assert eventually(lowered)
    assert min(seen) <= lowered_to, (quota_before, sorted(set(seen)))
    assert answers(adb_server, quiet)
    flooding.join(timeout=300)
    assert results == [FLOOD_OPENS]
    after, daemon_after = phone_infos(unrooted), process_cpu_s(unrooted.daemon_pid)
    flood_s = time.monotonic() - flood_started
    charged = {serial: after[serial].daemon_cpu_s - before[serial].daemon_cpu_s for serial in after}
    waited = {serial: after[serial].daemon_wait_s - before[serial].daemon_wait_s for serial in after}
    spent = daemon_after - daemon_before
    # Most of what the daemon spent meanwhile (the kernel's count) is charged to the flood's phone.
    assert charged[loud.serial] >= spent / 2, (charged, spent)
    # The quiet phone is charged its own rest (CI once: 0.81 s over a long flood against the loud
    # phone's 3.47 s) and its one `echo alive` meanwhile, none of the flood.
    quiet_rest_s = 3 * rest_cores * flood_s + ONE_SHELL_CPU_S
    assert charged[quiet.serial] < min(charged[loud.serial] / 2, quiet_rest_s), (charged, rest_cores, flood_s)
    # and the flood paid for it by waiting; the quiet phone waits only for its own (little) work
    assert waited[loud.serial] > 0 and waited[quiet.serial] < waited[loud.serial] / 10, (waited, charged)
    assert answers(adb_server, quiet)


def test_a_phone_has_a_memory_limit(
    adb_server: AdbServer, virtual_phones: PhoneFactory, tmp_path: Path
) -> None:
    phones = virtual_phones(count=2, profiles=[str(small_profile(tmp_path, ram_mb=SMALL_RAM_MB)), UNROOTED])
    # A shell variable of twice the phone's limit (65 % of 384 MB): the kernel's OOM killer
    # ends that shell, the host keeps its memory, and both phones go on.
    out = shell(adb_server, phones[0], f"x=$(head -c {HOG_BYTES} /dev/zero | tr '\\0' a); echo ${{#x}}")
    assert str(HOG_BYTES) not in out, out
    assert answers(adb_server, phones[0])
    assert answers(adb_server, phones[1])


def test_data_is_a_bounded_filesystem(
    adb_server: AdbServer, virtual_phones: PhoneFactory, tmp_path: Path
) -> None:
    profile = small_profile(tmp_path, storage_mb=64)
    phones = virtual_phones(count=1, profiles=[str(profile)])
    out = shell(
        adb_server, phones[0], "dd if=/dev/zero of=/data/local/tmp/big bs=1048576 count=256; echo rc=$?"
    )
    assert "rc=1" in out and "No space left" in out, out
    size = int(shell(adb_server, phones[0], "stat -c %s /data/local/tmp/big").strip())
    assert size < 64 << 20
    shell(adb_server, phones[0], "rm /data/local/tmp/big")


def test_a_large_listing_does_not_stall_the_other_phone(adb_server: AdbServer, unrooted: PhoneSet) -> None:
    out = shell(
        adb_server,
        unrooted[0],
        f"mkdir /data/local/tmp/many && cd /data/local/tmp/many && seq 1 {MANY} | xargs touch && ls | wc -l",
        timeout_s=300,
    )
    assert out.strip() == str(MANY), out
    with WireHost.connect(unrooted[0].port) as host:
        sync_request(host, 1, b"LIS2", "/data/local/tmp/many")
        # The other phone answers while the listing is still being made (seconds: a stat per
        # name): no byte of it has come yet. Before, the listing held the event loop until it was
        # complete, and its first WRTE came before the other phone's answer.
        assert answers(adb_server, unrooted[1])
        assert p.A_WRTE not in arrived(host), "the listing was complete before the other phone answered"
        reply = host.recv(timeout_s=300)
        while reply is not None and reply.command != p.A_WRTE:
            reply = host.recv(timeout_s=300)
        assert reply is not None and reply.payload.startswith(b"DNT2")


def arrived(host: WireHost) -> list[int]:
    """The commands of the packets the phone has sent so far (without waiting for more)."""
    commands = []
    while select.select([host.sock], [], [], 0)[0]:
        packet = host.recv()
        if packet is None:
            break
        commands.append(packet.command)
    return commands


def small_profile(tmp_path: Path, *, ram_mb: int | None = None, storage_mb: int | None = None) -> Path:
    """A copy of the unrooted profile with less RAM or storage (a YAML file profile)."""
    from vphone.profiles import PROFILES_DIR

    text = (PROFILES_DIR / f"{UNROOTED}.yaml").read_text(encoding="utf-8")
    if ram_mb is not None:
        text = text.replace("ram_mb: 8192", f"ram_mb: {ram_mb}")
    if storage_mb is not None:
        text = text.replace("storage_mb: 131072", f"storage_mb: {storage_mb}")
    path = tmp_path / "small.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_link_at_a_flag_the_daemon_makes_is_not_followed_at_reboot(
    adb_server: AdbServer, rooted: PhoneSet, tmp_path: Path
) -> None:
    victim = tmp_path / "made-by-host-root"
    phone = rooted[0]
    out = shell(
        adb_server,
        phone,
        f"su -c 'rm -f /dev/.farm/rooted && ln -s {victim} /dev/.farm/rooted && echo planted'",
    )
    assert out == "planted\n", out
    adb_server.adb("-s", phone.adb_serial, "reboot", timeout_s=120)
    adb_server.adb("-s", phone.adb_serial, "wait-for-device", timeout_s=120)
    assert answers(adb_server, phone)
    assert not os.path.lexists(victim), "the daemon created a host file through the phone's link"
    assert shell(adb_server, phone, "su -c id").startswith("uid=0")


def test_a_stopped_phones_partition_is_not_held_by_another_daemons_phone(
    adb_server: AdbServer, virtual_phones: PhoneFactory
) -> None:
    first = virtual_phones(count=1, profiles=[UNROOTED])
    image = image_path(first[0].state_dir)
    assert loop_devices(image), "the phone has no userdata partition"
    second = virtual_phones(count=1, profiles=[UNROOTED])  # launched while the first is mounted
    control.down(first.state_dir, adb_server.port)
    assert eventually(lambda: not loop_devices(image), timeout_s=30), "another phone keeps it mounted"
    assert answers(adb_server, second[0])


def loop_devices(image: Path) -> str:
    return subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True, check=False).stdout
