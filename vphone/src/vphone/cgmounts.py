"""cgroup v1 mounts and new cpuset groups inside a rooted phone, done by the daemon the way the
phone's kernel would do them.

Tools such as devlib read /proc/cgroups, then mount each hierarchy it lists themselves
(`mount -t cgroup -o cpuset devlib_cgh1 DIR`), make groups with mkdir and move tasks in. On a real
Android phone that second mount of an already mounted hierarchy shows the same tree as
/dev/cpuset, with its options (noprefix): the kernel ignores the new mount's differing options.
So here:

* /proc/cgroups lists the hierarchies the phone has views of (cpusets.py): cpuset, and cpu
  (/dev/cpuctl) or schedtune (/dev/stune) per release.
* The phone's `mount` (tools/t_mount.py) sends `-t cgroup` requests to the daemon through the
  control dir; the daemon checks that root made them (the request file's owner), that the
  options name exactly one hierarchy, and binds that view recursively at DIR in the phone's own
  mount namespace (native/vphone-exec `bind --view`, with the phone's user-namespace rights; the
  phone's root may not mount at all). The view is the phone's own tree: nothing of the host's
  cgroups or another phone's can be named, since the source is one of the phone's views and
  every phone path resolves inside its root.
* A directory made in the cpuset tree becomes a group: the daemon lays out its files (empty
  `cpus` and `mems`, as the kernel does without clone_children), makes the host cgroup
  cpu/<group> under the phone's own cgroup, and binds that cgroup's tasks / cgroup.procs over
  the group's (`bind --host-file`), so writing a pid really moves the task and the group's
  `cpus` set its speed, as for Android's groups. The view at /dev/cpuset is a shared mount, so
  the binds show in every view of it. The adb shell service lets the world settle after each
  command (`SandboxWorld.settle`), so a group made in one command is complete in the next.

Where the trees are served over FUSE (cgroupfs.py, the usual case on a rooted phone) the view is
that filesystem and groups are its own (made at mkdir, removed at rmdir); what follows about new
directories holds for the plain trees of the fallback only. Their limits: within one command, a
write to a new group's files right after mkdir may precede its layout (wait for its
`effective_cpus`); rmdir of a group with files fails (ENOTEMPTY); a group with no cpus accepts
tasks (the kernel would refuse with ENOSPC) and runs them at its parent's speed; /dev/stune and
/dev/cpuctl groups made with mkdir stay plain directories.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vphone import beneath, ctlfiles
from vphone.cgroup import CPU_GROUP, PhoneCgroups
from vphone.cpusets import CPUSET_PHONE_DIR, STUNE_PHONE_DIR, CgroupTrees, CpusetGroup, cpuset_files
from vphone.layout import native_binary

log = logging.getLogger(__name__)

MOUNT_REQUEST_PREFIX = "mount.request."  # + request id: {"device", "options", "dir"} from t_mount
MOUNT_ANSWER_PREFIX = "mount.answer."  # + request id: {"errno": 0 | E...}
CGROUP_MOUNTS = "cgroup-mounts.json"  # what `mount` shows for the cgroup views
BIND_TIMEOUT_S = 10.0
# Options of a cgroup v1 mount that name no controller.
_GENERIC_OPTIONS = frozenset(
    {"rw", "ro", "nosuid", "suid", "nodev", "dev", "noexec", "exec", "relatime", "noatime", "noprefix"}
)
_OPTION_PREFIXES = ("release_agent=", "clone_children", "xattr", "cpuset_v2_mode")
# Where a phone may not put a view: its control dir, the kernel's trees, its read-only system.
_REFUSED_DIRS = ("/proc", "/sys", "/dev/.farm", "/system", "/vendor", "/etc", "/apex")


@dataclass(frozen=True)
class Hierarchy:
    """One cgroup v1 hierarchy of the phone, as /proc/cgroups numbers it."""

    hid: int
    controller: str
    phone_dir: str  # where Android's init mounted it
    noprefix: bool
    groups: int

    @property
    def options(self) -> str:
        """As /proc/mounts shows the hierarchy (the same for every mount of it)."""
        extra = ",noprefix,release_agent=/sbin/cpuset_release_agent" if self.noprefix else ""
        return f"rw,nosuid,nodev,noexec,relatime,{self.controller}{extra}"


@dataclass(frozen=True)
class CgroupMount:
    device: str
    mount_dir: str
    hid: int


def hierarchies(trees: CgroupTrees) -> tuple[Hierarchy, ...]:
    sched = trees.sched_phone_dir
    sched_groups = (
        sum(1 for p in trees.sched_dir.rglob("*") if p.is_dir()) + 1 if trees.sched_dir.is_dir() else 1
    )
    return (
        Hierarchy(1, "cpuset", CPUSET_PHONE_DIR, True, len(trees.groups())),
        Hierarchy(2, "schedtune" if sched == STUNE_PHONE_DIR else "cpu", sched, False, sched_groups),
    )


def proc_cgroups_text(hs: tuple[Hierarchy, ...]) -> str:
    """/proc/cgroups of the phone: only the controllers it has views of (tools mount each)."""
    lines = ["#subsys_name\thierarchy\tnum_cgroups\tenabled"]
    lines += [f"{h.controller}\t{h.hid}\t{h.groups}\t1" for h in hs]
    return "\n".join(lines) + "\n"


def choose_hierarchy(options: str, hs: tuple[Hierarchy, ...]) -> Hierarchy | int:
    """The hierarchy `mount -t cgroup -o OPTIONS` names, or the errno the kernel answers: EINVAL
    for an unknown option or controller, EBUSY for controllers that are not exactly one
    hierarchy's (none named means all of them)."""
    known = {h.controller: h for h in hs}
    named = set()
    for option in filter(None, options.split(",")):
        if option in _GENERIC_OPTIONS or option.startswith(_OPTION_PREFIXES):
            continue
        if option not in known:
            return errno.EINVAL
        named.add(option)
    if len(named) != 1:
        return errno.EBUSY
    return known[named.pop()]


