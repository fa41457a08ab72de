"""Each phone's processes in their own host cgroups: a CPU budget, a GPU budget, a pids limit,
a memory limit.

Layout (cgroup v1: the cpu and pids hierarchies; v2: one unified tree, cpu and pids controllers):

  farm-virtual/<serial>-<hash of the state dir>/      cpu.shares (v1) / cpu.weight (v2), pids.max
      cpu/            the phone's processes: CFS quota = CPU budget x CPU speed (clocks.py)
      cpu/<group>/    one per Android cpuset group (rooted phones' /dev/cpuset, see cpusets.py)
      cpu/affinity-<hex mask>/  threads the phone's taskset pinned to those CPUs (affinity.py)
      gpu/            the PoCL worker threads (the "GPU"): quota = GPU budget x GPU speed
  memory: farm-virtual/<serial>-<hash>/ (v1 memory hierarchy; v2 the same group as cpu)
                      memory.limit_in_bytes / memory.max = memory_limit_bytes(): what a phone
                      process can have of its RAM, so one phone cannot take the host's memory
                      (the kernel's OOM killer ends the phone's largest process past it, as
                      Android's lmkd would end an app)

On v2 the phone's group is a threaded domain and cpu/, gpu/ are threaded, so that single threads
(PoCL's workers) can sit in gpu/ while their process stays in cpu/; v1 allows that anyway.
A quota is a cap, not a guarantee: a phone's latency is independent of its neighbours only while
the budgets fit the host (`budget_problem`), and the weight makes the phones win over ordinary
host processes up to their caps.

Every process joins before it enters the phone (the sandbox's vphone-exec writes its pid into
`join_files()` for init and for each command), so nothing the phone runs escapes its budget;
children inherit the cgroups.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import hashlib
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vphone.errors import EnvironmentProblem
from vphone.profiles import load_profile

FARM_GROUP = "farm-virtual"
# At the top clock: finer than the default 100 ms, so ms-scale kernels see an even rate (a
# lower clock stretches it, cfs_quota).
CFS_PERIOD_US = 20_000
CFS_MIN_QUOTA_US = 1_000  # the kernel's minimum quota
CFS_MAX_PERIOD_US = 1_000_000
# Weight per host core of budget: a phone weighs like one busy host process per core it may use,
# about what its busy threads weighed before they had a cgroup (more would starve the phones'
# daemon, their ADB links and physics, and farm itself when the phones are flat out). The
# farm-virtual parent weighs the sum of its phones: else all phones together would compete with
# the host's processes like one of them.
SHARES_PER_CORE = 1024
V1_MAX_SHARES = 262_144
V2_WEIGHT_PER_CORE = 100
V2_MAX_WEIGHT = 10_000
RMDIR_TIMEOUT_S = 5.0
# Android keeps about a third of a phone's RAM for itself (kernel, system_server, SurfaceFlinger,
# ...): physics.py shows the same share as used in the phone's /proc/meminfo.
SYSTEM_USED_FRACTION = 0.35
MEMORY_MIN_BYTES = 64 << 20  # below this not even the phone's init and a shell fit
CPU_GROUP = "cpu"
GPU_GROUP = "gpu"


class CgroupVersion(enum.Enum):
    V1 = 1
    V2 = 2


class CgroupsUnavailable(EnvironmentProblem):
    """No usable cpu cgroup here (not root, no cpu controller...): phones run without budgets."""


@dataclass(frozen=True)
class HostCgroups:
    """Where this host mounts the controllers farm uses."""

    version: CgroupVersion
    cpu_root: Path
    pids_root: Path | None  # v1 pids hierarchy (None: no pids limit); v2: cpu_root
    memory_root: Path | None = None  # v1 memory hierarchy (None: no memory limit); v2: cpu_root


@dataclass(frozen=True)
class CpuStat:
    nr_periods: int
    nr_throttled: int
    throttled_us: int


def parse_mountinfo(text: str) -> tuple[dict[str, Path], Path | None]:
    """(v1 controller -> mount point, the cgroup2 mount point or None) from /proc/self/mountinfo."""
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point = Path(fields[4].replace("\\040", " "))
        if tail[0] == "cgroup2" and v2 is None:
            v2 = mount_point
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                v1.setdefault(option, mount_point)
    return v1, v2


def detect_host_cgroups(mountinfo: str, v2_controllers: str | None) -> HostCgroups | None:
    """Prefer the v1 cpu hierarchy when the cpu controller is bound there (hybrid hosts),
    else the unified tree when it offers cpu. `v2_controllers` is its root cgroup.controllers."""
    v1, v2 = parse_mountinfo(mountinfo)
    if "cpu" in v1:
        return HostCgroups(CgroupVersion.V1, v1["cpu"], v1.get("pids"), v1.get("memory"))
    if v2 is not None and v2_controllers is not None and "cpu" in v2_controllers.split():
        offered = v2_controllers.split()
        return HostCgroups(
            CgroupVersion.V2, v2, v2 if "pids" in offered else None, v2 if "memory" in offered else None
        )
    return None


def read_host_cgroups() -> HostCgroups:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    except OSError as exc:
        raise CgroupsUnavailable(f"cannot read /proc/self/mountinfo: {exc.strerror}") from None
    _v1, v2 = parse_mountinfo(mountinfo)
    controllers = None
    if v2 is not None:
        with contextlib.suppress(OSError):
            controllers = (v2 / "cgroup.controllers").read_text(encoding="utf-8")
    host = detect_host_cgroups(mountinfo, controllers)
    if host is None:
        raise CgroupsUnavailable("no cpu cgroup controller is mounted")
    return host


def cfs_quota(cores: float, speed: float = 1.0) -> tuple[int, int]:
    """(quota_us, period_us) for `cores` host cores, which are a part's top-clock budget times
    `speed` (0..1], its clock now against its top clock (socmodel.Quotas).

    The period stretches as 1/speed, so a period holds the same quota at every clock. A thread
    held back by the quota pays a warm-up each time it runs again (its caches, the host core's
    clock: measured 0.3-1.5 ms of CPU per stall for a 160^3 gemm on a 2-core VM, 20-60% more CPU
    per iteration at 1.9 ms of quota per 20 ms period than unthrottled). With one period for all
    clocks that loss was a larger share of a low clock's smaller quota, so a kernel pinned to 38%
    of the top clock ran 3.4-4.1x slower instead of 2.6x (issue 28). With the stretch a low clock
    is the top clock's schedule slowed down: as many stalls per unit of work, each costing the
    same, and time scales with the clock ratio. The period also grows for tiny budgets so the
    quota stays above the kernel's 1 ms minimum."""
    period = min(CFS_MAX_PERIOD_US, round(CFS_PERIOD_US / max(speed, CFS_PERIOD_US / CFS_MAX_PERIOD_US)))
    if cores * period < CFS_MIN_QUOTA_US:
        period = min(CFS_MAX_PERIOD_US, math.ceil(CFS_MIN_QUOTA_US / max(cores, 1e-6)))
    return max(CFS_MIN_QUOTA_US, round(cores * period)), period


