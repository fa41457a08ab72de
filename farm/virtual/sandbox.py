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
* Writable trees live in the phone's state dir on the host: data/, sdcard/, sys/ (telemetry, driven
  by the physics), ctl/ (bound at /dev/.farm: the tools' shared state with the world).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from farm.errors import EnvironmentProblem
from farm.virtual.profile import Profile

SHELL_UID = 2000
SHELL_GID = 2000
CTL_PHONE_DIR = "/dev/.farm"
TOOLS_SRC_DIR = Path(__file__).parent / "tools"
TOOLS_PHONE_DIR = "/system/lib/farm"
PHONE_PATH = "/system/bin:/system/xbin:/vendor/bin:/usr/bin:/bin"
POCL_CACHE_PHONE_DIR = "/data/vendor/pocl-cache"
HOST_LIBOPENCL = "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1"
INIT_READY_TIMEOUT_S = 10.0
# Root on the phone is root in the sandbox, not on the host: no mounts, device nodes, modules...
ROOT_DROPPED_CAPS = "-sys_admin,-mknod,-sys_module,-sys_rawio,-sys_boot,-sys_time,-net_admin,-sys_ptrace"
# Android tools this phone ships in /system/bin; each is a link to tools/farmtool.py.
TOOL_NAMES = (
    "getprop",
    "setprop",
    "dumpsys",
    "cmd",
    "settings",
    "svc",
    "input",
    "am",
    "wm",
    "reboot",
    "ps",
    "su",
)
_HOST_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf")


@dataclass(frozen=True)
class StateLayout:
    """Host paths of one phone's state dir."""

    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sdcard(self) -> Path:
        return self.root / "sdcard"

    @property
    def system(self) -> Path:
        return self.root / "system"

    @property
    def vendor(self) -> Path:
        return self.root / "vendor"

    @property
    def sys(self) -> Path:
        return self.root / "sys"

    @property
    def ctl(self) -> Path:
        return self.root / "ctl"

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def meminfo(self) -> Path:
        return self.root / "proc-meminfo"

    @property
    def init_log(self) -> Path:
        return self.root / "init.log"

    @property
    def ground_truth(self) -> Path:
        return self.root / "ground_truth.jsonl"


def tool_interpreter() -> str:
    """A Python visible inside the sandbox (host /usr is bound; the venv's may live elsewhere)."""
    for candidate in ("/usr/bin/python3",):
        if os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(sys.executable)


def _mkdir(path: Path, mode: int, uid: int, gid: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    if os.geteuid() == 0:
        os.chown(path, uid, gid)


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
        """Create the state dir trees (idempotent; keeps data/ and sdcard/ across restarts)."""
        lay = self.layout
        shell = (SHELL_UID, SHELL_GID) if self.privileged else (os.geteuid(), os.getegid())
        root = (0, 0) if self.privileged else shell
        lay.root.mkdir(parents=True, exist_ok=True)
        _mkdir(lay.data, 0o771, *root)
        _mkdir(lay.data / "local", 0o751, *root)
        _mkdir(lay.data / "local" / "tmp", 0o771, *shell)
        _mkdir(lay.data / "vendor", 0o771, *root)
        # PoCL's kernel cache (the "vendor driver cache"); kept across reboots like a real one.
        _mkdir(lay.data / "vendor" / "pocl-cache", 0o770, *shell)
        _mkdir(lay.sdcard, 0o770, *shell)
        _mkdir(lay.ctl, 0o775, *shell)
        lay.sys.mkdir(exist_ok=True)
        for sub in ("props", "props/set", "props/persist", "battery", "settings"):
            _mkdir(lay.ctl / sub, 0o775, *shell)
        self._prepare_system()
        self._prepare_vendor()
        self._prepare_etc()
        lay.meminfo.touch()

    def _prepare_system(self) -> None:
        system = self.layout.system
        if system.exists():
            shutil.rmtree(system)
        (system / "bin").mkdir(parents=True)
        (system / "xbin").mkdir()
        (system / "etc").mkdir()
        lib = system / "lib" / "farm"
        lib.mkdir(parents=True)
        interpreter = tool_interpreter()
        for src in TOOLS_SRC_DIR.glob("*.py"):
            text = src.read_text(encoding="utf-8")
            if text.startswith("#!"):
                text = f"#!{interpreter} -IS\n" + text.split("\n", 1)[1]
            (lib / src.name).write_text(text, encoding="utf-8")
            os.chmod(lib / src.name, 0o755)
        (system / "bin" / "sh").symlink_to(os.path.realpath("/bin/sh"))
        for name in TOOL_NAMES:
            (system / "bin" / name).symlink_to(f"{TOOLS_PHONE_DIR}/farmtool.py")
        build_prop = "".join(f"{k}={v}\n" for k, v in sorted(self.profile.props.items()))
        (system / "build.prop").write_text(build_prop, encoding="utf-8")

    def _prepare_vendor(self) -> None:
        vendor = self.layout.vendor
        if vendor.exists():
            shutil.rmtree(vendor)
        (vendor / "lib64").mkdir(parents=True)
        (vendor / "bin").mkdir()
        lib = self.profile.opencl.library
        if lib is None:
            return
        if not lib.startswith("/vendor/"):
            raise EnvironmentProblem(f"{self.profile.name}: opencl.library must live under /vendor/: {lib}")
        target = vendor / lib.removeprefix("/vendor/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.profile.opencl.install == "copy":
            shutil.copyfile(HOST_LIBOPENCL, target)
        else:
            target.symlink_to(HOST_LIBOPENCL)

    def _prepare_etc(self) -> None:
        etc = self.layout.etc
        etc.mkdir(exist_ok=True)
        (etc / "passwd").write_text(
            "root:x:0:0:root:/:/system/bin/sh\nshell:x:2000:2000:shell:/:/system/bin/sh\n", encoding="utf-8"
        )
        (etc / "group").write_text("root:x:0:\nshell:x:2000:\n", encoding="utf-8")
        (etc / "hosts").write_text("127.0.0.1 localhost\n::1 ip6-localhost\n", encoding="utf-8")

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
        """Host path of `phone_path` through the phone's own mount namespace, with the phone's
        permission checks for shell (or none for root); raises OSError like the phone would."""
        if not phone_path.startswith("/"):
            raise OSError(errno.ENOENT, "not an absolute path", phone_path)
        base = f"/proc/{self.init_pid}/root"
        parts = _canonical(Path(base), phone_path)
        host = Path(base, *parts) if parts else Path(base + "/")
        uid_gid = None if root or not self.privileged else (SHELL_UID, SHELL_GID)
        _check_access(Path(base), parts, for_write=for_write, ids=uid_gid)
        return host


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


def _canonical(base: Path, phone_path: str) -> list[str]:
    """Resolve `..` and symlinks by hand: through /proc/PID/root an absolute link target would
    otherwise be looked up on the host."""
    todo = [p for p in phone_path.split("/") if p and p != "."]
    done: list[str] = []
    hops = 0
    while todo:
        name = todo.pop(0)
        if name == "..":
            if done:
                done.pop()
            continue
        host = Path(base, *done, name)
        if host.is_symlink():
            hops += 1
            if hops > 40:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), phone_path)
            target = os.readlink(host)
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p and p != "."] + todo
            continue
        done.append(name)
    return done