def refused_dir(phone_dir: str) -> int | None:
    """EACCES for places a view may not cover, EINVAL for a path that is not absolute."""
    path = PurePosixPath(phone_dir)
    if not path.is_absolute() or ".." in path.parts:
        return errno.EINVAL
    if str(path) == "/" or any(
        path == PurePosixPath(r) or PurePosixPath(r) in path.parents for r in _REFUSED_DIRS
    ):
        return errno.EACCES
    return None


def table_entries(mounts: list[CgroupMount], hs: tuple[Hierarchy, ...]) -> list[dict[str, str]]:
    """The JSON the phone's `mount` prints for its cgroup views (init's and the phone's own)."""
    by_id = {h.hid: h for h in hs}
    rows = [{"device": "none", "dir": h.phone_dir, "type": "cgroup", "options": h.options} for h in hs]
    rows += [
        {"device": m.device, "dir": m.mount_dir, "type": "cgroup", "options": by_id[m.hid].options}
        for m in mounts
    ]
    return rows


class CgroupMounter:
    """The daemon's side of one phone's cgroup mounts and groups. No I/O until called."""

    def __init__(self, ctl: Path, trees: CgroupTrees, root_owner: tuple[int, int]) -> None:
        self.ctl = ctl
        self.trees = trees
        self.root_owner = root_owner
        self._mounts: list[CgroupMount] = []

    def boot(self, proc_cgroups: Path) -> None:
        """A fresh boot: only init's mounts, /proc/cgroups from the trees (laid out already)."""
        self._mounts = []
        hs = hierarchies(self.trees)
        proc_cgroups.write_text(proc_cgroups_text(hs), encoding="ascii")
        self._write_table(hs)

    def _write_table(self, hs: tuple[Hierarchy, ...]) -> None:
        ctlfiles.write_json(self.ctl, CGROUP_MOUNTS, table_entries(self._mounts, hs))

    # -- mount -t cgroup ----------------------------------------------------------------------------

    def serve(self, request: Path, init_pid: int) -> None:
        """Answer one request file of the phone's `mount` (then remove it)."""
        if not request.name.startswith(MOUNT_REQUEST_PREFIX) or request.name.endswith(".tmp"):
            return
        taken = ctlfiles.take_request(self.ctl, ctlfiles.shared(request.name))
        if taken is None:
            return  # gone (answered already) or not ours to read
        if taken.owner_uid != self.root_owner[0]:
            # Only the phone's root may mount; a file shell wrote gets no answer at all.
            log.warning("%s: mount request by host uid %d ignored", self.ctl, taken.owner_uid)
            return
        code = self._mount(taken.body, init_pid)
        answer = request.name.removeprefix(MOUNT_REQUEST_PREFIX)
        ctlfiles.write_json(
            self.ctl, ctlfiles.shared(f"{MOUNT_ANSWER_PREFIX}{answer}"), {"errno": code}, mode=0o644
        )

    def _mount(self, body: object, init_pid: int) -> int:
        if not isinstance(body, dict) or not all(
            isinstance(body.get(k), str) for k in ("device", "options", "dir")
        ):
            return errno.EINVAL
        hs = hierarchies(self.trees)
        chosen = choose_hierarchy(body["options"], hs)
        if isinstance(chosen, int):
            return chosen
        refused = refused_dir(body["dir"])
        if refused is not None:
            return refused
        failed = _vphone_bind(init_pid, "--view", chosen.phone_dir, body["dir"])
        if failed is not None:
            log.warning("%s: mount of %s failed: %s", self.ctl, body["dir"], failed)
            return errno.EINVAL
        self._mounts = [m for m in self._mounts if m.mount_dir != body["dir"]]
        self._mounts.append(CgroupMount(body["device"] or "none", body["dir"], chosen.hid))
        self._write_table(hs)
        return 0

    # -- mkdir in the cpuset tree -------------------------------------------------------------------

    def add_group(self, name: str, cgroups: PhoneCgroups | None, init_pid: int) -> bool:
        """Make the new directory `name` (relative to /dev/cpuset) a cpuset group; False when it
        is not one (a name the host cgroup refuses)."""
        owner = self.root_owner if os.geteuid() == 0 else None
        for file, text in cpuset_files(CpusetGroup(name, ()), root=False, mems="").items():
            # Below the tree phone root owns, no link is followed (beneath.py).
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
            try:
                fd = beneath.open_file(self.trees.cpuset_dir, f"{name}/{file}", flags, 0o644)
            except FileExistsError:
                continue  # the phone wrote it first: the caller judges that write
            try:
                os.write(fd, text.encode())
                os.fchmod(fd, 0o644)
                if owner is not None:
                    os.fchown(fd, *owner)
            finally:
                os.close(fd)
        if cgroups is None:
            return True  # no host cgroups: bookkeeping only, as /dev/stune
        host_group = f"{CPU_GROUP}/{name}"
        try:
            cgroups.add_group(host_group)
            cgroups.delegate_membership([host_group], self.root_owner)
        except OSError as exc:
            log.warning("%s: cannot make host cgroup %s: %s", self.ctl, host_group, exc)
            return False
        phone_dir = f"{CPUSET_PHONE_DIR}/{name}"
        for host, file in (
            (cgroups.threads_file(host_group), "tasks"),
            (cgroups.procs_file(host_group), "cgroup.procs"),
        ):
            failed = _vphone_bind(init_pid, "--host-file", str(host), f"{phone_dir}/{file}")
            if failed is not None:
                log.warning("%s: cannot bind %s: %s", self.ctl, file, failed)
                return False
        return True


def _vphone_bind(init_pid: int, kind: str, source: str, phone_dir: str) -> str | None:
    """Run vphone-exec bind; None when done, else its one-line error."""
    argv = [str(native_binary("vphone-exec")), "bind", "--pid", str(init_pid), kind, source, phone_dir]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BIND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else done.stderr.strip()
