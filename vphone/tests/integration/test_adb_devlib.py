"""ARM's devlib (a widely used Android automation stack, pip extra `clients`) accepts the virtual
phones unmodified (issue #10.6): AndroidTarget with its default modules connects to an unrooted
(adreno-sd8gen2) and a rooted (adreno-sd865) phone through Debian's adb, installs its own busybox
(the phone has none), executes, pushes and pulls, reads sysfs, and uses its cpufreq, hotplug and
cgroups modules where the profile allows them.

devlib drives the `adb` command line; it finds our private adb server through
ANDROID_ADB_SERVER_PORT, and needs `aapt` on the host (Debian's aapt package).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vphone.cgroup import FARM_GROUP, CgroupsUnavailable, phone_group_name, read_host_cgroups
from vphone.testing.phones import AdbServer, PhoneFactory

devlib = pytest.importorskip("devlib", reason="devlib is in the `clients` extra")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("aapt") is None, reason="devlib needs aapt (apt-get install aapt)"),
]

PROFILES = {"unrooted": "adreno-sd8gen2", "rooted": "adreno-sd865"}
CPUFREQ = "/sys/devices/system/cpu/cpu0/cpufreq"


@pytest.fixture(scope="module")
def targets(module_virtual_phones: PhoneFactory, module_adb_server: AdbServer) -> Iterator[dict[str, Any]]:
    phones = module_virtual_phones(count=2, profiles=list(PROFILES.values()))
    made: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANDROID_ADB_SERVER_PORT", str(module_adb_server.port))
        for (kind, _profile), phone in zip(PROFILES.items(), phones, strict=True):
            target = devlib.AndroidTarget(connection_settings={"device": phone.adb_serial}, connect=False)
            target.connect(timeout=60)
            target.setup()  # installs devlib's busybox and the default modules
            made[kind] = target
            made[f"{kind}-phone"] = phone
        yield made
        for kind in PROFILES:
            made[kind].disconnect()


@pytest.mark.parametrize("kind", PROFILES)
def test_connect_identity_and_its_own_busybox(targets: dict[str, Any], kind: str) -> None:
    target = targets[kind]
    assert target.is_rooted is (kind == "rooted")
    assert target.abi == "x86_64"
    assert target.os_version["sdk"] == target.execute("getprop ro.build.version.sdk").strip()
    # The phone ships no busybox (a real one does not): devlib pushed its own and runs it.
    assert target.busybox == f"{target.executables_directory}/busybox"
    assert target.execute("command -v busybox || echo none").strip() in ("none", target.busybox)
    assert target.execute(f"{target.busybox} echo from-busybox").strip() == "from-busybox"
    assert set(target.modules) >= {"cpufreq"} | ({"cgroups"} if kind == "rooted" else set())


@pytest.mark.parametrize("kind", PROFILES)
def test_android_id_through_content_query(targets: dict[str, Any], kind: str) -> None:
    # devlib asks the settings provider with `content query --uri content://settings/secure
    # --projection value --where "name='android_id'"` and takes what follows `value=` (issue #28:
    # it stopped there, the phone had no `content`); ANDROID_ID is 16 hex digits.
    target = targets[kind]
    assert re.fullmatch("[0-9a-f]{16}", target.android_id)
    assert target.android_id == target.execute("settings get secure android_id").strip()


@pytest.mark.parametrize("kind", PROFILES)
def test_execute_reports_status_and_runs_as_the_right_user(targets: dict[str, Any], kind: str) -> None:
    target = targets[kind]
    assert target.execute("id -u").strip() == "2000"
    with pytest.raises(devlib.exception.TargetStableError):
        target.execute("exit 3")
    if kind == "rooted":
        assert target.execute("id -u", as_root=True).strip() == "0"


@pytest.mark.parametrize("kind", PROFILES)
def test_push_pull_keep_bytes_and_mode(targets: dict[str, Any], kind: str, tmp_path: Path) -> None:
    target = targets[kind]
    source = tmp_path / "blob.bin"
    source.write_bytes(os.urandom(300_000))
    source.chmod(0o640)
    remote = target.path.join(target.working_directory, "blob.bin")
    target.push(str(source), remote)
    assert target.execute(f"stat -c %a:%U {remote}").strip() == "640:shell"
    back = tmp_path / "back.bin"
    target.pull(remote, str(back))
    assert back.read_bytes() == source.read_bytes()


@pytest.mark.parametrize("kind", PROFILES)
def test_read_value_of_sysfs(targets: dict[str, Any], kind: str) -> None:
    target = targets[kind]
    capacity = target.read_value("/sys/class/power_supply/battery/capacity", kind=int)
    level = next(
        int(line.split(":")[1])
        for line in target.execute("dumpsys battery").splitlines()
        if line.strip().startswith("level:")
    )
    assert 0 <= capacity <= 100 and abs(capacity - level) <= 1
    # The profile's CPUs (three clusters, eight CPUs), whatever the host has.
    assert target.read_value("/sys/devices/system/cpu/online") == "0-7"
    assert target.number_of_cpus == 8


@pytest.mark.parametrize("kind", PROFILES)
def test_cpufreq_module_reads_the_policy(targets: dict[str, Any], kind: str) -> None:
    target = targets[kind]
    table = sorted(int(f) for f in target.execute(f"cat {CPUFREQ}/scaling_available_frequencies").split())
    assert target.cpufreq.list_frequencies(0) == table
    assert target.cpufreq.get_governor(0) in target.cpufreq.list_governors(0)
    assert table[0] <= target.cpufreq.get_frequency(0) <= table[-1]


def test_cpufreq_module_pins_a_frequency_as_root(targets: dict[str, Any]) -> None:
    target = targets["rooted"]
    table = target.cpufreq.list_frequencies(0)
    governor = target.cpufreq.get_governor(0)
    try:
        target.cpufreq.set_governor(0, "userspace")
        target.cpufreq.set_frequency(0, table[0])
        assert target.cpufreq.get_frequency(0) == table[0]
    finally:
        target.cpufreq.set_governor(0, governor)


def test_hotplug_module_takes_a_cpu_offline_as_root(targets: dict[str, Any]) -> None:
    target = targets["rooted"]
    assert target.has("hotplug")
    target.hotplug.offline(1)
    try:
        assert 1 not in target.list_online_cpus()
    finally:
        target.hotplug.online(1)
    assert 1 in target.list_online_cpus()


def test_cgroups_module_mounts_the_phones_cpuset_and_runs_a_task_in_a_new_group(
    targets: dict[str, Any],
) -> None:
    # /proc/cgroups lists the hierarchies the phone has (Android 12: cpuset and cpu); devlib
    # mounts each under its working dir and sees Android's groups there, noprefix like /dev/cpuset.
    target = targets["rooted"]
    assert target.has("cgroups")
    assert {s.name for s in target.cgroups.list_subsystems()} == {"cpuset", "cpu"}
    cpuset = target.cgroups.controller("cpuset")
    assert {"/", "/top-app", "/background"} <= set(cpuset.list_all())
    mounted = target.execute(f"mount | grep '^{cpuset.mount_name} '")
    assert "type cgroup" in mounted and "noprefix" in mounted
    # A new group on the phone's big cores (4-6 of its 8 CPUs; the host has fewer).
    group = cpuset.cgroup("/devlib_big")
    group.set(cpus=[4, 5, 6], mems=0)
    assert group.get()["cpus"] == "4-6"
    assert target.read_value("/dev/cpuset/devlib_big/effective_cpus") == "4-6"
    # run_into moves devlib's shell into the group (the kernel's own membership) and execs.
    out = target.cgroups.run_into("/devlib_big", "cat /proc/self/cgroup")
    assert any(line.endswith(":/devlib_big") for line in out.splitlines()), out
    # In its own sh: devlib prefixes `export ... &&`, so a bare `&` would background a subshell
    # that keeps the output open. nohup: the stream's end hangs up what is left, as adbd does.
    # As root: the phone's root moves only its own processes (a limit of the sandbox, cgroup.py).
    background = "sh -c 'nohup sleep 60 > /dev/null 2>&1 < /dev/null & echo $!'"
    sleeper = int(target.execute(background, as_root=True).strip())
    try:
        group.add_task(sleeper)
        assert sleeper in group.get_tasks()
        # The physics' view: the group's host cgroup runs at the big cores' speed, below top-app's
        # (which has the prime core), and holds the task.
        phone = targets["rooted-phone"]
        try:
            host = read_host_cgroups()
        except CgroupsUnavailable:
            pytest.skip("no host cgroups here")
        phone_cg = host.cpu_root / FARM_GROUP / phone_group_name(phone.serial, phone.state_dir) / "cpu"
        if not (phone_cg / "devlib_big").is_dir():
            pytest.skip("CPU budgets are not enforced here")
        assert 0 < quota_us(phone_cg / "devlib_big") < quota_us(phone_cg / "top-app")
    finally:
        target.execute(f"kill {sleeper}", as_root=True)
    assert not targets["unrooted"].has("cgroups")  # needs root, as on a phone


def quota_us(group: Path) -> float:
    """CFS quota per period of a host cgroup (v1 or v2)."""
    if (group / "cpu.max").exists():
        quota, period = (group / "cpu.max").read_text().split()
        return int(quota) / int(period)
    return int((group / "cpu.cfs_quota_us").read_text()) / int((group / "cpu.cfs_period_us").read_text())