def memory_limit_bytes(ram_mb: int, host_total_bytes: int) -> int:
    """What a phone's processes may hold: the share of its RAM that Android leaves to apps (the
    rest is the system's, SYSTEM_USED_FRACTION, as /proc/meminfo in the phone shows), and at most
    a quarter of the host's RAM, so that a few phones of 8-16 GB fit a lab machine."""
    usable = int(ram_mb * (1 - SYSTEM_USED_FRACTION)) << 20
    return max(MEMORY_MIN_BYTES, min(usable, host_total_bytes // 4))


def host_memory_bytes() -> int:
    """MemTotal of the host, from /proc/meminfo."""
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError(errno.EINVAL, "no MemTotal in /proc/meminfo")


def phone_group_name(serial: str, state_dir: Path) -> str:
    """Unique per phone on this host, also across daemons and users that reuse a serial."""
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:10]
    return f"{serial}-{digest}"


def budget_problem(budgets_cores: Sequence[float], host_cores: int) -> str | None:
    """One line when the phones' budgets (CPU + GPU, at top clocks) overcommit the host, so that
    phones can slow each other down (a single phone has no neighbours to disturb)."""
    total = sum(budgets_cores)
    if len(budgets_cores) < 2 or total <= host_cores + 1e-9:
        return None
    each = ", ".join(sorted({f"{b:.3g}" for b in budgets_cores}))
    return (
        f"CPU budgets do not fit this host: {len(budgets_cores)} phone(s) x {each} cores = {total:.3g} "
        f"> {host_cores} host cores, so a phone's latency depends on its neighbours' load "
        "(run fewer phones, or give a profile copy smaller cpu.budget_cores / gpu.budget_cores)"
    )


def memory_problem(limits_bytes: Sequence[int], host_bytes: int) -> str | None:
    """One line when the phones' memory limits together exceed the host's RAM: each phone is
    bounded, but all of them at their limits would leave the host's OOM killer to choose."""
    total = sum(limits_bytes)
    if len(limits_bytes) < 2 or total <= host_bytes:
        return None
    return (
        f"memory limits do not fit this host: {len(limits_bytes)} phone(s) with {total / 2**30:.1f} GiB "
        f"together > {host_bytes / 2**30:.1f} GiB of host RAM, so phones at their limits leave the host "
        "short (run fewer phones, or give a profile copy a smaller ram_mb)"
    )


def budget_warnings(profile_names: Sequence[str], budgets_cores: Sequence[float] | None = None) -> list[str]:
    """What `farm virtual up` says about the budgets of these phones on this host (one line
    each): budgets that overcommit the host, or budgets that cannot be enforced here.
    `budgets_cores`: each phone's host cores (the speed plans'), else the profiles' own."""
    lines = []
    profiles = [load_profile(n) for n in profile_names]
    if budgets_cores is None:
        budgets_cores = [p.host_budget_cores for p in profiles]
    problem = budget_problem(list(budgets_cores), host_cores())
    if problem is not None:
        lines.append(problem)
    with contextlib.suppress(OSError):
        host_bytes = host_memory_bytes()
        problem = memory_problem([memory_limit_bytes(p.ram_mb, host_bytes) for p in profiles], host_bytes)
        if problem is not None:
            lines.append(problem)
    try:
        host = read_host_cgroups()
        farm = host.cpu_root / FARM_GROUP
        if not os.access(farm if farm.is_dir() else host.cpu_root, os.W_OK):
            raise CgroupsUnavailable(f"{host.cpu_root} is not writable for this user")
    except CgroupsUnavailable as exc:
        lines.append(f"CPU budgets are not enforced here ({exc.message}): phones share the host freely")
    return lines


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _add_controllers(subtree_control: Path, wanted: Iterable[str]) -> None:
    enabled = subtree_control.read_text(encoding="ascii").split()
    missing = [c for c in wanted if c not in enabled]
    if missing:
        _write(subtree_control, " ".join(f"+{c}" for c in missing))


class PhoneCgroups:
    """The host cgroups of one phone. No I/O until `create`; `destroy` after its processes died."""

    def __init__(self, host: HostCgroups, name: str, *, owner: tuple[int, int] | None = None) -> None:
        self.host = host
        self.name = name
        self.owner = owner  # host uid/gid of the phone's root, for delegated files (v2)
        self.cpu_dir = host.cpu_root / FARM_GROUP / name
        self.pids_dir = None if host.pids_root is None else host.pids_root / FARM_GROUP / name
        self.memory_dir: Path | None = None
        if host.memory_root is not None:
            self.memory_dir = self.cpu_dir if self.v2 else host.memory_root / FARM_GROUP / name
        self._groups: list[str] = []

    @property
    def v2(self) -> bool:
        return self.host.version is CgroupVersion.V2

    def group_dir(self, group: str) -> Path:
        return self.cpu_dir / group

    # -- lifecycle ---------------------------------------------------------------------------------

    def create(
        self,
        *,
        weight_cores: float,
        pids_max: int,
        subgroups: Sequence[str] = (),
        memory_max_bytes: int | None = None,
    ) -> None:
        """Make the tree (reusing a stale one of a dead daemon); raises CgroupsUnavailable."""
        try:
            self._create(weight_cores, pids_max, subgroups)
            if memory_max_bytes is not None:
                self._limit_memory(memory_max_bytes)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self.destroy()
            raise CgroupsUnavailable(
                f"cannot set up cgroups under {self.cpu_dir.parent}: {exc.strerror or exc}",
                hint="virtual phones need root (or a delegated cgroup v2 subtree) for CPU budgets",
            ) from None

    def _create(self, weight_cores: float, pids_max: int, subgroups: Sequence[str]) -> None:
        farm = self.cpu_dir.parent
        if self.v2:
            _add_controllers(self.host.cpu_root / "cgroup.subtree_control", ("cpu", "pids"))
            farm.mkdir(exist_ok=True)
            _add_controllers(farm / "cgroup.subtree_control", ("cpu", "pids"))
        self.cpu_dir.mkdir(parents=True, exist_ok=True)
        if self.v2:
            _write(
                self.cpu_dir / "cpu.weight",
                str(min(V2_MAX_WEIGHT, max(1, round(V2_WEIGHT_PER_CORE * weight_cores)))),
            )
            _write(self.cpu_dir / "pids.max", str(pids_max))
            _add_controllers(self.cpu_dir / "cgroup.subtree_control", ("cpu",))
        else:
            _write(
                self.cpu_dir / "cpu.shares",
                str(min(V1_MAX_SHARES, max(2, round(SHARES_PER_CORE * weight_cores)))),
            )
            if self.pids_dir is not None:
                self.pids_dir.mkdir(parents=True, exist_ok=True)
                _write(self.pids_dir / "pids.max", str(pids_max))
        self._weigh_farm_group()
        for group in (CPU_GROUP, GPU_GROUP):
            self._mkgroup(group)
        if subgroups and self.v2:
            _add_controllers(self.group_dir(CPU_GROUP) / "cgroup.subtree_control", ("cpu",))
        for sub in subgroups:
            self._mkgroup(f"{CPU_GROUP}/{sub}")

    def _limit_memory(self, max_bytes: int) -> None:
        """memory.max (v2) or memory.limit_in_bytes (v1, and the same for memory+swap where the
        host counts swap, so a phone cannot page its excess out to the host's swap instead)."""
        d = self.memory_dir
        if d is None:
            return
        if self.v2:
            _add_controllers(self.host.cpu_root / "cgroup.subtree_control", ("memory",))
            _add_controllers(d.parent / "cgroup.subtree_control", ("memory",))
            _write(d / "memory.max", str(max_bytes))
            with contextlib.suppress(FileNotFoundError):
                _write(d / "memory.swap.max", "0")
            return
        d.mkdir(parents=True, exist_ok=True)
        memsw = d / "memory.memsw.limit_in_bytes"
        if memsw.exists() and int(memsw.read_text(encoding="ascii")) < max_bytes:
            _write(memsw, str(max_bytes))  # memsw may never be below the plain limit
            _write(d / "memory.limit_in_bytes", str(max_bytes))
        else:
            _write(d / "memory.limit_in_bytes", str(max_bytes))
            if memsw.exists():
                _write(memsw, str(max_bytes))

    def memory_limit(self) -> int | None:
        """The memory limit in force, read back from the kernel (None: none)."""
        d = self.memory_dir
        if d is None:
            return None
        try:
            text = (d / ("memory.max" if self.v2 else "memory.limit_in_bytes")).read_text(encoding="ascii")
        except OSError:
            return None
        return None if text.strip() == "max" else int(text)

    def _weigh_farm_group(self) -> None:
        """farm-virtual's weight = the sum of its phones' (every daemon's): recomputed as phones
        come and go; a race between two daemons only leaves one of two right sums."""
        per_core = V2_WEIGHT_PER_CORE if self.v2 else SHARES_PER_CORE
        name, lo, hi = ("cpu.weight", 1, V2_MAX_WEIGHT) if self.v2 else ("cpu.shares", 2, V1_MAX_SHARES)
        farm = self.cpu_dir.parent
        total = 0
        for phone in farm.iterdir():
            with contextlib.suppress(OSError, ValueError):
                if phone.is_dir():
                    total += int((phone / name).read_text(encoding="ascii"))
        with contextlib.suppress(OSError):
            _write(farm / name, str(min(hi, max(lo, total or per_core))))

    def _mkgroup(self, group: str) -> None:
        d = self.group_dir(group)
        d.mkdir(exist_ok=True)
        self._groups.append(group)
        if self.v2 and (d / "cgroup.type").read_text(encoding="ascii").strip() != "threaded":
            _write(d / "cgroup.type", "threaded")

    def add_group(self, group: str) -> None:
        """A group made while the phone runs (a cpuset group its root created), under `group`'s
        parent, which must exist."""
        parent = group.rpartition("/")[0]
        if self.v2 and parent:
            _add_controllers(self.group_dir(parent) / "cgroup.subtree_control", ("cpu",))
        self._mkgroup(group)

    def remove_group(self, group: str) -> None:
        """Remove a group made while the phone runs (a cpuset group its root removed); EBUSY
        while it has tasks or children, as rmdir answers."""
        self.group_dir(group).rmdir()
        with contextlib.suppress(ValueError):
            self._groups.remove(group)

    def destroy(self) -> None:
        """Remove the tree, leaves first; waits (bounded) for exiting tasks to leave."""
        dirs = sorted((p for p in self.cpu_dir.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        dirs.append(self.cpu_dir)
        if self.pids_dir is not None:
            dirs.append(self.pids_dir)
        if self.memory_dir is not None and self.memory_dir != self.cpu_dir:
            dirs.append(self.memory_dir)
        deadline = time.monotonic() + RMDIR_TIMEOUT_S
        for d in dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
        if self.cpu_dir.parent.is_dir():
            self._weigh_farm_group()

    # -- membership ----------------------------------------------------------------------------------

    def join_files(self, cpu_group: str = CPU_GROUP) -> tuple[Path, ...]:
        """Files a new phone process writes its pid into before it execs (cgroup.procs);
        `cpu_group`: the cpu group it starts in (its default cpuset's)."""
        files = [self.group_dir(cpu_group) / "cgroup.procs"]
        if not self.v2 and self.pids_dir is not None:
            files.append(self.pids_dir / "cgroup.procs")
        if not self.v2 and self.memory_dir is not None and self.memory_dir.is_dir():
            files.append(self.memory_dir / "cgroup.procs")
        return tuple(files)

    def procs_file(self, group: str) -> Path:
        return self.group_dir(group) / "cgroup.procs"

    def threads_file(self, group: str) -> Path:
        """v1 `tasks`, v2 `cgroup.threads`: one thread per write."""
        return self.group_dir(group) / ("cgroup.threads" if self.v2 else "tasks")

    def delegate_membership(self, groups: Iterable[str], owner: tuple[int, int]) -> None:
        """Let the phone's root (host `owner`) write these groups' tasks/cgroup.procs, as a
        delegated cgroup: /dev/cpuset binds them. On v1 the kernel still lets it move only
        processes of its own uid (shell's stay where they are); v2 checks the common ancestor,
        which is delegated too."""
        for group in groups:
            for f in (self.threads_file(group), self.procs_file(group)):
                os.chown(f, *owner)

    def move_threads(self, group: str, tids: Iterable[int]) -> None:
        target = self.threads_file(group)
        for tid in tids:
            with contextlib.suppress(ProcessLookupError):
                _write(target, str(tid))

    def member_pids(self) -> list[int]:
        """Every process with a thread in the phone's tree: v2's threaded domain lists its whole
        subtree, v1's pids group holds every process (the phone's root moves them only between
        cpu/ groups); v1 without pids: the union of the groups. Raises OSError once destroyed."""
        if self.v2:
            files = [self.cpu_dir / "cgroup.procs"]
        elif self.pids_dir is not None:
            files = [self.pids_dir / "cgroup.procs"]
        else:
            files = [self.procs_file(g) for g in self._groups]
        pids: set[int] = set()
        for f in files:
            with open(f, "rb") as stream:
                pids.update(int(p) for p in stream.read().split())
        return sorted(pids)

    def threads(self, group: str) -> set[int]:
        try:
            return {int(t) for t in self.threads_file(group).read_text(encoding="ascii").split()}
        except (OSError, ValueError):
            return set()

    # -- budgets --------------------------------------------------------------------------------------

    def set_quotas(self, cores_by_group: dict[str, float], speeds: dict[str, float] | None = None) -> None:
        """Set the CFS quota of several groups (`speeds`: each group's clock against its top
        clock, which stretches its period, `cfs_quota`; 1 where not given). v1 refuses a child
        quota above its parent's, so a shrinking parent goes last and a growing one first."""
        speeds = speeds or {}
        current = {g: self.quota_cores(g) for g in cores_by_group}

        def order(group: str) -> tuple[int, int]:
            old = current[group]
            growing = old is None or cores_by_group[group] >= old
            depth = group.count("/")
            return (0, depth) if growing else (1, -depth)

        for group in sorted(cores_by_group, key=order):
            self._set_quota(group, cores_by_group[group], speeds.get(group, 1.0))

    def _set_quota(self, group: str, cores: float, speed: float = 1.0) -> None:
        quota, period = cfs_quota(cores, speed)
        d = self.group_dir(group)
        if self.v2:
            _write(d / "cpu.max", f"{quota} {period}")
            return
        if int((d / "cpu.cfs_period_us").read_text(encoding="ascii")) != period:
            # v1 checks the old quota against the new period: clear the quota first.
            _write(d / "cpu.cfs_quota_us", "-1")
            _write(d / "cpu.cfs_period_us", str(period))
        _write(d / "cpu.cfs_quota_us", str(quota))

    def quota_cores(self, group: str) -> float | None:
        """The quota in force, read back from the kernel (None: unlimited)."""
        d = self.group_dir(group)
        if self.v2:
            quota, period = (d / "cpu.max").read_text(encoding="ascii").split()
            return None if quota == "max" else int(quota) / int(period)
        q = int((d / "cpu.cfs_quota_us").read_text(encoding="ascii"))
        return None if q < 0 else q / int((d / "cpu.cfs_period_us").read_text(encoding="ascii"))

    def cfs_period_us(self, group: str) -> int:
        """The CFS period in force: its stretch is the speed the quota was set for (cfs_quota)."""
        d = self.group_dir(group)
        if self.v2:
            return int((d / "cpu.max").read_text(encoding="ascii").split()[1])
        return int((d / "cpu.cfs_period_us").read_text(encoding="ascii"))

    def cpu_stat(self, group: str) -> CpuStat:
        values: dict[str, int] = {}
        for line in (self.group_dir(group) / "cpu.stat").read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                values[key] = int(value)
        throttled_us = values.get("throttled_usec", values.get("throttled_time", 0) // 1000)
        return CpuStat(values.get("nr_periods", 0), values.get("nr_throttled", 0), throttled_us)

    def pids_max_hits(self) -> int:
        """How often a fork or clone failed on pids.max (pids.events `max`)."""
        d = self.cpu_dir if self.v2 else self.pids_dir
        if d is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for line in (d / "pids.events").read_text(encoding="ascii").splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        return 0


def host_cores() -> int:
    return len(os.sched_getaffinity(0))
