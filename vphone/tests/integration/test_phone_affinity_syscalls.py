"""A phone program's own sched_setaffinity / sched_getaffinity (vphone/src/vphone/affinitynotify.py):
answered in the phone's CPU numbers (8 CPUs on a 2-core host) by the daemon through a seccomp
listener, with the kernel's errors and length rules, agreeing with the phone's taskset and
cgroups, confined to the phone's own threads, and pinning at the speed of the CPUs named.
Checked through adb (adbutils) with a raw-syscall C program (affinity_probe.c), toybox `nproc`
and the phone root's Python; the speed on an in-process phone."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path

import adbutils
import pytest
from vphone.profiles import load_profile
from vphone.testing.phones import PhoneFactory, PhoneSet
from vphone.testing.socphone import budgeted, install, phone

from vphone import affinitynotify

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]
PROBE_SRC = Path(__file__).resolve().parent / "affinity_probe.c"
PROBE = "/data/local/tmp/affinity_probe"
LISTENER = "anon_inode:seccomp notify"


@pytest.fixture(scope="module")
def probe_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("probe") / "affinity_probe"
    flags = ["-static", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]
    subprocess.run(["gcc", *flags, "-o", str(out), str(PROBE_SRC)], check=True, timeout=120)
    return out


@pytest.fixture(scope="module")
def phones(module_virtual_phones: PhoneFactory) -> PhoneSet:
    return module_virtual_phones(count=2, profiles=["adreno-sd8gen2", "adreno-sd865"])


@pytest.fixture(scope="module")
def devices(phones: PhoneSet, probe_binary: Path) -> dict[str, adbutils.AdbDevice]:
    client = phones.client()
    found = {p.profile: p.device(client) for p in phones}
    for d in found.values():
        d.sync.push(str(probe_binary), PROBE, mode=0o755)
    return found


def sh(device: adbutils.AdbDevice, command: str) -> str:
    result = device.shell2(command, v2=True, rstrip=False)
    assert (result.returncode, result.stderr) == (0, ""), (command, result)
    return str(result.stdout)


def _pidns_members(pidns: str) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/ns/pid") == pidns:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def _listeners_of(pid: int) -> int:
    count = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                count += os.readlink(f"/proc/{pid}/fd/{fd}") == LISTENER
            except OSError:
                continue
    except OSError:
        pass
    return count


def _host_pid_of(argv0_and_arg: bytes) -> int:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes() == argv0_and_arg:
                    return int(name)
            except OSError:
                continue
    raise AssertionError(f"no host process {argv0_and_arg!r}")


def test_the_phones_cpus_are_what_programs_see(devices: dict[str, adbutils.AdbDevice]) -> None:
    d = devices["adreno-sd8gen2"]  # 8 CPUs: little 0-2, mid 3-6, prime 7
    # toybox nproc asks sched_getaffinity; --all counts the phone's /sys CPUs.
    assert sh(d, "nproc; nproc --all") == "8\n8\n"
    assert sh(d, f"{PROBE} get") == "ok 8 ff\n"  # 8 bytes: the phone kernel's cpumask size
    # Pinned to CPU 7 (which the host lacks) by the call itself: read back by the call, by the
    # phone's taskset, and in the thread's cgroup; the shell's next command inherits it.
    out = sh(d, f"{PROBE} set 80 $$; {PROBE} get; taskset -p $$; cat /proc/$$/cgroup; nproc")
    lines = out.splitlines()
    assert lines[:3] == ["ok 0", "ok 8 80", f"pid {lines[2].split()[1]} current affinity mask: 80"]
    assert any(line.endswith("/affinity-80") for line in lines[3:-1]), out
    assert lines[-1] == "1"
    # Every online CPU is no pin (runtimes such as PoCL set it on their threads): a pinned
    # thread goes back to the phone's top group instead of an affinity group for all CPUs.
    out = sh(d, f"{PROBE} set 80 $$; {PROBE} set ff $$; {PROBE} get; cat /proc/$$/cgroup")
    assert out.splitlines()[:3] == ["ok 0", "ok 0", "ok 8 ff"] and "/affinity-" not in out, out
    # A program's pin is its own: the next adb shell (a fresh process) has every CPU.
    assert sh(d, f"{PROBE} get") == "ok 8 ff\n"
    # Threads are pinned one by one and a new thread inherits its creator's mask; children too.
    assert sh(d, f"{PROBE} threads") == "thread inherited=80 own=1\nmain own=80\n"
    assert sh(d, f"{PROBE} fork 70") == "child 70\n"
    # taskset's pin reads back through the call as well, and Debian toybox's own taskset (the
    # syscalls alone) agrees with the phone's.
    assert sh(d, f"taskset 78 {PROBE} get") == "ok 8 78\n"
    assert sh(d, "toybox taskset 80 toybox taskset -p 0") == "pid 0's current affinity mask: 80\n"
    assert sh(d, "toybox taskset 70 taskset -p 0") == "pid 0's current affinity mask: 70\n"


def test_the_kernels_length_and_pointer_rules(devices: dict[str, adbutils.AdbDevice]) -> None:
    out = sh(devices["adreno-sd8gen2"], f"{PROBE} edges")
    assert out.splitlines() == [
        f"set_unmapped -1 {errno.EFAULT}",
        f"get_readonly -1 {errno.EFAULT} 0",  # copy_to_user faults; the page stays as it was
        f"get_len12 -1 {errno.EINVAL}",  # not a multiple of sizeof(long)
        f"get_len0 -1 {errno.EINVAL}",  # shorter than the phone's CPUs
        "get_len64 8 untouched=1",  # the mask size written, nothing past it
        "set_len4 0 0 1",  # a short mask is zero-filled
        f"set_len0 -1 {errno.EINVAL}",  # an empty mask names no CPU
    ]


def test_refusals_and_confinement(phones: PhoneSet, devices: dict[str, adbutils.AdbDevice]) -> None:
    d, other = devices["adreno-sd8gen2"], devices["adreno-sd865"]
    # No online CPU of the phone in the mask; a CPU beyond its 8; shell naming root's init.
    assert sh(d, f"{PROBE} set 100") == f"err {errno.EINVAL}\n"
    assert sh(d, f"{PROBE} set 300 0 16") == f"err {errno.EINVAL}\n"
    assert sh(d, f"{PROBE} set 1 1") == f"err {errno.EPERM}\n"
    assert sh(d, f"{PROBE} get 1") == "ok 8 ff\n"  # reading another user's mask is allowed
    assert sh(d, f"{PROBE} get 99999; {PROBE} get -5") == f"err {errno.ESRCH}\nerr {errno.ESRCH}\n"
    # Host pids (the daemon, a process of the other phone) are no pids of this phone: ESRCH,
    # and the other phone's process keeps its host cgroup.
    sh(other, "sleep 41.25 >/dev/null 2>&1 &")
    foreign = _host_pid_of(b"sleep\x0041.25\x00")
    before = Path(f"/proc/{foreign}/cgroup").read_text()
    daemon = phones.daemon_pid or os.getpid()
    for pid in (foreign, daemon):
        assert sh(d, f"{PROBE} set 1 {pid}; {PROBE} get {pid}") == f"err {errno.ESRCH}\n" * 2
    assert sh(other, f"su -c '{PROBE} set 1 {daemon}'") == f"err {errno.ESRCH}\n"
    assert Path(f"/proc/{foreign}/cgroup").read_text() == before
    os.kill(foreign, signal.SIGKILL)
    # The phone's root pins its own processes, in its own 8 CPU numbers (sd865: prime is CPU 7).
    assert sh(other, f"su -c '{PROBE} set 80 1; {PROBE} get 1; {PROBE} set ff 1'") == "ok 0\nok 8 80\nok 0\n"
    # The phone root's Python sizes itself by the phone's CPUs.
    py = "import os; print(sorted(os.sched_getaffinity(0)), len(os.sched_getaffinity(0)))"
    assert sh(other, f"su -c '/system/lib/farm/python3 -c \"{py}\"'") == "[0, 1, 2, 3, 4, 5, 6, 7] 8\n"
    # No phone process holds a listener: not the shell, not init, not the sync file server
    # (a session is open while we look); the daemon holds them all.
    assert LISTENER not in sh(d, "ls -l /proc/self/fd")
    namespaces, sleepers = [], []
    for i, dev in enumerate((d, other)):
        sh(dev, f"sleep 42.{i} >/dev/null 2>&1 &")
        sleepers.append(_host_pid_of(b"sleep\x0042.%d\x00" % i))
        namespaces.append(os.readlink(f"/proc/{sleepers[-1]}/ns/pid"))
    reading = d.sync.iter_content(PROBE)
    assert next(reading)
    try:
        for pidns in namespaces:
            members = _pidns_members(pidns)
            assert len(members) >= 3 and sum(_listeners_of(pid) for pid in members) == 0
    finally:
        reading.close()
        for pid in sleepers:
            os.kill(pid, signal.SIGKILL)
    assert _listeners_of(daemon) >= 2


@pytest.mark.serial  # a speed ratio: needs the host's cores
def test_a_loop_pinned_by_the_call_runs_at_its_cpus_speed(tmp_path: Path, probe_binary: Path) -> None:
    # Half a host core binds even on a loaded 2-core host, so the quotas decide (as for taskset).
    with phone(budgeted("adreno-sd865", cpu=0.5), "VPAFS01", tmp_path) as w:
        if w.world.cgroups is None:
            pytest.skip(f"no host cgroups here: {w.world.budget_note}")
        probe = install(w, probe_binary)
        # ~0.5 s on the prime core at half a host core: many CFS periods.
        iters = 200_000_000

        def seconds(mask: str) -> float:
            out = w.sh(f"{probe} loop {mask} {iters}").stdout
            assert out.startswith("seconds "), out
            return float(out.split()[1])

        prime, little = seconds("80"), seconds("f")
        assert w.world.cgroups.quota_cores("cpu/affinity-f") == pytest.approx(0.5 * 256 / 1024, rel=0.01)
        # The profile's ratio (prime 1024 / little 256) is the truth; a host too busy to give the
        # prime run its half core makes the ratio smaller, never larger.
        ratio = little / prime
        assert 2.0 < ratio < 1.4 * 1024 / 256, (ratio, prime, little, os.getloadavg())


def test_without_user_notification_the_phone_starts_with_the_hosts_cpus(
    tmp_path: Path, probe_binary: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A kernel without seccomp user notification (< 5.0) or with other struct sizes: no
    listener, the phone boots, its programs see the host's CPUs, and the log says so."""
    monkeypatch.setattr(affinitynotify, "notif_sizes", lambda: None)
    caplog.set_level(logging.INFO, logger=affinitynotify.__name__)
    with phone(load_profile("adreno-sd8gen2"), "VPAFN01", tmp_path) as w:
        probe = install(w, probe_binary)
        host = sum(1 << c for c in os.sched_getaffinity(0))
        assert w.sh(f"{probe} get").stdout.split()[:1] == ["ok"]
        assert w.sh(f"{probe} get").stdout.split()[2] == f"{host:x}"
        assert w.sh("nproc").stdout.strip() == str(len(os.sched_getaffinity(0)))
    assert any("affinity syscalls see the host's CPUs" in r.getMessage() for r in caplog.records)
