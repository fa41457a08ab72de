"""Where the benchmark ran: its CPU mask as requested and as in force, its cpuset and cgroups (pure).

farm pins a cpu backend with toybox `taskset MASK` (farm.engine.clocks). The kernel intersects
the mask with the CPUs of the caller's cpuset (kernel/sched/core.c `__sched_setaffinity`:
`cpuset_cpus_allowed`, then `cpumask_and`) and reports success: a phone whose init puts adbd, and
so every adb shell, in /dev/cpuset/foreground or system-background (ro.cpuset.default, AOSP
system/core/init/README.md `writepid`; vendor task_profiles.json) runs "the big cores" on fewer
CPUs than asked, silently. The run script therefore reads the mask back (`taskset -p PID`,
toybox's "pid N's current affinity mask: HEX"), /proc/PID/cpuset and /proc/PID/cgroup while the
memory gate holds the pinned pid, before the program runs, in its `affinity` block:

    requested 70            (the mask farm asked for; - for none)
    comm sh                 (the pid's name when read: the gate's shell, already pinned)
    pid 4242's current affinity mask: 30
    cpuset /foreground
    cgroup 4:cpuset:/foreground      (one per line of /proc/PID/cgroup)

    readback = parse_affinity(lines)
    readback.narrowed        # True: the kernel ran it on fewer CPUs than asked
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_MASK = re.compile(r"current affinity mask: ([0-9a-fA-F]+)\s*$")


def _hex(text: str | None) -> int | None:
    if text is None or not re.fullmatch(r"[0-9a-fA-F]+", text):
        return None
    return int(text, 16)


def cpus_of(mask: int) -> str:
    """0x70 -> '4-6', 0x85 -> '0,2,7' (the kernel's cpulist format)."""
    cpus = [i for i in range(mask.bit_length()) if mask >> i & 1]
    parts: list[str] = []
    start = prev = None
    for cpu in [*cpus, None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None and prev is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(parts)


@dataclass(frozen=True)
class AffinityReadback:
    requested_mask: int | None  # None: no taskset (all CPUs asked)
    effective_mask: int | None  # None: not read (taskset -p failed, the benchmark had ended)
    comm: str | None
    cpuset: str | None
    cgroups: tuple[str, ...]

    @property
    def narrowed(self) -> bool | None:
        """Whether the mask in force differs from the one asked; None when nothing was asked or
        nothing read (no judgement)."""
        if self.requested_mask is None or self.effective_mask is None:
            return None
        return self.effective_mask != self.requested_mask

    def note(self) -> str | None:
        """The run note for a narrowed mask (None otherwise)."""
        if not self.narrowed or self.requested_mask is None or self.effective_mask is None:
            return None
        asked, got = self.requested_mask, self.effective_mask
        return (
            f"the kernel narrowed the benchmark's CPU mask {asked:x} (CPUs {cpus_of(asked)}) to "
            f"{got:x} (CPUs {cpus_of(got)}): its cpuset {self.cpuset or '(unread)'} does not hold "
            "every CPU asked for"
        )

    def to_json(self) -> dict[str, object]:
        """As env.json's `affinity` carries it."""
        return {
            "requested": f"{self.requested_mask:x}" if self.requested_mask is not None else None,
            "effective": f"{self.effective_mask:x}" if self.effective_mask is not None else None,
            "narrowed": self.narrowed,
            "comm": self.comm,
            "cpuset": self.cpuset,
            "cgroups": list(self.cgroups),
        }


def parse_affinity(lines: Sequence[str]) -> AffinityReadback:
    """The script's `affinity` block (pure); unknown lines are ignored."""
    requested = effective = None
    comm = cpuset = None
    cgroups: list[str] = []
    for line in lines:
        key, _, value = line.partition(" ")
        if key == "requested":
            requested = _hex(value.strip())
        elif key == "comm":
            comm = None if value.strip() in ("", "-") else value.strip()
        elif key == "cpuset":
            cpuset = value.strip() or None
        elif key == "cgroup":
            cgroups.append(value)
        elif (found := _MASK.search(line)) is not None:
            effective = int(found.group(1), 16)
    return AffinityReadback(requested, effective, comm, cpuset, tuple(cgroups))
