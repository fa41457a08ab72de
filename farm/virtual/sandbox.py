"""One phone's sandbox: an Android-like filesystem in a bubblewrap mount + PID namespace.

Design (why it looks like this):
* A long-lived per-phone "init" (bwrap --unshare-pid running tools/init.py) owns the namespaces.
  Every later command enters them with nsenter, so all commands of one phone share one PID
  namespace (`cmd & echo $!` in one adb shell, `kill PID` in the next) while other phones'
  processes stay invisible. When init dies the kernel kills the whole namespace.
* The host argv is `nsenter ... /system/bin/sh -c CMD`; the caller starts it in a new session, and
  nsenter's child stays in that process group, so killpg reaches the shell and its children.
* As host root, shell commands run as uid/gid 2000 (nsenter -S/-G drops every capability), so
  mode-000 nodes give EACCES and root-owned sysfs nodes are read-only, as on a phone; `adb root`
  and `su` run as uid 0. Unprivileged hosts get a user namespace mapping the host user to 2000
  (no root there).
* Writable trees live in the phone's state dir on the host (farm/virtual/layout.py); paths for the
  sync service are resolved by farm/virtual/phonepath.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
from pathlib import Path

from farm.errors import EnvironmentProblem
from farm.virtual.layout import (
    SHELL_GID,
    SHELL_UID,
    TOOLS_PHONE_DIR,
    StateLayout,
    prepare_tree,
    tool_interpreter,
)
from farm.virtual.phonepath import resolve_phone_path
from farm.virtual.profile import Profile

CTL_PHONE_DIR = "/dev/.farm"
PHONE_PATH = "/system/bin:/system/xbin:/vendor/bin:/usr/bin:/bin"
POCL_CACHE_PHONE_DIR = "/data/vendor/pocl-cache"
INIT_READY_TIMEOUT_S = 10.0
# Root on the phone is root in the sandbox, not on the host: no mounts, device nodes, modules...
ROOT_DROPPED_CAPS = "-sys_admin,-mknod,-sys_module,-sys_rawio,-sys_boot,-sys_time,-net_admin,-sys_ptrace"
_HOST_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf")


class Sandbox:
    """The bwrap namespaces of one phone. `prepare` lays out the state dir; `start` runs init."""

    def __init__(self, profile: Profile, serial: str, state_dir: Path) -> None:
        self.profile = profile
        self.serial = serial
        self.layout = StateLayout(state_dir)
        self.privileged = os.geteuid() == 0
        self._bwrap: asyncio.subprocess.Process | None = None
        self._init_pid: int | None = None
        self._pidns: str | None = None

    # -- layout ----------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Lay out the state dir (idempotent; keeps data/, sdcard/ and persist props)."""
        prepare_tree(self.profile, self.layout, privileged=self.privileged)

    # -- bwrap / nsenter argv ----------------------------------------------------------------------

    def _bwrap_argv(self, info_fd: int) -> list[str]:
        lay = self.layout
        argv = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "localhost"]
        argv += ["--die-with-parent", "--info-fd", str(info_fd)]
        if not self.privileged:
            argv += ["--unshare-user", "--uid", str(SHELL_UID), "--gid", str(SHELL_GID)]
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/") / top
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), f"/{top}"]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), f"/{top}"]
        argv += ["--proc", "/proc", "--ro-bind", str(lay.meminfo), "/proc/meminfo"]
        if self.privileged:
            argv += ["--dev", "/dev"]
        else:
            # --dev needs devpts, for which bwrap nests a second user namespace; nsenter could
            # then not enter the PID namespace (owned by the outer one). Bind the few nodes instead.
            argv += ["--tmpfs", "/dev"]
            for node in ("null", "zero", "full", "random", "urandom", "tty"):
                argv += ["--dev-bind", f"/dev/{node}", f"/dev/{node}"]
        argv += ["--bind", str(lay.ctl), CTL_PHONE_DIR]
        argv += ["--tmpfs", "/etc"]
        for name in ("passwd", "group", "hosts"):
            argv += ["--ro-bind", str(lay.etc / name), f"/etc/{name}"]
        for name in _HOST_ETC_FILES:
            if os.path.lexists(f"/etc/{name}"):
                argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        if self.profile.has_opencl and os.path.isdir("/etc/OpenCL"):
            argv += ["--ro-bind", "/etc/OpenCL", "/etc/OpenCL"]
        argv += ["--remount-ro", "/etc"]
        argv += ["--ro-bind", str(lay.system), "/system", "--ro-bind", str(lay.vendor), "/vendor"]
        argv += ["--bind", str(lay.data), "/data", "--bind", str(lay.sys), "/sys"]
        argv += ["--perms", "0755", "--dir", "/storage", "--perms", "0711", "--dir", "/storage/emulated"]
        argv += ["--perms", "0755", "--dir", "/storage/self"]
        argv += ["--bind", str(lay.sdcard), "/storage/emulated/0"]
        argv += ["--symlink", "/storage/emulated/0", "/storage/self/primary"]
        argv += ["--symlink", "/storage/self/primary", "/sdcard"]
        argv += ["--remount-ro", "/"]
        argv += ["--chdir", "/", tool_interpreter(), "-IS", f"{TOOLS_PHONE_DIR}/init.py"]
        return argv

    def enter_argv(self, argv: list[str], *, root: bool) -> list[str]:
        """Host argv that runs `argv` inside this phone as shell (uid 2000) or root."""
        pid = self.init_pid
        cmd = ["nsenter", "-t", str(pid), "-m", "-p", "-r", "-w"]
        if not self.privileged:
            cmd += ["-U", "--preserve-credentials"]
        elif not root:
            cmd += ["-S", str(SHELL_UID), "-G", str(SHELL_GID)]
        else:
            cmd += ["--", "setpriv", "--bounding-set", ROOT_DROPPED_CAPS]
        return [*cmd, "--", *argv]

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def init_pid(self) -> int:
        """Host PID of the namespace's pid 1 (bwrap's reaper)."""
        if self._init_pid is None:
            raise EnvironmentProblem(f"{self.serial}: the phone is not started")
        return self._init_pid

    @property
    def pidns(self) -> str:
        """`pid:[INODE]` of this phone's PID namespace (compare with /proc/PID/ns/pid)."""
        if self._pidns is None:
            raise EnvironmentProblem(f"{self.serial}: the phone is not started")
        return self._pidns

    @property
    def running(self) -> bool:
        return self._bwrap is not None and self._bwrap.returncode is None

    async def start(self) -> None:
        if self.running:
            return
        if shutil.which("bwrap") is None or shutil.which("nsenter") is None:
            raise EnvironmentProblem(
                "bubblewrap (bwrap) and nsenter are needed for virtual phones",
                hint="run `make system-packages`",
            )
        ready = self.layout.ctl / "init.ready"
        with contextlib.suppress(FileNotFoundError):
            ready.unlink()
        info_r, info_w = os.pipe()
        # bwrap's and init's stderr go to a file: a pipe nobody reads could fill up and block init.
        log = self.layout.init_log.open("ab")
        try:
            self._bwrap = await asyncio.create_subprocess_exec(
                *self._bwrap_argv(info_w),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(info_w,),
                start_new_session=True,
            )
        finally:
            os.close(info_w)
            log.close()
        loop = asyncio.get_running_loop()
        info = await loop.run_in_executor(None, _read_all, info_r)
        try:
            self._init_pid = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError):
            await self.stop()
            raise EnvironmentProblem(
                f"{self.serial}: bwrap failed to start the sandbox: {self._log_tail()}"
            ) from None
        self._pidns = os.readlink(f"/proc/{self._init_pid}/ns/pid")
        deadline = loop.time() + INIT_READY_TIMEOUT_S
        while not ready.exists():
            if not self.running or loop.time() > deadline:
                await self.stop()
                raise EnvironmentProblem(
                    f"{self.serial}: the phone's init did not come up: {self._log_tail()}"
                )
            await asyncio.sleep(0.02)
        await self._sdcard_noexec()

    def _log_tail(self) -> str:
        try:
            lines = self.layout.init_log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    async def _sdcard_noexec(self) -> None:
        """/sdcard is noexec on Android (bwrap has no such bind option): remount it from outside."""
        argv = ["nsenter", "-t", str(self.init_pid), "-m"]
        if not self.privileged:
            argv += ["-U", "--preserve-credentials"]
        argv += ["--", "mount", "-o", "remount,bind,noexec,nosuid,nodev", "/storage/emulated/0"]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        await proc.wait()  # best effort: a phone whose sdcard allows exec is still usable

    async def stop(self) -> None:
        """Kill the namespace (every process of this phone); idempotent."""
        if self._init_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._init_pid, signal.SIGKILL)
        if self._bwrap is not None:
            if self._bwrap.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._bwrap.kill()
            with contextlib.suppress(ProcessLookupError):
                await self._bwrap.wait()
        self._bwrap = None
        self._init_pid = None
        self._pidns = None

    # -- sync-service paths ------------------------------------------------------------------------

    def resolve(self, phone_path: str, *, for_write: bool, root: bool) -> Path:
        """Host path of `phone_path` as the phone's shell (or root) would reach it."""
        ids = None if root or not self.privileged else (SHELL_UID, SHELL_GID)
        return resolve_phone_path(self.init_pid, phone_path, for_write=for_write, ids=ids)


def _read_all(fd: int) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
            if b"}" in chunk:
                break
    finally:
        os.close(fd)
    return b"".join(chunks)
