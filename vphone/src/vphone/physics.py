"""The physics of one phone: an asyncio task (~10 Hz) that measures what really runs on the phone
and drives its sysfs nodes, its clocks and heat, its CPU budget, /proc/meminfo, the battery
state, `dumpsys thermalservice` and the ground-truth log.

Per tick: CPU time of the phone's processes (procscan) -> GPU busy (PoCL worker threads, divided
by wall time x gpu cores) and CPU busy cores (everything else) -> power (power.py) -> die
temperature (thermal.py) -> step_wise caps and the frequencies the governors pick (socmodel.py)
-> CFS quotas of the phone's cgroups (cgroup.py), so work really runs at the clocks shown ->
battery (battery.py) -> nodes in the profile's conventions. Adreno's gpubusy is published per
~1 s window; current_now only at the fuel-gauge interval. No random numbers anywhere.

Between ticks, writes are events: root writing a clock node, a /dev/cpuset group's `cpus`, or
the tools' power-HAL flags (`cmd power`, `cmd thermalservice`) or power state (`input keyevent`,
`svc power`) wakes `on_write` (filewatch.py),
which judges the write like the kernel (clocks.py) and applies it at once. On rooted phones the
clock nodes are served over FUSE where the host allows it (fusenodes.py): a write is judged in
the write call itself, whose errno is the kernel's (EINVAL...), on the FUSE thread, under the
physics lock that the loop's ticks and events hold too. Elsewhere they are plain files whose
writes inotify reports after the writer closed them (a refused one is reverted, `kmsg` says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vphone import affinity, beneath, cgroupfs, ctlfiles, daemoncpu, keepwarm
from vphone.battery import BatteryState, battery_current_ma, step_battery, voltage_mv
from vphone.cgmounts import MOUNT_REQUEST_PREFIX, CgroupMounter
from vphone.cgroup import GPU_GROUP, SYSTEM_USED_FRACTION, PhoneCgroups
from vphone.clocknodes import ClockNodes, ClockReadings
from vphone.clocks import Knob
from vphone.cpuinfo import cpuinfo_text
from vphone.cpusets import CgroupTrees, format_cpulist, parse_cpulist
from vphone.filewatch import IN_CLOSE_WRITE, IN_CREATE, IN_DELETE, IN_MOVED_TO, FileWatch
from vphone.fusenodes import (
    FuseUnavailable,
    NodeServer,
    ServedNode,
    mount_in_phone,
    node_name,
    phone_path,
    serve_in_phone,
)
from vphone.groundtruth import GroundTruthLog, TruthRow
from vphone.layout import SHELL_UID
from vphone.nodemirror import NodeMirror
from vphone.nodes import RW_MODE, NodeFiles, Telemetry, TelemetryNodes, current_now_raw, write_node
from vphone.power import power_mw
from vphone.powerhal import PowerHal
from vphone.procscan import ProcScanner
from vphone.profile import THERMALSERVICE_MIN_SDK, ChargingEffect, HintTrigger, Profile, SensorType
from vphone.sandbox import Sandbox, StateLayout
from vphone.screen import PowerInputs, screen_on_now, timeout_ms_of
from vphone.socmodel import SocModel
from vphone.socspeed import SpeedPlan, legacy_plan
from vphone.thermal import step_temperature_c, zone_temp_c
from vphone.thermalservice import dump_thermalservice

log = logging.getLogger(__name__)

TICK_S = 0.1
# A group below full speed (a lowered clock, a cpuset of slower cores) whose CFS quota held its
# work back keeps the host's CPUs warm (keepwarm.py) this long after its last throttled period:
# no spinner start and stop per tick, none while the phone rests.
SLOWED_SPEED = 0.999
KEEP_WARM_HOLD_NS = 2_000_000_000
GPU_WINDOW_NS = 1_000_000_000  # kgsl closes a gpubusy window once its total passes 1 s
SLOW_EVERY_TICKS = 10  # battery state for dumpsys, meminfo, screen state: ~1 Hz
# /proc/meminfo: the phone's RAM, of which Android itself uses a fixed share (SYSTEM_USED_FRACTION,
# cgroup.py: the rest is the phone's memory limit) and caches another.
CACHED_FRACTION = 0.25
# "0": serve the clock nodes as plain files watched by inotify even where FUSE works (to compare
# the two in benches, or to test the fallback).
CLOCK_FUSE_ENV = "FARM_VIRTUAL_CLOCK_FUSE"
MEMINFO = "/proc/meminfo"
ERRNO_NAMES = {errno.EINVAL: "EINVAL", errno.EBUSY: "EBUSY", errno.ENODEV: "ENODEV"}


def tick_delay_s(now_s: float) -> float:
    """Sleep until the next multiple of TICK_S at least half a tick away: every phone of the
    daemon then ticks on the same timer boundary, one wake-up of the event loop for all of them
    instead of one each, and a tick stays ~TICK_S long."""
    delay = TICK_S - now_s % TICK_S
    return delay + TICK_S if delay < TICK_S / 2 else delay


@dataclass(frozen=True)
class Sample:
    """One tick's measured load."""

    gpu_busy: float
    cpu_busy_cores: float
    rss_kb: int
    demand_threads: float = 0.0  # threads (PoCL's aside) that wanted a core, see procscan


