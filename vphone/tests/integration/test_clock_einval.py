"""Root's clock writes through adb fail as the kernel's do (issue 10, "Bad input and faults"):
an invalid governor, a non-number, a min above the max (the sd865's 4.19 kernel) -> write(2)
fails with EINVAL, mksh reports it and exits 1, the node keeps its value, the phone keeps
running; a valid write is in force when the command returns, and the phone's CPU quota (read
from the host's cgroup, an independent truth) follows the speed its own nodes show.

Through the Debian adb client and the phone's own mksh (`su -c`), as a tool on a lab host would.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from vphone.cgroup import CgroupsUnavailable, PhoneCgroups, cfs_quota, phone_group_name, read_host_cgroups
from vphone.profiles import PROFILES_DIR
from vphone.testing.phones import PhoneFactory, VirtualPhone
from vphone.testing.waiting import eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
]
CPUFREQ = "/sys/devices/system/cpu/cpufreq"
POLICIES = ("policy0", "policy4", "policy7")  # the sd865's little, big and prime clusters
DEADLINE_S = 60.0


@dataclass(frozen=True)
class Adb:
    phone: VirtualPhone
    adb_port: int

    def shell(self, command: str) -> subprocess.CompletedProcess[str]:
        argv = ["adb", "-P", str(self.adb_port), "-s", self.phone.adb_serial, "shell", command]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)

    def su(self, command: str) -> subprocess.CompletedProcess[str]:
        return self.shell("su -c '" + command.replace("'", "'\\''") + "'")

    def read(self, path: str) -> str:
        result = self.shell(f"cat {path}")
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()


@pytest.fixture(scope="module")
def rooted(module_virtual_phones: PhoneFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Adb]:
    # The sd865 with its own budgets (1 core at top clocks), not its SoC's proportions: the quota
    # this test reads back is then the prime core's speed itself (vphone.socspeed scales it).
    legacy = tmp_path_factory.mktemp("profile") / "adreno-sd865-budgets.yaml"
    legacy.write_text((PROFILES_DIR / "adreno-sd865.yaml").read_text().split("\nthroughput:")[0] + "\n")
    phones = module_virtual_phones(count=1, profiles=[str(legacy)])
    adb = Adb(phones[0], phones.adb_port)
    log = (phones.state_dir / "daemon.log").read_text(encoding="utf-8", errors="replace")
    if "clock nodes served over FUSE" not in log:
        pytest.skip("FUSE is not usable here: the clock nodes are plain files (see daemon.log)")
    yield adb


def _refused(adb: Adb, command: str) -> None:
    result = adb.su(command)
    assert result.returncode == 1, (command, result)
    assert "Invalid argument" in result.stderr, (command, result.stderr)


def test_invalid_writes_fail_with_einval_and_change_nothing(rooted: Adb) -> None:
    adb = rooted
    p0 = f"{CPUFREQ}/policy0"
    before = {n: adb.read(f"{p0}/{n}") for n in ("scaling_governor", "scaling_min_freq", "scaling_max_freq")}
    _refused(adb, f"echo bogus > {p0}/scaling_governor")
    _refused(adb, f"echo fast > {p0}/scaling_max_freq")  # sscanf %u finds no number
    _refused(adb, f"echo 1804800 > {p0}/scaling_max_freq && echo 1900000 > {p0}/scaling_min_freq")
    _refused(adb, f"echo 0 > {p0}/scaling_max_freq")  # a max below the min's request
    _refused(adb, f"echo 600000 > {p0}/scaling_setspeed")  # needs the userspace governor
    kgsl = "/sys/class/kgsl/kgsl-3d0"
    _refused(adb, f"echo warp > {kgsl}/devfreq/governor")
    _refused(adb, f"echo 2x > {kgsl}/max_pwrlevel")  # kstrtouint: the whole write is a number
    # The refused write of the chain left the max as written before it: 1804800 is the table's top.
    assert {n: adb.read(f"{p0}/{n}") for n in before} == before
    assert adb.read(f"{kgsl}/max_pwrlevel") == "0" and adb.read(f"{kgsl}/devfreq/governor") == "msm-adreno-tz"
    # The phone keeps running, and a refusal is no kernel oops: the shell goes on after it.
    done = adb.su(f"echo bogus > {p0}/scaling_governor; echo status=$?; getprop ro.product.model")
    assert done.stdout.split() == ["status=1", "Mi", "10"], done


def test_out_of_table_numbers_are_resolved_not_refused(rooted: Adb) -> None:
    """What a real kernel does with a number between or beyond the table's steps: accepts it and
    shows the table entry in force (cpufreq RELATION_H / clamped to cpuinfo_max_freq)."""
    adb = rooted
    p0 = f"{CPUFREQ}/policy0"
    table = [int(f) for f in adb.read(f"{p0}/scaling_available_frequencies").split()]
    between = (table[3] + table[4]) // 2
    result = adb.su(f"echo {between} > {p0}/scaling_max_freq && cat {p0}/scaling_max_freq")
    assert result.returncode == 0 and result.stdout.strip() == str(table[3]), result
    result = adb.su(f"echo 99999999 > {p0}/scaling_max_freq && cat {p0}/scaling_max_freq")
    assert result.returncode == 0 and result.stdout.strip() == str(table[-1]), result


def _fastest_core_speed(adb: Adb) -> float:
    """The speed the phone's own nodes imply (cpu_capacity x scaling_max_freq / cpuinfo_max_freq
    of the fastest cluster, over the largest capacity), read back after the writes."""
    best, top = 0.0, 0
    for policy in POLICIES:
        d = f"{CPUFREQ}/{policy}"
        first = adb.read(f"{d}/related_cpus").split()[0]
        capacity = int(adb.read(f"/sys/devices/system/cpu/cpu{first}/cpu_capacity"))
        top = max(top, capacity)
        best = max(
            best, capacity * int(adb.read(f"{d}/scaling_max_freq")) / int(adb.read(f"{d}/cpuinfo_max_freq"))
        )
    return best / top


def test_a_valid_write_is_in_force_when_it_returns_and_the_physics_runs_at_it(rooted: Adb) -> None:
    adb = rooted
    try:
        cgroups = PhoneCgroups(read_host_cgroups(), phone_group_name(adb.phone.serial, adb.phone.state_dir))
        cgroups.quota_cores("cpu")
    except (CgroupsUnavailable, OSError) as exc:
        pytest.skip(f"no CPU budgets here: {exc}")
    lowest = {p: adb.read(f"{CPUFREQ}/{p}/scaling_available_frequencies").split()[0] for p in POLICIES}
    # Each write is judged in its write(2): the read right after it in the same shell sees it.
    pin = " && ".join(
        f"echo {khz} > {CPUFREQ}/{p}/scaling_max_freq && cat {CPUFREQ}/{p}/scaling_max_freq"
        for p, khz in lowest.items()
    )
    result = adb.su(pin)
    assert result.returncode == 0 and result.stdout.split() == list(lowest.values()), result
    speed = _fastest_core_speed(adb)
    assert math.isclose(speed, 844_800 / 2_841_600)  # the prime core at its lowest clock
    assert _runs_at(cgroups, speed), cgroups.quota_cores("cpu")
    restore = " && ".join(f"echo 4294967295 > {CPUFREQ}/{p}/scaling_max_freq" for p in POLICIES)
    assert adb.su(restore).returncode == 0
    assert _runs_at(cgroups, 1.0), cgroups.quota_cores("cpu")


def _runs_at(cgroups: PhoneCgroups, speed: float) -> bool:
    """Whether the phone's cpu/ group comes to run at `speed`. Its CFS period says the speed
    exactly (cgroup.cfs_quota stretches it as 1/speed). Its quota is speed x the threads that want
    a core (an idle phone: one) less the daemon's CPU for the phone (daemoncpu.less_daemon_cpu):
    on a loaded host the phone's idle processes wait in the run queue and read as more than one
    thread, and its physics tick costs the daemon a step of 0.05 cores (CI once read neither
    speed exactly for 60 s), so the quota is only held to within a factor of two of the speed."""
    period_us = cfs_quota(speed, speed)[1]
    seen: list[tuple[int, float]] = []

    def there() -> bool:
        seen.append((cgroups.cfs_period_us("cpu"), round(cgroups.quota_cores("cpu") or 0, 3)))
        return seen[-1][0] == period_us and 0.5 * speed <= seen[-1][1] <= 2 * speed

    if eventually(there, DEADLINE_S):
        return True
    print(f"wanted period {period_us} us and quota ~{speed:.3f} cores; saw {sorted(set(seen))[-10:]}")
    return False


def test_adb_pull_of_a_node_gives_its_text(rooted: Adb, tmp_path: Path) -> None:
    """The daemon itself reads the node then (the sync service's descriptor): it must not wait
    for its own event loop."""
    local = tmp_path / "governor"
    node = f"{CPUFREQ}/policy0/scaling_governor"
    argv = ["adb", "-P", str(rooted.adb_port), "-s", rooted.phone.adb_serial, "pull", node, str(local)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done
    assert local.read_text() == "schedutil\n"


def test_the_shell_user_still_cannot_write_a_node(rooted: Adb) -> None:
    result = rooted.shell(f"echo performance > {CPUFREQ}/policy0/scaling_governor")
    assert result.returncode != 0 and "Permission denied" in result.stderr, result
    assert rooted.read(f"{CPUFREQ}/policy0/scaling_governor") == "schedutil"