def _allowed(st: os.stat_result, ids: tuple[int, int] | None, want: int) -> bool:
    """Mode-bit check for uid/gid `ids` (None: root, which only needs x somewhere for exec)."""
    if ids is None:
        return True
    uid, gid = ids
    if st.st_uid == uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid == gid:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits & want == want


def _check_access(base: Path, parts: list[str], *, for_write: bool, ids: tuple[int, int] | None) -> None:
    cur = base
    phone = ""
    for i, name in enumerate(parts):
        st = os.stat(cur)
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), phone or "/")
        if not _allowed(st, ids, 1):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone or "/")
        nxt = cur / name
        phone = f"{phone}/{name}"
        last = i == len(parts) - 1
        try:
            nst = os.stat(nxt)
        except FileNotFoundError:
            if last and for_write:
                if os.statvfs(cur).f_flag & os.ST_RDONLY:
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS), phone) from None
                if not _allowed(st, ids, 3):
                    raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone) from None
                return
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), phone) from None
        if last:
            if for_write and not stat.S_ISDIR(nst.st_mode):
                if os.statvfs(nxt).f_flag & os.ST_RDONLY:
                    raise OSError(errno.EROFS, os.strerror(errno.EROFS), phone)
                if not _allowed(nst, ids, 2):
                    raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone)
            elif for_write and os.statvfs(nxt).f_flag & os.ST_RDONLY:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), phone)
            elif not for_write and not _allowed(nst, ids, 5 if stat.S_ISDIR(nst.st_mode) else 4):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES), phone)
        cur = nxt
    if not parts and for_write:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), "/")