def meminfo_text(ram_mb: int, phone_rss_kb: int) -> str:
    """A /proc/meminfo scaled to the profile's RAM; used memory grows with the phone's real RSS."""
    total = ram_mb * 1024
    cached = int(total * CACHED_FRACTION)
    used = int(total * SYSTEM_USED_FRACTION) + phone_rss_kb
    free = max(int(total * 0.02), total - used - cached)
    available = free + int(cached * 0.8)
    swap = total // 2
    rows = [
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", available),
        ("Buffers", total // 200),
        ("Cached", cached),
        ("SwapCached", 0),
        ("Active", used // 2),
        ("Inactive", cached),
        ("SwapTotal", swap),
        ("SwapFree", swap),
        ("Dirty", 0),
        ("AnonPages", phone_rss_kb),
        ("Mapped", cached // 4),
        ("Shmem", total // 100),
    ]
    return "".join(f"{k + ':':<16}{v:>8} kB\n" for k, v in rows)


class Physics:
    """Owns the telemetry files of one phone. `prepare` lays them out; `start`/`stop` the task."""

    def __init__(
        self,
        profile: Profile,
        layout: StateLayout,
        sandbox: Sandbox,
        *,
        cgroups: PhoneCgroups | None = None,
        cgroup_trees: CgroupTrees | None = None,
        root_owner: tuple[int, int] | None = None,
        on_reboot_request: Callable[[], None] | None = None,
    ) -> None:
        self.profile = profile
        self.layout = layout
        self.sandbox = sandbox
        self.cgroups = cgroups
        self.trees = cgroup_trees
        self.mounter = (
            None if cgroup_trees is None else CgroupMounter(layout.ctl, cgroup_trees, root_owner or (0, 0))
        )
        self.affinity = affinity.AffinityServer(layout.ctl, (root_owner or (0, 0))[0])
        sandbox.affinity_calls = _AffinityCalls(self)  # the programs' own syscalls
        self.files = NodeFiles(layout.sys, root_owner if profile.rooted else None)
        self.nodes = TelemetryNodes(profile, self.files)
        # Host cores per part of the phone (socspeed.py); the world sets it before `prepare`.
        self.plan: SpeedPlan = legacy_plan(profile)
        self.model = SocModel(profile, self.plan)
        self.hal = PowerHal(profile)
        self.clock_nodes = ClockNodes(profile, self.model.soc, self.files, self.model.devices)
        self.on_reboot_request = on_reboot_request
        self.log = GroundTruthLog(layout.ground_truth)
        self._task: asyncio.Task[None] | None = None
        self._scanner: ProcScanner | None = None
        self._watch = FileWatch()
        self._fused: NodeServer | None = None  # clock nodes + charging switch over FUSE, while it runs
        self._shown: NodeMirror | None = None  # the nodes that change by themselves, likewise
        self._cgfs: cgroupfs.CgroupFs | None = None  # the cgroup trees over FUSE, likewise
        self._lock = threading.RLock()  # the model and nodes: the loop's ticks/events, FUSE writes
        # A phone that has been on for a while: at the steady temperature of idle with screen on.
        idle_mw = power_mw(profile.power, 0.0, 0.0, screen_on=True)
        self.temp_c = profile.thermal.ambient_c + idle_mw / 1000.0 * profile.thermal.r_c_per_w
        self.model.reset_heat(self.temp_c)
        self.battery = BatteryState(float(profile.battery.initial_level), charging=True, current_ma=0.0)
        self.last_sample = Sample(0.0, 0.0, 0)
        self.last_power_mw = 0.0
        self._win_busy_ns = 0
        self._win_total_ns = 0
        self._gpubusy = (0, 0)
        self._gauge_at_ns = 0
        self._current_raw = 0
        self._screen_on = True
        self._boot_ns = time.monotonic_ns()  # the last user activity before any input event
        self._tick_count = 0
        self._quotas: dict[str, float] = {}
        self._quota_speeds: dict[str, float] = {}  # each group's clock speed (stretches its period)
        self._keeps_warm = False  # holds a reference to keepwarm.SPINNERS
        self._throttles: dict[str, int] = {}  # slowed group -> cpu.stat nr_throttled, last read
        self._warm_until_ns = 0
        # What the daemon spends on this phone (vphone.daemoncpu); taken from the task context
        # the phone's server starts the world in, None outside a daemon.
        self.cpu_account: daemoncpu.CpuAccount | None = None
        self._gpu_tids: set[int] = set()
        self._cpuset_cpus: dict[str, tuple[int, ...]] = {}
        self._pinned_cpus: dict[str, tuple[int, ...]] = {}  # taskset's groups (affinity.py)
        self._thermal_override: int | None = None
        self._thermal_text: str | None = None
        self._battery_state: dict[str, object] | None = None  # last written, to skip unchanged
        self._meminfo_text: str | None = None
        self._speed_key: object = None
        self._speed = (1.0, 1.0)

    # -- lifecycle --------------------------------------------------------------------------------

    def prepare(self) -> None:
        """(Re)create the /sys tree, /proc/meminfo and /proc/cpuinfo, reset the clocks and heat;
        before the sandbox starts (the world lays out the cgroup trees first)."""
        shutil.rmtree(self.layout.sys, ignore_errors=True)
        self.files.forget()
        self._boot_ns = time.monotonic_ns()
        bat = self.profile.battery
        idle_mw = power_mw(self.profile.power, 0.0, 0.0, self._screen_on)
        current = battery_current_ma(bat, self.battery.level_pct, idle_mw, self.battery.charging)
        self._current_raw = current_now_raw(self.profile, current)
        self._gauge_at_ns = time.monotonic_ns()
        self.model = SocModel(self.profile, self.plan)
        self.model.reset_heat(self.temp_c)
        self.hal = PowerHal(self.profile)
        self.clock_nodes = ClockNodes(self.profile, self.model.soc, self.files, self.model.devices)
        self.nodes.create(self._telemetry())
        self.clock_nodes.create(self.model.state, self.model.readings(self.temp_c))
        self.nodes.hide_unreadable()
        self._meminfo_text = self._battery_state = None
        self._write_meminfo(0)
        host_cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        write_node(self.layout.cpuinfo, cpuinfo_text(self.profile, host_cpuinfo))
        self._write_battery_state()
        if self.trees is not None:
            self._cpuset_cpus = {g.name: g.cpus for g in self.trees.groups()}
        self._pinned_cpus = {}
        if self.mounter is not None:
            self.mounter.boot(self.layout.proc_cgroups)
        self._thermal_override = None
        self._write_thermalservice()
        self._apply_quotas()

    async def start(self) -> None:
        self.cpu_account = daemoncpu.current()
        self._scanner = ProcScanner(self.sandbox.pidns, candidates=self._cgroup_pids)
        self._scanner.scan(time.monotonic(), 0, rss=False)
        self.log.open()
        self._fused = await self._serve_clock_nodes()
        self._shown = await self._serve_changing_nodes()
        self._cgfs = await self._serve_cgroup_trees()
        self._start_watch()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"physics-{self.sandbox.serial}"
        )

    def _keep_warm(self, wanted: bool) -> None:
        """Keep the host's CPUs from halting while work of this phone is held back at a slowed
        speed (keepwarm.py: a throttled gap on a halted VM CPU costs the work more the longer
        it is)."""
        if wanted and not self._keeps_warm:
            keepwarm.SPINNERS.acquire()
        elif not wanted and self._keeps_warm:
            keepwarm.SPINNERS.release()
        self._keeps_warm = wanted

    def _keep_warm_for(self, speeds: dict[str, float]) -> None:
        """Warm while a slowed group was throttled within KEEP_WARM_HOLD_NS."""
        if self.cgroups is None:
            return
        counts: dict[str, int] = {}
        for group, speed in speeds.items():
            if speed < SLOWED_SPEED:
                with contextlib.suppress(OSError):  # a group just made or removed
                    counts[group] = self.cgroups.cpu_stat(group).nr_throttled
        now_ns = time.monotonic_ns()
        if keepwarm.throttled_since(self._throttles, counts):
            self._warm_until_ns = now_ns + KEEP_WARM_HOLD_NS
        self._throttles = counts
        self._keep_warm(now_ns < self._warm_until_ns)

    async def stop(self) -> None:
        self._keep_warm(False)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._watch.close()
        self._watch = FileWatch()
        self.files.on_written = None
        for server in (self._fused, self._shown, self._cgfs):
            if server is not None:
                server.close()
        self._fused = self._shown = self._cgfs = None
        self.log.close()

    async def _serve_clock_nodes(self) -> NodeServer | None:
        """The clock nodes and the charging switch root may write, over FUSE, each write(2)
        judged as the kernel's store judges it (None: plain files and inotify instead)."""
        owner = self.files.root_owner
        charging = self.nodes.charging_rel()
        paths = (*self.clock_nodes.writable_paths(), *((charging,) if charging else ()))
        if not self.profile.rooted or owner is None or not paths:
            return None
        if os.environ.get(CLOCK_FUSE_ENV, "1") == "0":
            log.info(
                "%s: clock nodes are plain files watched by inotify (%s=0)",
                self.sandbox.serial,
                CLOCK_FUSE_ENV,
            )
            return None
        nodes = tuple(ServedNode(rel, RW_MODE, *owner) for rel in paths)
        try:
            server = await serve_in_phone(
                nodes,
                lambda rel: (self.files.last(rel) or "").encode(),
                self._fused_write,
                mountpoint=self.layout.root / "clocknodes.fuse",
                init_pid=self.sandbox.init_pid,
            )
        except FuseUnavailable as exc:
            log.info("%s: clock nodes are plain files watched by inotify (%s)", self.sandbox.serial, exc)
            return None
        log.info(
            "%s: clock nodes served over FUSE (%d nodes; a refused write fails)",
            self.sandbox.serial,
            len(nodes),
        )
        return server

    async def _serve_changing_nodes(self) -> NodeMirror | None:
        """The nodes whose values change by themselves over FUSE, each read a snapshot of one
        value (vphone.nodemirror says why). None: plain files (no FUSE here, or
        CLOCK_FUSE_ENV=0), where a read between pwrite and ftruncate mixes two values."""
        if os.environ.get(CLOCK_FUSE_ENV, "1") == "0":
            return None
        served = set(self.clock_nodes.writable_paths()) if self._fused is not None else set()
        if self._fused is not None and (charging := self.nodes.charging_rel()) is not None:
            served.add(charging)
        changing = [*self.nodes.dynamic_files(self._telemetry())]
        changing += self.clock_nodes.render(self.model.state, self.model.readings(self.temp_c))
        nodes, texts = [], {}
        for rel in dict.fromkeys(changing):
            if rel in served:
                continue
            try:
                fd = beneath.open_file(self.files.root, rel, os.O_PATH)
            except OSError:
                continue  # not laid out (a node that exists only in some states)
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            nodes.append(ServedNode(rel, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid))
            texts[rel] = self.files.last(rel) or ""
        st = os.stat(self.layout.meminfo)
        nodes.append(ServedNode(MEMINFO, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid))
        texts[MEMINFO] = self._meminfo_text or ""
        mirror = NodeMirror(tuple(nodes), texts)
        binds = [(node_name(i), phone_path(node.rel)) for i, node in enumerate(nodes)]
        self.files.on_written = mirror.update  # from now on: no write between texts and binds
        try:
            await mount_in_phone(
                mirror, binds, mountpoint=self.layout.root / "nodes.fuse", init_pid=self.sandbox.init_pid
            )
        except FuseUnavailable as exc:
            self.files.on_written = None
            log.info("%s: changing nodes are plain files (%s)", self.sandbox.serial, exc)
            return None
        serial = self.sandbox.serial
        log.info("%s: %d changing nodes served over FUSE (reads are snapshots)", serial, len(nodes))
        return mirror

    async def _serve_cgroup_trees(self) -> cgroupfs.CgroupFs | None:
        """Root's cgroup trees with cgroupfs semantics over FUSE (cgroupfs.py); None: the plain
        trees, whose writes inotify reports (cgmounts.py says what they lack)."""
        owner = self.files.root_owner
        if not self.profile.rooted or owner is None or self.trees is None:
            return None
        serial = self.sandbox.serial
        if os.environ.get(cgroupfs.CGROUP_FUSE_ENV, "1") == "0":
            log.info("%s: cgroup trees are plain directories (%s=0)", serial, cgroupfs.CGROUP_FUSE_ENV)
            return None
        try:
            server = await cgroupfs.serve_in_phone(
                self.trees,
                self.cgroups,
                pidns=self.sandbox.pidns,
                init_pid=self.sandbox.init_pid,
                owners=cgroupfs.Owners(owner[0], self.sandbox.host_uid(cgroupfs.SYSTEM_GID)),
                root_uid=owner[0],
                on_cpus=self._cpuset_changed,
                lock=self._lock,
                mountpoint=self.layout.root / "cgroupfs.fuse",
            )
        except FuseUnavailable as exc:
            log.info("%s: cgroup trees are plain directories (%s)", serial, exc)
            return None
        log.info("%s: cgroup trees served over FUSE (cgroupfs semantics)", serial)
        return server

    def _cpuset_changed(self, name: str, cpus: tuple[int, ...] | None) -> None:
        """A cpuset group's cpus over FUSE (None: the group was removed); under self._lock."""
        if cpus is None:
            self._cpuset_cpus.pop(name, None)
        else:
            self._cpuset_cpus[name] = cpus
        self._apply_quotas()

    def _fused_write(self, rel: str, data: bytes) -> int | None:
        """Root wrote a FUSE-served clock node (on the FUSE thread): the kernel's judgement, and
        the value in force before write(2) returns. Its CPU is the phone's (vphone.daemoncpu)."""
        return daemoncpu.charge_thread(self.cpu_account, lambda: self._judge_fused_write(rel, data))

    def _judge_fused_write(self, rel: str, data: bytes) -> int | None:
        if rel == self.nodes.charging_rel():
            with self._lock:
                if self.nodes.store_charging_node(data):
                    return None
            self._kmsg(f"power_supply: {rel}: {data!r} is not a number (EINVAL); write refused")
            return errno.EINVAL
        knob = self.clock_nodes.knob_at(rel)
        if knob is None:
            return errno.EACCES
        with self._lock:
            result = self.model.write(knob[0], knob[1], data.decode("utf-8", errors="replace"))
            if result.error is not None:
                self._kmsg(f"{result.message} ({ERRNO_NAMES.get(result.error, result.error)}); write refused")
                return result.error
            self._refresh_clocks()
        return None

    def _start_watch(self) -> None:
        """Watch what the phone may write: root's clock nodes and cpusets, the tools' HAL flags."""
        self._watch.watch(self.layout.ctl / ctlfiles.SHARED, IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE)
        if self.profile.rooted:
            if self._fused is None:
                for rel in self.clock_nodes.writable_paths():
                    self._watch.watch(self.layout.sys / rel)
            if self.trees is not None and self._cgfs is None:
                for group in self.trees.groups():
                    self._watch_group(group.name)
        self._watch.start(self.on_write)

    def _watch_group(self, name: str) -> None:
        """A cpuset group's `cpus` (writes) and its directory (groups made inside it)."""
        assert self.trees is not None
        self._watch.watch(self.trees.group_dir(name) / "cpus")
        self._watch.watch(self.trees.group_dir(name), IN_CREATE)

    def settle(self) -> None:
        """Handle what the phone wrote so far now (a command has ended): the next command sees
        the answer, as if the kernel had judged the write during the call."""
        self._watch.settle()

    async def _run(self) -> None:
        last_ns = time.monotonic_ns()
        while True:
            await asyncio.sleep(tick_delay_s(time.monotonic()))
            now_ns = time.monotonic_ns()
            try:
                with self._lock:
                    self.tick(now_ns, now_ns - last_ns)
            except OSError as exc:
                # A vanished process or a state file mid-replace must not end the phone's physics.
                log.warning("%s: physics tick failed: %s", self.sandbox.serial, exc)
            last_ns = now_ns

    # -- writes from inside the phone -----------------------------------------------------------

    def on_write(self, path: Path) -> None:
        """A file the phone may write was written: judge it and answer (see the module doc)."""
        with self._lock:
            # Work for the phone on the watch's thread: charged to it (vphone.daemoncpu).
            daemoncpu.charge_thread(self.cpu_account, lambda: self._on_write(path))

    def _on_write(self, path: Path) -> None:
        try:
            if path.parent == self.layout.ctl / ctlfiles.SHARED:
                rel = ctlfiles.shared(path.name)
                if rel in ctlfiles.HAL_FLAGS:
                    self._hal_flags()
                elif rel == ctlfiles.POWER_HINT:
                    self._power_hint()
                elif rel == ctlfiles.POWER:
                    # `input keyevent` or `svc power`: in force now, not at the next state tick
                    # (PowerManagerService wakes the display before the key's command returns).
                    self._follow_screen(time.monotonic_ns())
                elif path.name.startswith(MOUNT_REQUEST_PREFIX) and self.mounter is not None:
                    self.mounter.serve(path, self.sandbox.init_pid)
                elif path.name.startswith(affinity.REQUEST_PREFIX):
                    self._taskset(path)
            elif self.trees is not None and self.trees.cpuset_dir in path.parents:
                if path.name == "cpus":
                    self._cpuset_write(path)
                elif path.is_dir() and not path.is_symlink():  # a link is no group (never followed)
                    self._new_cpuset_group(path)
            else:
                self._clock_write(path)
        except OSError as exc:
            log.warning("%s: handling a write to %s failed: %s", self.sandbox.serial, path, exc)

    def _clock_write(self, path: Path) -> None:
        """The phone closed a clock node it wrote: judge the write as the kernel would (refused
        ones leave a kernel-log line) and rewrite the node with what is in force (read-back)."""
        rel = str(path.relative_to(self.layout.sys))
        knob = self.clock_nodes.knob_at(rel)
        if knob is None:
            return
        text = beneath.read_text(self.layout.sys, rel)
        if not text or text == self.files.last(rel):
            return  # our own rewrite echoing back, or a newer write under way (its event follows)
        result = self.model.write(knob[0], knob[1], text)
        if result.error is not None:
            self._kmsg(f"{result.message} ({ERRNO_NAMES.get(result.error, result.error)}); write refused")
        self._write_clock_nodes(self.model.readings(self.temp_c), taken={rel: text})
        self._apply_quotas()

    def _taskset(self, request: Path) -> None:
        """The phone's taskset asked to pin threads to phone CPUs (affinity.py)."""
        self.affinity.serve(
            request, self.cgroups, self.members(), self.online_cpus(), self.pinned, self._cpuset_cpus
        )

    def online_cpus(self) -> tuple[int, ...]:
        return tuple(c for c, up in enumerate(self.model.state.online) if up)

    def members(self) -> list[int]:
        return self._scanner.members() if self._scanner is not None else []

    def pinned(self, cpus: tuple[int, ...]) -> None:
        # Every online CPU is no pin (affinity._unpin): no affinity group exists for it, and a
        # quota for one would fail every later quota write of the phone (ENOENT).
        if set(cpus) >= set(self.online_cpus()):
            return
        self._pinned_cpus[affinity.group_of(cpus).removeprefix("cpu/")] = cpus
        self._apply_quotas()

    def _new_cpuset_group(self, path: Path) -> None:
        """Phone root made a directory in /dev/cpuset (or a view of it): a new group."""
        assert self.trees is not None and self.mounter is not None
        name = str(path.relative_to(self.trees.cpuset_dir))
        if name in self._cpuset_cpus or name.rpartition("/")[0] not in self._cpuset_cpus:
            return  # known, or inside a directory that is no group
        if name.startswith(affinity.GROUP_PREFIX):
            return  # taskset's host cgroups have such names: this one stays a plain directory
        if not self.mounter.add_group(name, self.cgroups, self.sandbox.init_pid):
            return
        self._cpuset_cpus[name] = ()
        self._watch_group(name)
        if beneath.read_text(self.trees.cpuset_dir, f"{name}/cpus").strip():
            self._cpuset_write(path / "cpus")  # written before the group was laid out
        self._apply_quotas()

    def _cpuset_write(self, path: Path) -> None:
        assert self.trees is not None
        rel_group = path.parent.relative_to(self.trees.cpuset_dir)
        name = "" if str(rel_group) == "." else str(rel_group)
        if name not in self._cpuset_cpus:
            return
        tree = self.trees.cpuset_dir
        text = beneath.read_text(tree, str(path.relative_to(tree)))
        shown = format_cpulist(self._cpuset_cpus[name]) + "\n"
        if text == shown or not text.strip():
            return  # our own rewrite, or a write under way (O_TRUNC): its close comes next
        cpus = parse_cpulist(text, self.model.soc.ncpu)
        parent = (
            tuple(range(self.model.soc.ncpu))
            if not name
            else self._cpuset_cpus.get(name.rpartition("/")[0], ())
        )
        if cpus is None or not set(cpus) <= set(parent):
            self._kmsg(f"cpuset: {name or '/'}: cpus {text.strip()!r} invalid or outside the parent (EINVAL)")
        else:
            self._cpuset_cpus[name] = cpus
            shown = format_cpulist(cpus) + "\n"
            write_node(path.parent / "effective_cpus", shown, beneath=tree)
        write_node(path, shown, beneath=tree)
        self._apply_quotas()

    def _hal_flags(self) -> None:
        ctl = self.layout.ctl
        fixed = (ctlfiles.read_text(ctl, ctlfiles.FIXED_PERFORMANCE) or "").strip() == "1"
        if fixed != self.model.state.fixed_performance:  # the same request again: no write
            self.model.set_fixed_performance(fixed)  # the GPU's fixed clock
            for knob, index, text in self.hal.fixed_performance(fixed):  # the CPU limits
                self.model.write(knob, index, text)
            self._refresh_clocks()
        # After the nodes: `cmd power` returns once this shows what it asked for.
        in_force = "1\n" if self.model.state.fixed_performance else "0\n"
        if ctlfiles.read_text(ctl, ctlfiles.FIXED_PERFORMANCE_APPLIED) != in_force:
            ctlfiles.write_text(ctl, ctlfiles.FIXED_PERFORMANCE_APPLIED, in_force)
        override = (ctlfiles.read_text(ctl, ctlfiles.THERMAL_OVERRIDE) or "").strip()
        self._thermal_override = int(override) if override.lstrip("-").isdigit() else None
        self._write_thermalservice()

    def _power_hint(self) -> None:
        """The framework sent the power HAL a boost (vphone.powerhal): its node writes, now."""
        words = (ctlfiles.read_text(self.layout.ctl, ctlfiles.POWER_HINT) or "").split()
        if words[:1] == [HintTrigger.INTERACTION.value]:
            self._hal_writes(self.hal.start(HintTrigger.INTERACTION, time.monotonic_ns()))
        elif words[:1] == [HintTrigger.IDLE.value] and words[1:2] in (["on"], ["off"]):
            self._hal_writes(self.hal.mode(HintTrigger.IDLE, words[1] == "on"))

    def _follow_screen(self, now_ns: int) -> None:
        """The screen as it is now (its power drawn from then on) and the power HAL's screen-off
        mode with it (the HAL writes only what changed)."""
        self._screen_on = self._screen(now_ns)
        self._hal_writes(self.hal.screen(self._screen_on))

    def _hal_writes(self, writes: list[tuple[Knob, int, str]]) -> None:
        """The power HAL writes cpufreq nodes as root (judged like any write), then they show."""
        if not writes:
            return
        for knob, index, text in writes:
            self.model.write(knob, index, text)
        self._refresh_clocks()

    def _refresh_clocks(self) -> None:
        """Re-render the clock nodes (read-back shows what is in force), re-apply the quotas."""
        self._write_clock_nodes(self.model.readings(self.temp_c))
        self._apply_quotas()

    def _write_clock_nodes(self, readings: ClockReadings, taken: dict[str, str] | None = None) -> None:
        """Render the clock nodes. A node the phone may write is only overwritten while it still
        holds what we last saw in it (`taken`: what we just read): a write that lands meanwhile
        is left for its own event."""
        taken = taken or {}
        files = self.clock_nodes.render(self.model.state, readings)
        writable = {rel: files.pop(rel) for rel in self.clock_nodes.writable_paths()}
        self.files.write_changed(files)
        for rel, text in writable.items():
            if rel in taken or text != self.files.last(rel):
                self.files.write_guarded(rel, text, expected=taken.get(rel, self.files.last(rel)))

    def _apply_quotas(self) -> None:
        # Steps of 0.05 threads: the quota follows the demand without a cgroup write per tick.
        threads = math.ceil(self.last_sample.demand_threads * 20 - 0.5) / 20
        planned = self.model.quotas({**self._cpuset_cpus, **self._pinned_cpus}, threads)
        quotas = planned.cores
        self._keep_warm_for(planned.speeds)
        if self.cpu_account is not None:
            quotas = daemoncpu.less_daemon_cpu(quotas, self.cpu_account.rate_cores())
        if self.cgroups is None or (quotas == self._quotas and planned.speeds == self._quota_speeds):
            self._quotas, self._quota_speeds = quotas, planned.speeds
            return
        try:
            self.cgroups.set_quotas(quotas, planned.speeds)
        except OSError as exc:
            log.warning("%s: cannot set CPU quotas: %s", self.sandbox.serial, exc)
            return
        self._quotas, self._quota_speeds = quotas, planned.speeds

    def _kmsg(self, message: str) -> None:
        stamp = time.monotonic()
        ctlfiles.append_kmsg(self.layout.ctl, f"<3>[{stamp:12.6f}] {message}")
        log.info("%s: %s", self.sandbox.serial, message)

    # -- one step ---------------------------------------------------------------------------------

    def _cgroup_pids(self) -> list[int] | None:
        """Where to look for the phone's processes: its cgroup's (None: all of /proc)."""
        return None if self.cgroups is None else self.cgroups.member_pids()

    def measure(self, dt_ns: int, *, rss: bool = True) -> Sample:
        """The load since the last tick; `rss`: also the phone's RSS (only /proc/meminfo, ~1 Hz,
        needs it)."""
        assert self._scanner is not None
        ncpu = os.cpu_count() or 1
        cpu = self._scanner.scan(time.monotonic(), dt_ns * ncpu, dt_ns, rss=rss)
        cores = float(self.profile.gpu.cores if self.profile.gpu else 1)
        if self.plan.slowdown is not None:  # the GPU's capacity is its quota at this clock
            cores = max(1e-6, self._quotas.get("gpu", self.plan.gpu_cores))
        gpu_busy = min(1.0, cpu.pocl_ns / (dt_ns * cores)) if dt_ns > 0 else 0.0
        # Busy phone cores: a phone core is plan.core_cores host cores (slow motion).
        cpu_busy = min(float(ncpu), cpu.other_ns / dt_ns) / self.plan.core_cores if dt_ns > 0 else 0.0
        self._place_gpu_threads(cpu.pocl_tids)
        return Sample(gpu_busy, cpu_busy, cpu.rss_kb, cpu.demand_threads)

    def _place_gpu_threads(self, tids: tuple[int, ...]) -> None:
        """PoCL's worker threads are the GPU: they run under the GPU's quota, not the CPU's."""
        if self.cgroups is None:
            return
        seen = set(tids)
        new = seen - self._gpu_tids
        if new:
            self.cgroups.move_threads(GPU_GROUP, sorted(new))
        self._gpu_tids = seen

    def tick(self, now_ns: int, dt_ns: int) -> None:
        p = self.profile
        dt_s = dt_ns / 1e9
        slow = self._tick_count % SLOW_EVERY_TICKS == 0
        self._tick_count += 1
        sample = self.measure(dt_ns, rss=slow)
        self.last_sample = sample
        self._hal_writes(self.hal.due(now_ns))
        charging = self.nodes.read_charging_node() != p.battery.charging_node_stop
        power = power_mw(p.power, sample.cpu_busy_cores, sample.gpu_busy, self._screen_on)
        self.last_power_mw = power
        self.temp_c = step_temperature_c(p.thermal, self.temp_c, power, dt_s)
        self.battery = step_battery(p.battery, self.battery, power, charging, dt_s)
        if slow:  # after the battery: the plug state the screen's hold reads is this tick's
            self._follow_screen(now_ns)
        self._win_busy_ns += int(sample.gpu_busy * dt_ns)
        self._win_total_ns += dt_ns
        if self._win_total_ns >= GPU_WINDOW_NS:
            self._gpubusy = (self._win_busy_ns // 1000, self._win_total_ns // 1000)
            self._win_busy_ns = self._win_total_ns = 0
        if now_ns - self._gauge_at_ns >= p.battery.fuel_gauge_interval_s * 1e9:
            self._current_raw = current_now_raw(p, self.battery.current_ma)
            self._gauge_at_ns = now_ns
        busy, total = self._gpubusy
        capacity = max(1e-6, self._quotas.get("cpu", p.cpu.budget_cores))
        readings = self.model.advance(
            now_ns, dt_ns, self.temp_c, sample.cpu_busy_cores / capacity, busy / total if total else 0.0
        )
        self.nodes.write(self._telemetry())
        self._write_clock_nodes(readings)
        self._apply_quotas()
        status = self.model.thermal_status(self.temp_c)
        cpu_speed, gpu_speed = self._speeds()
        if slow:
            self._write_battery_state()
            self._write_thermalservice()
            self._write_meminfo(sample.rss_kb)
            if beneath.exists(self.layout.ctl, ctlfiles.REBOOT_REQUEST) and self.on_reboot_request:
                self.on_reboot_request()
        self.log.write(
            TruthRow(
                t_ns=now_ns,
                power_mw=power,
                gpu_busy=sample.gpu_busy,
                cpu_busy_cores=sample.cpu_busy_cores,
                temp_c=self.temp_c,
                charging=charging,
                level_pct=self.battery.level_pct,
                current_ma=self.battery.current_ma,
                voltage_mv=voltage_mv(p.battery, self.battery.level_pct),
                screen_on=self._screen_on,
                cpu_speed=cpu_speed,
                gpu_speed=gpu_speed,
                cpu_quota_cores=self._quotas.get("cpu", 0.0) if self.cgroups else 0.0,
                gpu_quota_cores=self._quotas.get("gpu", 0.0) if self.cgroups else 0.0,
                thermal_status=status,
            )
        )

    def _speeds(self) -> tuple[float, float]:
        if self._speed_key != self.model.state:
            self._speed_key, self._speed = self.model.state, self.model.speeds()
        return self._speed

    def _telemetry(self) -> Telemetry:
        p = self.profile
        level = int(self.battery.level_pct)
        return Telemetry(
            gpu_busy_us=self._gpubusy[0],
            gpu_total_us=self._gpubusy[1],
            gpu_freq_hz=self.model.gpu_cur_hz,
            battery_temp_mc=round(self.battery_temp_c() * 1000),
            battery_level=level,
            battery_status=self._status(),
            voltage_uv=round(voltage_mv(p.battery, self.battery.level_pct) * 1000),
            current_raw=self._current_raw,
            charge_counter_uah=round(self.battery.level_pct / 100 * p.battery.capacity_mah * 1000),
            usb_online=self._usb_online(),
        )

    def _usb_online(self) -> bool:
        """The charger's USB input: offline while an input-suspend switch holds it (qcom smb5
        smblib_get_prop_usb_online reads 0 under the USER ICL vote input_suspend casts); a
        battery-idle switch keeps it."""
        suspended = not self.battery.charging and not self.battery.idle
        return not (suspended and self.profile.battery.charging_effect is ChargingEffect.INPUT_SUSPEND)

    def _screen(self, now_ns: int) -> bool:
        """The screen as PowerManagerService leaves it (vphone.screen): off once the user-activity
        timeout passed unless stay-on holds it while BatteryService sees USB power."""
        ctl = self.layout.ctl
        state = dict(ctlfiles.read_json(ctl, ctlfiles.POWER, {}))
        unplugged = bool(ctlfiles.read_json(ctl, ctlfiles.BATTERY_OVERRIDE, {}))
        system = ctlfiles.read_json(ctl, "settings/system.json", {})
        inputs = PowerInputs(
            screen_on=bool(state.get("screen_on", True)),
            activity_ns=int(state.get("activity_ns", self._boot_ns)),
            stay_on_mask=int(state.get("stay_on", 0)),
            timeout_ms=timeout_ms_of(system.get("screen_off_timeout")),
            usb_powered=self._usb_online() and not unplugged,
        )
        on = screen_on_now(inputs, now_ns)
        if on != inputs.screen_on:
            # The tools' folder is sticky: the file stays its writer's (the phone's shell or root),
            # so that their tools can still replace it.
            try:
                owner = os.stat(ctl / ctlfiles.POWER, follow_symlinks=False).st_uid
            except OSError:
                owner = self.sandbox.host_uid(SHELL_UID)
            ctlfiles.write_json(ctl, ctlfiles.POWER, {**state, "screen_on": on}, owner_uid=owner)
        return on

    def battery_temp_c(self) -> float:
        """The battery's thermistor: the profile's battery zone (cooler than the die), else T."""
        spec = self.profile.thermal
        zone = next((z for z in spec.zones if z.sensor is SensorType.BATTERY), None)
        return zone_temp_c(spec, zone, self.temp_c) if zone is not None else self.temp_c

    def _status(self) -> str:
        return self.battery.status()

    def _write_thermalservice(self) -> None:
        """`dumpsys thermalservice` (Android 10+), rewritten only when its text changes."""
        if self.profile.sdk < THERMALSERVICE_MIN_SDK:
            return
        text = dump_thermalservice(
            self.profile,
            self.temp_c,
            self.model.devices,
            self.model.cooling.device_steps,
            self._thermal_override,
        )
        if text != self._thermal_text:
            ctlfiles.write_text(self.layout.ctl, ctlfiles.THERMALSERVICE, text)
            self._thermal_text = text

    def _write_meminfo(self, rss_kb: int) -> None:
        text = meminfo_text(self.profile.ram_mb, rss_kb)
        if text != self._meminfo_text:
            write_node(self.layout.meminfo, text)
            self._meminfo_text = text
            if self._shown is not None:
                self._shown.update(MEMINFO, text)

    def _write_battery_state(self) -> None:
        """What BatteryService would read from the HAL, for `dumpsys battery` inside the phone."""
        codes = {"Charging": 2, "Discharging": 3, "Not charging": 4, "Full": 5}
        state = {
            "ac": False,
            "usb": self._usb_online(),
            "wireless": False,
            "dock": False,
            "max_charging_current_ua": 500000,
            "max_charging_voltage_uv": 5000000,
            "charge_counter_uah": round(
                self.battery.level_pct / 100 * self.profile.battery.capacity_mah * 1000
            ),
            "status": codes[self._status()],
            "health": 2,
            "present": True,
            "level": int(self.battery.level_pct),
            "scale": 100,
            "voltage_mv": round(voltage_mv(self.profile.battery, self.battery.level_pct)),
            "temperature_dc": round(self.battery_temp_c() * 10),
            "technology": "Li-ion",
        }
        if state != self._battery_state:
            ctlfiles.write_json(self.layout.ctl, ctlfiles.BATTERY_STATE, state)
            self._battery_state = state


class _AffinityCalls:
    """The answers to the phone's programs' own sched_setaffinity/getaffinity (on the listener
    thread of affinitynotify.py): the same judgement and groups as its taskset's."""

    def __init__(self, physics: Physics) -> None:
        self._physics = physics

    @property
    def ncpu(self) -> int:
        return self._physics.model.soc.ncpu

    def pidns(self) -> str | None:
        return self._physics.sandbox.current_pidns()

    def set_affinity(self, caller: affinity.PhoneThread, pid: int, mask: int) -> affinity.Verdict:
        p = self._physics
        with p._lock:
            return p.affinity.set_for_call(
                caller, pid, mask, p.cgroups, p.members, p.online_cpus(), p.pinned, p._cpuset_cpus
            )

    def get_affinity(self, caller: affinity.PhoneThread, pid: int) -> affinity.Verdict:
        p = self._physics
        with p._lock:
            return p.affinity.cpus_for_call(
                caller, pid, p.cgroups, p.members, p._cpuset_cpus, p.online_cpus()
            )
