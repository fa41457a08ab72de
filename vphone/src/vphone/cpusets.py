"""The Android cgroup trees a phone's init mounts: /dev/cpuset, and /dev/stune (Android 9-10,
schedtune) or /dev/cpuctl (the cpu controller, Android 11+ and before 9).

Why a file tree kept by the physics rather than a delegated host cgroup: Android mounts cpuset
with `noprefix` (files `cpus`, `mems`, not `cpuset.cpus`), numbers CPUs as the phone does (0-7 on
a 2-core host), has /dev/stune on kernels that have no schedtune any more, and must look the same
on cgroup v1 and v2 hosts; a real host cgroup can give none of that. What must be real is
membership, so each cpuset group's `tasks` and `cgroup.procs` are bind mounts of the matching
host cgroup's files (cgroup.py: cpu/<group>/): writing a pid really moves the process (pids are
the phone's own, the kernel translates them; a bad pid fails with ESRCH), children inherit the
group, and reading lists the members. The group's `cpus` decides how fast its processes run: the
physics gives the host group the quota of the fastest core among those CPUs (clocks.py), so a
benchmark moved to `background` (the little cores) really slows down. Writing `cpus` is checked
as the kernel does (a valid list within the parent's CPUs, else the old value comes back).

/dev/stune and /dev/cpuctl are the same kind of tree, but bookkeeping only: their values
(schedtune.boost, cpu.shares, cpu.uclamp.*) read back what was written (no effect on speed).

On rooted phones these plain trees are what lies beneath: where FUSE works the daemon serves
both trees with the kernel's cgroupfs semantics over them (cgroupfs.py: mkdir/rmdir, tasks in
phone pids, refusals in write(2)); the plain trees, their inotify handling (physics.py,
cgmounts.py) and their limits remain the fallback, and the unrooted phones' read-only view.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from vphone.profile import Profile

CPUSET_PHONE_DIR = "/dev/cpuset"
STUNE_PHONE_DIR = "/dev/stune"
CPUCTL_PHONE_DIR = "/dev/cpuctl"
STUNE_MIN_SDK, STUNE_MAX_SDK = 28, 29
MEMBERSHIP_FILES = ("tasks", "cgroup.procs")


@dataclass(frozen=True)
class CpusetGroup:
    name: str  # "" is the root of /dev/cpuset
    cpus: tuple[int, ...]

    @property
    def host_group(self) -> str:
        """The host cgroup (relative to the phone's) whose quota and members this group uses."""
        return "cpu" if not self.name else f"cpu/{self.name}"


def format_cpulist(cpus: tuple[int, ...]) -> str:
    """(0, 1, 2, 5) -> '0-2,5'."""
    parts, run = [], list[int]()
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def parse_cpulist(text: str, ncpu: int) -> tuple[int, ...] | None:
    """The kernel's cpulist_parse: '0-3,5' -> (0, 1, 2, 3, 5); None if malformed or out of range.
    An empty write is valid (a cpuset without CPUs)."""
    body = text.strip()
    if not body:
        return ()
    cpus: set[int] = set()
    for part in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if m is None:
            return None
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi or hi >= ncpu:
            return None
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def cpuset_groups(profile: Profile) -> tuple[CpusetGroup, ...]:
    """Android's stock cpusets as init.rc sets them: top-app on every CPU, foreground without the
    prime cluster (3+ clusters), background and system-background on the little cluster,
    restricted (Android 11+) likewise."""
    clusters = profile.cpu.clusters
    firsts = profile.cpu.first_cpus()
    every = tuple(range(profile.cpu.ncpu))
    little = tuple(range(firsts[0], firsts[0] + clusters[0].cpus))
    foreground = every if len(clusters) < 3 else tuple(range(firsts[-1]))
    groups = [
        CpusetGroup("", every),
        CpusetGroup("top-app", every),
        CpusetGroup("foreground", foreground),
        CpusetGroup("background", little),
        CpusetGroup("system-background", little),
    ]
    if profile.sdk >= 30:
        groups.append(CpusetGroup("restricted", little))
    return tuple(groups)


def cpuset_files(group: CpusetGroup, root: bool, mems: str = "0") -> dict[str, str]:
    """A cpuset group's files (noprefix, as Android mounts cpuset); `root`: the hierarchy's top."""
    cpus = format_cpulist(group.cpus)
    files = {
        "cgroup.clone_children": "0\n",
        "cgroup.procs": "",
        "tasks": "",
        "cpus": f"{cpus}\n",
        "effective_cpus": f"{cpus}\n",
        "mems": f"{mems}\n",
        "effective_mems": f"{mems}\n",
        "cpu_exclusive": "1\n" if root else "0\n",
        "mem_exclusive": "1\n" if root else "0\n",
        "mem_hardwall": "0\n",
        "memory_migrate": "0\n",
        "memory_pressure": "0\n",
        "memory_spread_page": "0\n",
        "memory_spread_slab": "0\n",
        "notify_on_release": "0\n",
        "sched_load_balance": "1\n",
        "sched_relax_domain_level": "-1\n",
    }
    if root:
        files.update({"cgroup.sane_behavior": "0\n", "memory_pressure_enabled": "0\n", "release_agent": "\n"})
    return files


def _sched_tree(profile: Profile) -> tuple[str, dict[str, dict[str, str]]]:
    """(phone dir, {group: files}) of /dev/stune or /dev/cpuctl for this release."""
    common = {"cgroup.clone_children": "0\n", "cgroup.procs": "", "tasks": "", "notify_on_release": "0\n"}
    if STUNE_MIN_SDK <= profile.sdk <= STUNE_MAX_SDK:
        groups = {}
        for name, boost, idle in (
            ("", 0, 0),
            ("top-app", 10, 1),
            ("foreground", 0, 0),
            ("background", 0, 0),
            ("rt", 0, 0),
        ):
            groups[name] = {
                **common,
                "schedtune.boost": f"{boost}\n",
                "schedtune.prefer_idle": f"{idle}\n",
                "schedtune.colocate": "0\n",
            }
        return STUNE_PHONE_DIR, groups
    rt = {"cpu.rt_period_us": "1000000\n"}
    if profile.sdk < STUNE_MIN_SDK:
        return CPUCTL_PHONE_DIR, {
            "": {**common, **rt, "cpu.shares": "1024\n", "cpu.rt_runtime_us": "800000\n"},
            "bg_non_interactive": {**common, **rt, "cpu.shares": "52\n", "cpu.rt_runtime_us": "700000\n"},
        }
    groups = {}
    for name in ("", "top-app", "foreground", "background", "system", "system-background", "rt"):
        groups[name] = {
            **common,
            **rt,
            "cpu.shares": "1024\n",
            "cpu.rt_runtime_us": "950000\n" if not name else "0\n",
            "cpu.uclamp.min": "0.00\n",
            "cpu.uclamp.max": "max\n",
            "cpu.uclamp.latency_sensitive": "1\n" if name == "top-app" else "0\n",
        }
    return CPUCTL_PHONE_DIR, groups


@dataclass(frozen=True)
class CgroupTrees:
    """The trees of one phone in its state dir (<state>/devcg/cpuset, .../stune|cpuctl)."""

    root: Path
    profile: Profile

    @property
    def cpuset_dir(self) -> Path:
        return self.root / "cpuset"

    @property
    def sched_phone_dir(self) -> str:
        return _sched_tree(self.profile)[0]

    @property
    def sched_dir(self) -> Path:
        return self.root / self.sched_phone_dir.removeprefix("/dev/")

    def groups(self) -> tuple[CpusetGroup, ...]:
        return cpuset_groups(self.profile)

    def group_dir(self, group: str) -> Path:
        return self.cpuset_dir / group if group else self.cpuset_dir

    def sched_groups(self) -> dict[str, dict[str, str]]:
        """/dev/stune|cpuctl's stock groups ("" the top) and their files at boot."""
        return _sched_tree(self.profile)[1]

    def sched_new_group(self) -> dict[str, str]:
        """The files of a /dev/stune|cpuctl group made with mkdir: a stock group's, at the
        kernel's defaults (no boost, 1024 shares, no clamp, no RT time)."""
        stock = next(files for name, files in self.sched_groups().items() if name)
        defaults = {
            "schedtune.boost": "0\n",
            "schedtune.prefer_idle": "0\n",
            "cpu.shares": "1024\n",
            "cpu.rt_runtime_us": "0\n",
            "cpu.uclamp.min": "0.00\n",
            "cpu.uclamp.max": "max\n",
            "cpu.uclamp.latency_sensitive": "0\n",
        }
        return {name: defaults.get(name, text) for name, text in stock.items()}

    def create(self, owner: tuple[int, int] | None) -> None:
        """Lay out both trees (replacing an old one). `owner`: host uid/gid of phone root, who
        may write the files (None on unrooted phones: read-only, as the shell sees them)."""
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)
        for group in self.groups():
            self._files(self.group_dir(group.name), cpuset_files(group, root=not group.name), owner)
        phone_dir, sched = _sched_tree(self.profile)
        base = self.root / phone_dir.removeprefix("/dev/")
        for name, files in sched.items():
            self._files(base / name if name else base, files, owner)

    @staticmethod
    def _files(d: Path, files: dict[str, str], owner: tuple[int, int] | None) -> None:
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)
        for name, text in files.items():
            path = d / name
            path.write_text(text, encoding="utf-8")
            os.chmod(path, 0o644)
            if owner is not None and os.geteuid() == 0:
                os.chown(path, *owner)
        if owner is not None and os.geteuid() == 0:
            os.chown(d, *owner)

    def mounts(self) -> list[tuple[Path, str]]:
        """(host dir, phone dir) to bind into the phone."""
        return [(self.cpuset_dir, CPUSET_PHONE_DIR), (self.sched_dir, self.sched_phone_dir)]

    def membership_binds(self, host_files: dict[str, tuple[Path, Path]]) -> list[tuple[Path, str]]:
        """(host cgroup file, phone file) binds over each cpuset group's tasks and cgroup.procs.
        `host_files`: group name -> (threads file, procs file) of its host cgroup."""
        binds = []
        for group in self.groups():
            threads, procs = host_files[group.name]
            phone = f"{CPUSET_PHONE_DIR}/{group.name}".rstrip("/")
            binds += [(threads, f"{phone}/tasks"), (procs, f"{phone}/cgroup.procs")]
        return binds
