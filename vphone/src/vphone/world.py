"""One virtual phone's world: sandbox + props + telemetry physics behind the PhoneWorld seam.

It also owns the phone's host cgroups (cgroup.py): created before the sandbox starts, joined by
every process of the phone (the sandbox's vphone-exec writes each one's pid into
`Sandbox.cgroup_files` before it enters the phone), removed after the phone's processes are gone.
Without usable cgroups (no cpu controller) the phone runs without a CPU budget and logs why.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from vphone import ctlfiles
from vphone.adb.link import PRESETS, LinkModel
from vphone.buildprops import build_props
from vphone.calibration import host_calibration, with_free_cores
from vphone.cgroup import (
    CPU_GROUP,
    CgroupsUnavailable,
    PhoneCgroups,
    host_memory_bytes,
    memory_limit_bytes,
    phone_group_name,
    read_host_cgroups,
)
from vphone.cpusets import CgroupTrees, CpusetGroup
from vphone.errors import ConfigError, EnvironmentProblem
from vphone.phone_api import PhoneWorld
from vphone.phonefiles import PhoneFiles
from vphone.physics import Physics
from vphone.profile import Profile
from vphone.profiles import load_profile
from vphone.sandbox import CTL_PHONE_DIR, PHONE_PATH, POCL_CACHE_PHONE_DIR, Sandbox
from vphone.socspeed import SpeedPlan, legacy_plan, plan_props, plan_speeds, soc_speeds_enabled

log = logging.getLogger(__name__)
STALE_PREFIX = ".stale-"  # trees of a previous boot, being deleted in the background

# Keys `set_property` from the adbd side may change (everything else is the profile's).
_ADBD_WRITABLE_PREFIXES = ("service.adb.", "persist.", "debug.", "sys.", "ctl.")


def default_cpuset_group(props: dict[str, str], groups: Iterable[CpusetGroup]) -> str:
    """The host group the phone's processes start in: init writes every service without a cpuset
    `writepid`/`task_profiles` of its own (adbd's adbd.rc has none, so every adb shell too) into
    the cpuset `ro.cpuset.default` names (AOSP system/core/init/README.md `writepid`, e.g.
    '/foreground'; init/service.cpp reads the property); unset or unknown: the top group."""
    name = props.get("ro.cpuset.default", "").strip("/")
    for group in groups:
        if name and group.name == name:
            return group.host_group
    return CPU_GROUP


class SandboxWorld:
    """A PhoneWorld backed by a bubblewrap sandbox and a physics task. No I/O until `start`."""

    def __init__(self, profile: Profile, serial: str, state_dir: Path, *, keep_data: bool = False) -> None:
        self.profile = profile
        self.serial = serial
        self.state_dir = state_dir
        self.sandbox = Sandbox(profile, serial, state_dir, keep_data=keep_data)
        self.cgroups: PhoneCgroups | None = None
        self.cgroup_trees = CgroupTrees(self.sandbox.layout.root / "devcg", profile)
        self.physics = Physics(
            profile,
            self.sandbox.layout,
            self.sandbox,
            cgroup_trees=self.cgroup_trees,
            root_owner=self.sandbox.owners.root,
            on_reboot_request=self._reboot_soon,
        )
        self.budget_note: str | None = None  # why CPU budgets are not enforced, when they are not
        self._adbd_root = False
        self._reboot_task: asyncio.Task[None] | None = None
        self._reboot_handler: Callable[[], None] | None = None
        self._reboot_pending = False

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.sandbox.running:
            return
        self.sandbox.prepare()
        self.physics.plan = await asyncio.get_running_loop().run_in_executor(None, self._speed_plan)
        ctl = self.sandbox.layout.ctl
        ctlfiles.reset_volatile(ctl)
        self._fix_ctl_owner()
        ctlfiles.write_json(ctl, ctlfiles.RO_PROPS, self._ro_props())
        # Flags made by rename (a link the phone's root left at the name is replaced, not followed:
        # touch() would create or touch the host file it names, as host root).
        self._set_flag(ctl, ctlfiles.ROOTED_FLAG, self.profile.rooted)
        if self.profile.rooted and self.profile.su_prompt_s > 0:
            ctlfiles.write_text(ctl, ctlfiles.SU_PROMPT_MS, f"{round(self.profile.su_prompt_s * 1000)}\n")
        else:
            ctlfiles.remove(ctl, ctlfiles.SU_PROMPT_MS)
        self._prepare_hal(ctl)
        # The old /sys and cgroup trees go aside (one rename each) and are deleted once the phone
        # is up: hundreds of small directories take a while to remove on some filesystems.
        for tree in (self.sandbox.layout.sys, self.cgroup_trees.root):
            if tree.exists():
                tree.rename(self.sandbox.layout.root / f"{STALE_PREFIX}{tree.name}-{time.monotonic_ns()}")
        self.cgroups = self._create_cgroups()
        self.physics.cgroups = self.cgroups
        self.cgroup_trees.create(self.sandbox.owners.root if self.profile.rooted else None)
        self.sandbox.cgroup_files = tuple(str(f) for f in self.cgroup_join_files())
        self.sandbox.enter_cgroup_files = tuple(str(f) for f in self.cgroup_join_files(for_commands=True))
        self.sandbox.extra_binds = tuple(self._binds())
        self.physics.prepare()
        self._reboot_pending = False
        try:
            await self.sandbox.start()
            await self.physics.start()
        except BaseException:
            await self.stop()
            raise
        loop = asyncio.get_running_loop()
        for stale in self.sandbox.layout.root.glob(f"{STALE_PREFIX}*"):
            loop.run_in_executor(None, functools.partial(shutil.rmtree, stale, ignore_errors=True))

    async def stop(self) -> None:
        await self._stop()
        await asyncio.get_running_loop().run_in_executor(None, self.sandbox.release)

    async def _stop(self) -> None:
        """What a reboot stops too: the phone's processes, its physics and cgroups."""
        await self.physics.stop()
        await self.sandbox.stop()
        if self.cgroups is not None:
            cgroups, self.cgroups = self.cgroups, None
            self.physics.cgroups = None
            try:
                await asyncio.get_running_loop().run_in_executor(None, cgroups.destroy)
            except OSError as exc:
                log.warning("%s: cgroups left behind: %s", self.serial, exc)

    # -- speeds -----------------------------------------------------------------------------------

    def _speed_plan(self) -> SpeedPlan:
        """The SoC's proportions on this host (socspeed.py), said in daemon.log; the profile's
        own budgets when it states no throughput or the host cannot be calibrated."""
        if self.profile.throughput is None or not soc_speeds_enabled(os.environ):
            return legacy_plan(self.profile)
        try:
            plan = plan_speeds(self.profile, with_free_cores(host_calibration()))
        except EnvironmentProblem as exc:
            log.warning("%s: the profile's own CPU budgets, no proportions: %s", self.serial, exc)
            return legacy_plan(self.profile)
        log.info(
            "%s: %s runs %.3gx slower than the real SoC: fastest core %.3g host cores, all cores "
            "%.3g, GPU %.3g",
            self.serial,
            self.profile.name,
            plan.slowdown,
            plan.core_cores,
            plan.cpu_cores,
            plan.gpu_cores,
        )
        for unheld in plan.unheld:
            log.warning("%s: %s", self.serial, unheld.line(self.profile.name))
        return plan

    # -- cgroups ----------------------------------------------------------------------------------

    def _create_cgroups(self) -> PhoneCgroups | None:
        try:
            cgroups = PhoneCgroups(read_host_cgroups(), phone_group_name(self.serial, self.state_dir))
            groups = self.cgroup_trees.groups()
            cgroups.create(
                weight_cores=self.physics.plan.host_cores,
                pids_max=self.profile.cgroups.pids_max,
                subgroups=tuple(g.name for g in groups if g.name),
                memory_max_bytes=memory_limit_bytes(self.profile.ram_mb, host_memory_bytes()),
            )
            if self.profile.rooted:  # phone root moves processes between its cpusets
                cgroups.delegate_membership([g.host_group for g in groups], self.sandbox.owners.root)
        except CgroupsUnavailable as exc:
            if self.budget_note is None:
                log.warning("%s: no CPU budget: %s", self.serial, exc)
            self.budget_note = str(exc)
            return None
        self.budget_note = None
        return cgroups

    def _binds(self) -> list[tuple[Path, str]]:
        """/dev/cpuset and /dev/stune|cpuctl; each cpuset's tasks/cgroup.procs are the host
        cgroup's own files when there are cgroups (cpusets.py says why)."""
        binds = self.cgroup_trees.mounts()
        if self.cgroups is not None:
            cg = self.cgroups
            host = {
                g.name: (cg.threads_file(g.host_group), cg.procs_file(g.host_group))
                for g in self.cgroup_trees.groups()
            }
            binds += self.cgroup_trees.membership_binds(host)
        return binds

    def cgroup_join_files(self, *, for_commands: bool = False) -> tuple[Path, ...]:
        """Host files every process of this phone joins before it enters (v2: cgroup.procs of
        the phone's cpu group; v1: that and the pids group's). `for_commands`: those of a command
        entering it (adb shell), whose cpu group is the phone's default cpuset. Empty without
        cgroups."""
        if self.cgroups is None:
            return ()
        if not for_commands:
            return self.cgroups.join_files()
        return self.cgroups.join_files(default_cpuset_group(self.profile.props, self.cgroup_trees.groups()))

    def _prepare_hal(self, ctl: Path) -> None:
        """Tell `cmd power` whether the profile's power HAL has fixed performance mode."""
        self._set_flag(
            ctl, ctlfiles.FIXED_PERFORMANCE_SUPPORTED, self.physics.model.soc.fixed_performance_supported
        )

    @staticmethod
    def _set_flag(ctl: Path, name: str, present: bool) -> None:
        if present:
            ctlfiles.write_text(ctl, name, "")
        else:
            ctlfiles.remove(ctl, name)

    async def reboot(self) -> None:
        await self._stop()
        self._adbd_root = False
        await self.start()

    def set_reboot_handler(self, handler: Callable[[], None] | None) -> None:
        """Optional hook for the daemon: called (on the world's loop) when a program inside the
        phone runs `reboot`. It should drop the ADB connections and call `reboot()`, as for the
        reboot: service. Without a handler the world reboots itself and connections stay."""
        self._reboot_handler = handler

    def _reboot_soon(self) -> None:
        if self._reboot_pending:
            return
        self._reboot_pending = True
        if self._reboot_handler is not None:
            self._reboot_handler()
        elif self._reboot_task is None or self._reboot_task.done():
            self._reboot_task = asyncio.get_running_loop().create_task(self.reboot())

    def _fix_ctl_owner(self) -> None:
        if os.geteuid() == 0:
            ctl = self.sandbox.layout.ctl
            for d in (ctl / ctlfiles.SET_PROPS, ctl / ctlfiles.PERSIST_PROPS):
                os.chown(d, *self.sandbox.owners.shell, follow_symlinks=False)

    def _ro_props(self) -> dict[str, str]:
        props = build_props(self.profile.props, self.serial)
        props.update(
            {
                "ro.serialno": self.serial,
                "ro.boot.serialno": self.serial,
                "ro.product.cpu.abi": "x86_64",
                "ro.product.cpu.abilist": "x86_64",
                "ro.product.cpu.abilist64": "x86_64",
                "ro.adb.secure": "1" if self.adb_secure else "0",
                "ro.secure": "0" if self.profile.rooted else "1",
                "ro.debuggable": "1" if self.profile.rooted else props.get("ro.debuggable", "0"),
                "ro.kernel.qemu": "0",
                "ro.farm.virtual": "1",
                "ro.farm.profile": self.profile.name,
                **plan_props(self.physics.plan),
                "ro.opengles.version": "196610",
                "sys.boot_completed": "1",
                "dev.bootcomplete": "1",
                "init.svc.adbd": "running",
                "service.adb.root": "0",
            }
        )
        return props

    # -- PhoneWorld --------------------------------------------------------------------------------

    @property
    def link(self) -> LinkModel | None:
        """The cable of this phone's profile (PhoneServer reads it when the daemon sets none)."""
        return PRESETS[self.profile.link]

    @property
    def adb_secure(self) -> bool:
        """ro.adb.secure=1: adbd asks the host for a trusted key (PhoneServer reads it)."""
        return self.profile.props.get("ro.adb.secure") == "1"

    def settle(self) -> None:
        if self.sandbox.running:
            self.physics.settle()

    def banner_props(self) -> dict[str, str]:
        return {
            "ro.product.name": self.profile.props["ro.product.name"],
            "ro.product.model": self.profile.props["ro.product.model"],
            "ro.product.device": self.profile.props["ro.product.device"],
        }

    def shell_argv(self, command: str | None) -> list[str]:
        inner = ["/system/bin/sh", "-l"] if command is None else ["/system/bin/sh", "-c", command]
        return self.sandbox.enter_argv(inner, root=self._adbd_root)

    def shell_env(self, term: str | None) -> dict[str, str]:
        user = "root" if self._adbd_root else "shell"
        env = {
            "PATH": PHONE_PATH,
            "HOME": "/",
            "TMPDIR": "/data/local/tmp",
            "USER": user,
            "LOGNAME": user,
            "SHELL": "/system/bin/sh",
            "HOSTNAME": "localhost",
            "ANDROID_ROOT": "/system",
            "ANDROID_DATA": "/data",
            "EXTERNAL_STORAGE": "/sdcard",
            "ANDROID_SERIAL": self.serial,
            "TERM": term or "dumb",
            # PoCL stands in for the phone's GPU: its worker threads are the "GPU cores", and it
            # needs a writable kernel cache (HOME=/ is not writable for shell).
            "POCL_MAX_PTHREAD_COUNT": str(self._pocl_threads()),
            "POCL_CACHE_DIR": f"{POCL_CACHE_PHONE_DIR}/{user}",  # root's entries would lock out shell
            "FARM_CTL_DIR": CTL_PHONE_DIR,
        }
        return env

    def _pocl_threads(self) -> int:
        """PoCL's workers: the profile's, or as many as the GPU's host budget can keep busy."""
        cores = self.profile.gpu.cores if self.profile.gpu else 1
        plan = self.physics.plan
        return max(cores, plan.gpu_threads) if plan.slowdown is not None else cores

    async def open_files(self) -> PhoneFiles:
        if not self.sandbox.running:
            raise OSError(errno.ENODEV, "phone is not running")
        return await self.sandbox.open_files(root=self._adbd_root)

    def can_root(self) -> bool:
        return self.profile.rooted and self.sandbox.privileged

    @property
    def adbd_root(self) -> bool:
        return self._adbd_root

    def set_adbd_root(self, root: bool) -> None:
        if root and not self.can_root():
            raise PermissionError("adbd cannot run as root in production builds")
        self._adbd_root = root
        self.set_property("service.adb.root", "1" if root else "0")

    def set_property(self, key: str, value: str) -> None:
        if not key.startswith(_ADBD_WRITABLE_PREFIXES):
            raise PermissionError(f"property {key} is read-only")
        ctl = self.sandbox.layout.ctl
        (ctl / ctlfiles.SET_PROPS).mkdir(parents=True, exist_ok=True)
        # The phone's shell owns these dirs: written without following its links (beneath.py).
        ctlfiles.write_text(ctl, f"{ctlfiles.SET_PROPS}/{key}", value, mode=0o666)
        if key.startswith("persist."):
            ctlfiles.write_text(ctl, f"{ctlfiles.PERSIST_PROPS}/{key}", value, mode=0o666)

    def properties(self) -> dict[str, str]:
        """Every property as getprop shows it (host-side view, for tests and the daemon)."""
        return ctlfiles.read_props(self.sandbox.layout.ctl)


def make_world(profile_name: str, serial: str, state_dir: Path, *, keep_data: bool = False) -> PhoneWorld:
    """The factory the daemon uses: a not-yet-started world of a shipped (or YAML-file) profile.
    keep_data: keep /data and /sdcard even when they belong to another profile (layout.py)."""
    if not serial or any(c in serial for c in "/\\ \t\n:"):
        raise ConfigError(f"invalid virtual phone serial {serial!r}", hint="use letters, digits, - and _")
    return SandboxWorld(load_profile(profile_name), serial, Path(state_dir), keep_data=keep_data)
