"""One phone's sandbox: its own user, PID, mount, network, IPC and UTS namespaces (bubblewrap).

The threat model (who reaches a phone port, what the phone's root can and cannot do, why the
daemon must be root) is in vphone/README.md. In short: phone ids 0..65535 map to a host uid
range of the phone's own (host_uid_base); every process entering the phone goes through
native/vphone-exec.c or bwrap with the same limits (capabilities bounded to ROOT_CAPS, none for
shell; no_new_privs; RLIMIT_NPROC; the seccomp filter of native/seccomp-gen.c); the network
namespace has loopback only; su and the tools are served by the phone's init on
/dev/.farm/tools.sock, which only this phone's processes see.

Commands enter the namespaces of init (pid 1 of the phone, host pid `init_pid`), so all commands of
one phone share one PID namespace (`cmd & echo $!` in one adb shell, `kill PID` in the next). When
init dies the kernel kills the whole namespace. The caller starts enter_argv in a new session; the
helper's child stays in that process group, so killpg reaches the shell and its children.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path

from vphone import userdata
from vphone.affinitynotify import AffinityCalls, Listeners
from vphone.errors import EnvironmentProblem
from vphone.layout import (
    HOST_PYTHON,
    PHONE_PYTHON,
    SHELL_GID,
    SHELL_UID,
    TOOLS_PHONE_DIR,
    Owners,
    StateLayout,
    chown_tree,
    host_libopencl_files,
    native_binary,
    prepare_tree,
)
from vphone.phonefiles import PhoneFileServer
from vphone.profile import Profile
from vphone.userdata import UserdataUnavailable

CTL_PHONE_DIR = "/dev/.farm"
PHONE_PATH = "/system/bin:/system/xbin:/vendor/bin"
POCL_CACHE_PHONE_DIR = "/data/vendor/pocl-cache"
BUGREPORTS_PHONE_DIR = "/data/user_de/0/com.android.shell/files/bugreports"  # layout.prepare_tree
INIT_READY_TIMEOUT_S = 10.0
UID_COUNT = 65536
_UID_SLOT_FIRST = 2048  # host uid 2048 * 65536 = 2**27: above real users and /etc/subuid ranges
_UID_SLOTS = 63487  # the last slot's ids stay below 2**32 - 1 (the invalid uid)
# Processes per phone user (RLIMIT_NPROC, counted per host uid, so per phone); the pids cgroup
# of vphone/src/vphone/cgroup.py, where present, bounds the phone as a whole.
NPROC_PER_USER = 512
# The phone's root keeps these (same list as ROOT_CAPS in native/vphone-exec.c; a test compares).
ROOT_CAPS = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_AUDIT_WRITE",
    "CAP_LEASE",
)
_HOST_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf")
# The host's libraries stay reachable (PoCL, libc, libOpenCL); its executables (/usr/bin, /bin,
# /sbin) do not: a phone has mksh, toybox and its own tools only.
_HOST_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32", "/usr/share")
_TOP_LIB_LINKS = ("lib", "lib64", "lib32", "libx32")
_HOST_LINKER_PATH = "/usr/bin:/bin"
_HOST_GCC_DIR = "/usr/lib/gcc"
_seccomp_bpf: bytes | None = None
_log = logging.getLogger(__name__)
# Where vphone-exec launch shows bwrap the state dir (a bind on a private tmpfs, see its comment).
STAGED_STATE_DIR = Path("/mnt/vphone")


def host_uid_base(serial: str) -> int:
    """First host uid of the phone `serial`: a slot of 65536 ids from a hash of the serial, so a
    phone keeps its ids (and owns its kept data) across restarts. Two phones sharing a slot would
    still not reach each other (separate mount, PID, IPC and network namespaces)."""
    slot = int(hashlib.sha256(serial.encode()).hexdigest()[:8], 16) % _UID_SLOTS
    return (_UID_SLOT_FIRST + slot) * UID_COUNT


def _pocl_linker_binds() -> list[str]:
    """PoCL (the phone's "GPU driver") links each kernel into a shared object with the host's `ld`,
    which clang's driver looks up in PATH or in the GCC toolchain's /usr/<triple>/bin. The phone's
    PATH has no host binaries, so `ld` goes to the toolchain directory only: PoCL finds it there,
    the phone's shell does not (a vendor driver's compiler is just as private)."""
    ld = shutil.which("ld", path=_HOST_LINKER_PATH)
    if ld is None or not os.path.isdir(_HOST_GCC_DIR):
        return []
    argv = []
    for triple in sorted(os.listdir(_HOST_GCC_DIR)):
        for directory in (f"/usr/{triple}", f"/usr/{triple}/bin"):
            argv += ["--perms", "0755", "--dir", directory]
        argv += ["--ro-bind", os.path.realpath(ld), f"/usr/{triple}/bin/ld"]
    return argv


def seccomp_bpf() -> bytes:
    """The compiled seccomp filter (vphone-exec seccomp-bpf), for bwrap --seccomp."""
    global _seccomp_bpf
    if _seccomp_bpf is None:
        _seccomp_bpf = subprocess.run(
            [str(native_binary("vphone-exec")), "seccomp-bpf"], capture_output=True, check=True, timeout=10
        ).stdout
    return _seccomp_bpf


class Sandbox:
    """The namespaces of one phone. `prepare` lays out the state dir; `start` runs init."""

    def __init__(self, profile: Profile, serial: str, state_dir: Path, *, keep_data: bool = False) -> None:
        self.profile = profile
        self.serial = serial
        self.layout = StateLayout(state_dir)
        self.privileged = os.geteuid() == 0  # start() refuses otherwise (module doc)
        self.keep_data = keep_data
        self.userdata_note: str | None = None  # why the phone has no bounded partition, if so
        self.uid_base = host_uid_base(serial)
        # Host cgroup files (cgroup.procs / tasks) every process of this phone joins before it
        # enters the phone: set by the phone's cgroup owner (vphone.cgroup) before start.
        self.cgroup_files: tuple[str, ...] = ()
        # ... and those a command entering it joins instead (adbd's shells start in the default
        # cpuset init puts services in; init itself stays at the top). Empty: cgroup_files.
        self.enter_cgroup_files: tuple[str, ...] = ()
        # More binds into the phone, (host path, phone path), set before start (the world's
        # cgroup views: /dev/cpuset...). Host paths under the state dir are bound from its
        # staged copy; others must be reachable by the phone's root (its host uid).
        self.extra_binds: tuple[tuple[Path, str], ...] = ()
        # Who answers the phone's programs' sched_setaffinity/getaffinity (affinitynotify.py),
        # set before start (the physics); None: they see the host's CPUs.
        self.affinity_calls: AffinityCalls | None = None
        self._listeners: Listeners | None = None
        self._bwrap: asyncio.subprocess.Process | None = None
        self._init_pid: int | None = None
        self._booting_pid: int | None = None  # init before it is ready (start)
        self._pidns: str | None = None

    # -- ids ---------------------------------------------------------------------------------------

    def host_uid(self, phone_uid: int) -> int:
        """The host uid (and gid) behind a phone uid or gid."""
        return self.uid_base + phone_uid

    @property
    def owners(self) -> Owners:
        return Owners(
            root=(self.host_uid(0), self.host_uid(0)),
            shell=(self.host_uid(SHELL_UID), self.host_uid(SHELL_GID)),
        )

    # -- layout ----------------------------------------------------------------------------------

    def _require_root(self) -> None:
        if not self.privileged:
            raise EnvironmentProblem(
                f"{self.serial}: virtual phones need root (each phone runs as its own range of host "
                "uids, which only root can map)",
                hint="run `farm virtual up` as root, e.g. with sudo",
            )

    def prepare(self) -> None:
        """Lay out the state dir (data/, sdcard/ and persist props kept for the same phone), on
        the phone's bounded userdata partition where this host can mount one."""
        self._require_root()
        try:
            userdata.mount(self.layout.root, self.profile.storage_mb)
            self.userdata_note = None
        except UserdataUnavailable as exc:
            if self.userdata_note is None:
                _log.warning(
                    "%s: no bounded userdata partition, /data is the host's disk: %s", self.serial, exc
                )
            self.userdata_note = str(exc)
        prepare_tree(self.profile, self.layout, self.serial, self.owners, keep_data=self.keep_data)

    # -- argv --------------------------------------------------------------------------------------

    def _mounts(self) -> list[str]:
        lay = StateLayout(STAGED_STATE_DIR)

        def bind(kind: str, source: Path, dest: str) -> list[str]:
            return [f"--{kind}", str(source), dest]

        argv = ["--perms", "0755", "--dir", "/usr"]  # bwrap would make the parent 0700
        for top in _HOST_LIB_DIRS:
            if os.path.isdir(top) and not os.path.islink(top):
                argv += ["--ro-bind", top, top]
        for top in _TOP_LIB_LINKS:
            host = Path("/") / top
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), f"/{top}"]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), f"/{top}"]
        argv += ["--symlink", "/system/bin", "/bin"]  # as on Android 10+
        argv += ["--proc", "/proc", *bind("ro-bind", lay.meminfo, "/proc/meminfo")]
        argv += bind("ro-bind", lay.cpuinfo, "/proc/cpuinfo")
        argv += [*bind("ro-bind", lay.proc_cgroups, "/proc/cgroups"), "--dev", "/dev"]
        argv += bind("bind", lay.ctl, CTL_PHONE_DIR)
        argv += ["--tmpfs", "/etc"]
        for name in ("passwd", "group", "hosts"):
            argv += bind("ro-bind", lay.etc / name, f"/etc/{name}")
        for name in _HOST_ETC_FILES:
            if os.path.lexists(f"/etc/{name}"):
                argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        if self.profile.has_opencl and os.path.isdir("/etc/OpenCL"):
            argv += ["--ro-bind", "/etc/OpenCL", "/etc/OpenCL"]
        argv += ["--remount-ro", "/etc"]
        if self.profile.has_opencl:
            argv += _pocl_linker_binds()
        if not self.profile.opencl.linker_visible:
            # No libOpenCL.so where Android's linker looks: the host's loader (which the phone's
            # ld.so would find for a program linked with -lOpenCL) is an empty file here, so such
            # a program dies before main, as on the device.
            for path in host_libopencl_files():
                argv += ["--ro-bind", "/dev/null", path]
        argv += bind("ro-bind", lay.system, "/system")
        argv += ["--ro-bind", os.path.realpath(HOST_PYTHON), PHONE_PYTHON]
        argv += bind("ro-bind", lay.vendor, "/vendor")
        argv += [*bind("bind", lay.data, "/data"), *bind("bind", lay.sys, "/sys")]
        argv += ["--perms", "0755", "--dir", "/storage", "--perms", "0711", "--dir", "/storage/emulated"]
        argv += ["--perms", "0755", "--dir", "/storage/self"]
        argv += bind("bind", lay.sdcard, "/storage/emulated/0")
        argv += ["--symlink", "/storage/emulated/0", "/storage/self/primary"]
        argv += ["--symlink", "/storage/self/primary", "/sdcard"]
        argv += ["--symlink", BUGREPORTS_PHONE_DIR, "/bugreports"]
        for host, phone in self.extra_binds:
            argv += bind("bind", self._staged(host, lay), phone)
        argv += ["--remount-ro", "/"]
        return argv

    def _staged(self, host: Path, staged: StateLayout) -> Path:
        """Where bwrap (inside vphone-exec launch's mount namespace) finds a host path."""
        try:
            return staged.root / host.resolve().relative_to(self.layout.root.resolve())
        except ValueError:
            return host

    def _launch_argv(self, info_fd: int, seccomp_fd: int) -> list[str]:
        argv = [str(native_binary("vphone-exec")), "launch", "--uid-base", str(self.uid_base)]
        argv += ["--id-count", str(UID_COUNT), "--nproc", str(NPROC_PER_USER)]
        argv += ["--state-dir", str(self.layout.root)]
        for path in self.cgroup_files:
            argv += ["--cgroup", path]
        argv += self._notify_args()
        argv += ["--", "bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
        argv += ["--unshare-cgroup-try", "--hostname", "localhost", "--as-pid-1"]
        argv += ["--die-with-parent", "--info-fd", str(info_fd), "--seccomp", str(seccomp_fd)]
        argv += ["--cap-drop", "ALL"]
        for cap in ROOT_CAPS:
            argv += ["--cap-add", cap]
        argv += self._mounts()
        argv += ["--chdir", "/", PHONE_PYTHON, "-I", "-S", f"{TOOLS_PHONE_DIR}/init.py"]
        if self.profile.rooted:  # the daemon says whether su exists, never a file in the phone
            argv.append("--rooted")
        return argv

    def enter_argv(self, argv: list[str], *, root: bool, cwd: str = "/") -> list[str]:
        """Host argv that runs `argv` inside this phone as shell (uid 2000) or root, confined."""
        return [*self._enter_prefix(root=root, cwd=cwd), "--", *argv]

    def _enter_prefix(self, *, root: bool, cwd: str) -> list[str]:
        uid, gid = (0, 0) if root else (SHELL_UID, SHELL_GID)
        argv = [str(native_binary("vphone-exec")), "enter", "--pid", str(self.init_pid)]
        argv += ["--uid", str(uid), "--gid", str(gid), "--nproc", str(NPROC_PER_USER), "--cwd", cwd]
        for path in self.enter_cgroup_files or self.cgroup_files:
            argv += ["--cgroup", path]
        return [*argv, *self._notify_args()]

    def _notify_args(self) -> list[str]:
        path = None if self._listeners is None else self._listeners.socket_path
        return [] if path is None else ["--notify-sock", str(path)]

    async def open_files(self, *, root: bool) -> PhoneFileServer:
        """A file server inside the phone as shell or root (the sync service's file access)."""
        return await PhoneFileServer.start([*self._enter_prefix(root=root, cwd="/"), "--serve-files"])

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def init_pid(self) -> int:
        """Host PID of the phone's pid 1 (its init)."""
        if self._init_pid is None:
            raise EnvironmentProblem(f"{self.serial}: the phone is not started")
        return self._init_pid

    @property
    def pidns(self) -> str:
        """`pid:[INODE]` of this phone's PID namespace (compare with /proc/PID/ns/pid)."""
        if self._pidns is None:
            raise EnvironmentProblem(f"{self.serial}: the phone is not started")
        return self._pidns

    def current_pidns(self) -> str | None:
        """`pid:[INODE]` of the PID namespace, from init's start on (while it boots too)."""
        if self._pidns is not None:
            return self._pidns
        pid = self._booting_pid
        if pid is None:
            return None
        try:
            return os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            return None

    @property
    def running(self) -> bool:
        return self._bwrap is not None and self._bwrap.returncode is None

    async def start(self) -> None:
        if self.running:
            return
        self._require_root()
        if shutil.which("bwrap") is None:
            raise EnvironmentProblem(
                "bubblewrap (bwrap) is needed for virtual phones", hint="run `make system-packages`"
            )
        native_binary("vphone-exec")
        # The physics wrote /sys as the daemon; the phone's root owns it (root-only nodes).
        chown_tree(self.layout.sys, self.owners.root)
        ready = self.layout.ctl / "init.ready"
        with contextlib.suppress(FileNotFoundError):
            ready.unlink()
        if self.affinity_calls is not None and self._listeners is None:
            self._listeners = Listeners(self.serial, self.affinity_calls, self.layout.root)
            try:
                self._listeners.start()
            except OSError as exc:
                _log.warning(
                    "%s: affinity syscalls see the host's CPUs: no listener socket: %s", self.serial, exc
                )
        info_r, info_w = os.pipe()
        seccomp_fd = os.memfd_create("vphone-seccomp", 0)
        os.write(seccomp_fd, seccomp_bpf())
        os.lseek(seccomp_fd, 0, os.SEEK_SET)
        # bwrap's and init's stderr go to a file: a pipe nobody reads could fill up and block init.
        log = self.layout.init_log.open("ab")
        try:
            self._bwrap = await asyncio.create_subprocess_exec(
                *self._launch_argv(info_w, seccomp_fd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(info_w, seccomp_fd),
                start_new_session=True,
            )
        finally:
            for fd in (info_w, seccomp_fd):
                os.close(fd)
            log.close()
        loop = asyncio.get_running_loop()
        info = await loop.run_in_executor(None, _read_all, info_r)
        try:
            init_pid = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError):
            await self.stop()
            raise EnvironmentProblem(
                f"{self.serial}: bwrap failed to start the sandbox: {self._log_tail()}"
            ) from None
        # init_pid is published only once init serves its tools: a caller that sees a new init
        # (after a reboot) may use the phone at once.
        self._booting_pid = init_pid
        deadline = loop.time() + INIT_READY_TIMEOUT_S
        while not os.path.lexists(ready):  # an lstat: a link there names a host path
            if not self.running or loop.time() > deadline:
                await self.stop()
                raise EnvironmentProblem(
                    f"{self.serial}: the phone's init did not come up: {self._log_tail()}"
                )
            await asyncio.sleep(0.01)
        await self._sdcard_noexec(init_pid)
        self._pidns = os.readlink(f"/proc/{init_pid}/ns/pid")
        self._init_pid = init_pid

    def _log_tail(self) -> str:
        try:
            lines = self.layout.init_log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    async def _sdcard_noexec(self, init_pid: int) -> None:
        """/sdcard is noexec on Android (bwrap has no such bind option): remount it with the
        phone's own mount rights (its user namespace)."""
        argv = [
            str(native_binary("vphone-exec")),
            "noexec",
            "--pid",
            str(init_pid),
            "/storage/emulated/0",
        ]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _out, err = await proc.communicate()
        if proc.returncode != 0:
            await self.stop()
            raise EnvironmentProblem(f"{self.serial}: cannot make /sdcard noexec: {err.decode().strip()}")

    async def stop(self) -> None:
        """Kill the namespace (every process of this phone); idempotent."""
        for pid in (self._init_pid, self._booting_pid):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self._bwrap is not None:
            if self._bwrap.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._bwrap.kill()
            with contextlib.suppress(ProcessLookupError):
                await self._bwrap.wait()
        self._bwrap = None
        self._init_pid = None
        self._booting_pid = None
        self._pidns = None
        if self._listeners is not None:
            self._listeners.close()  # after the phone's processes: none waits on it any more
            self._listeners = None

    def release(self) -> None:
        """After the last stop (not a reboot's): the userdata partition is unmounted."""
        userdata.unmount(self.layout.root)


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


__all__ = ["CTL_PHONE_DIR", "PHONE_PATH", "POCL_CACHE_PHONE_DIR", "Sandbox", "StateLayout"]
