"""The phone's filesystem on the host: the state dir's trees and how they are laid out.

<state_dir>/
  data/        /data (writable; data/local/tmp is shell's, executable)
  sdcard/      /storage/emulated/0 (= /sdcard), shell's, noexec
  system/      /system (read-only): bin/ (sh = mksh, toybox applets, awk = one-true-awk, the few
               applets Android's toybox has and Debian's lacks, farmtool and its tool links),
               lib/farm/ (the tools' code)
  vendor/      /vendor (read-only): the profile's OpenCL libraries (lib64/libOpenCL.so unless it
               says otherwise; none on a phone without OpenCL)
  etc/         passwd, group, hosts for the phone's /etc
  sys/         /sys telemetry (vphone.nodes), driven by the physics
  ctl/         /dev/.farm: state shared by the tools and the world (vphone.ctlfiles)
  phone.json   whose data this is (serial, profile, layout version): data/, sdcard/ and ctl/ are
               kept across down/up only when they match (a different profile is another phone)
  proc-meminfo bound over /proc/meminfo (the profile's RAM)
  proc-cpuinfo bound over /proc/cpuinfo (the profile's CPUs, vphone/src/vphone/cpuinfo.py)
  proc-cgroups bound over /proc/cgroups: the cgroup hierarchies the phone has views of
               (cpuset, cpu or schedtune; vphone/src/vphone/cgmounts.py), not the host's: tools such
               as devlib mount every controller listed there
  init.log     bwrap's and the phone's init's output
  ground_truth.jsonl  the physics' ground truth (vphone.groundtruth)

Ownership: every tree belongs to the phone's host ids (vphone/src/vphone/sandbox.py: phone uid U is host
uid base + U), so the phone's root owns its own tree and nothing else on the host.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from vphone import beneath, ctlfiles
from vphone.buildprops import build_props
from vphone.errors import EnvironmentProblem
from vphone.profile import OpenClLibrary, OpenClLoader, Profile

PROC_CGROUPS_HEADER = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
SHELL_UID = 2000
SHELL_GID = 2000
CTL_MODE = 0o755  # /dev/.farm: root's; shell creates, renames and replaces nothing there
SHARED_MODE = 0o1775  # /dev/.farm/shared: root's, shell's group may add files, sticky (like /tmp)
LAYOUT_VERSION = 2  # 1: host-root-owned trees (before the phone had its own host uid range)
TOOLS_SRC_DIR = Path(__file__).parent / "tools"
NATIVE_BIN_DIR = Path(__file__).parent / "native" / "bin"
TOOLS_PHONE_DIR = "/system/lib/farm"
PHONE_PYTHON = f"{TOOLS_PHONE_DIR}/python3"  # bound to the host's Python; root-only directory
HOST_PYTHON = "/usr/bin/python3"
HOST_MKSH = "/bin/mksh"
HOST_TOYBOX = "/usr/bin/toybox"
HOST_BUSYBOX = "/bin/busybox"
HOST_ONE_TRUE_AWK = "/usr/bin/original-awk"  # Android's /system/bin/awk is one-true-awk too
# Android tools this phone ships in /system/bin; each is a link to farmtool (native/farmtool.c),
# whose requests the phone's init serves with tools/*.py.
TOOL_NAMES = (
    "getprop",
    "setprop",
    "dumpsys",
    "cmd",
    "settings",
    "content",  # cmds/content: SettingsProvider rows (tools/t_content.py)
    "svc",
    "input",
    "am",
    "wm",
    "reboot",
    "su",
    "pm",
    "logcat",
    "log",
    "getenforce",
    "setenforce",
    "mount",  # toybox's, plus the kernel's `-t cgroup` (tools/t_mount.py)
    "taskset",  # toybox's, in the phone's CPU numbers (tools/t_taskset.py, affinity.py)
    "bugreportz",  # dumpstate's zipped report (tools/t_bugreport.py), and its plain-text form
    "bugreport",
)
# Shipped by userdebug and eng builds only (tools/t_logcat.py).
DEBUG_TOOL_NAMES = ("logpersist.start", "logpersist.stop", "logpersist.cat")
# Applets of Android's toybox that Debian's toybox build leaves out. busybox provides them, as hard
# links named by the applet (busybox runs the applet its argv[0] names): a real phone has no
# busybox, and tools such as devlib look for one and push their own when there is none.
BUSYBOX_APPLETS = ("tr", "dd", "diff", "expr", "gzip", "bc")
# A Pixel's libOpenCL-pixel.so (native/opencl_pixel.c) and the ICD loader copy it opens.
PIXEL_WRAPPER = "libOpenCL-pixel.so"
PIXEL_WRAPPER_IMPL = "/vendor/lib64/vphone/libOpenCL-icd.so"
HOST_LIBOPENCL_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1",
    "/usr/lib/aarch64-linux-gnu/libOpenCL.so.1",
    "/usr/lib64/libOpenCL.so.1",
    "/usr/lib/libOpenCL.so.1",
)


@dataclass(frozen=True)
class Owners:
    """Host (uid, gid) pairs for the phone's root and shell users."""

    root: tuple[int, int]
    shell: tuple[int, int]


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
    def cpuinfo(self) -> Path:
        return self.root / "proc-cpuinfo"

    @property
    def proc_cgroups(self) -> Path:
        return self.root / "proc-cgroups"

    @property
    def init_log(self) -> Path:
        return self.root / "init.log"

    @property
    def ground_truth(self) -> Path:
        return self.root / "ground_truth.jsonl"

    @property
    def identity(self) -> Path:
        return self.root / "phone.json"


def native_binary(name: str) -> Path:
    """A helper built by `make setup` (vphone/src/vphone/native/Makefile)."""
    path = NATIVE_BIN_DIR / name
    if not os.access(path, os.X_OK):
        raise EnvironmentProblem(
            f"{path} is missing", hint="build it: make -C vphone/src/vphone/native (or make setup)"
        )
    return path


def _host_file(path: str, package: str) -> str:
    if not os.path.exists(path):
        raise EnvironmentProblem(
            f"{path} is missing", hint=f"install Debian's {package}: make system-packages"
        )
    return path


def host_libopencl_files() -> tuple[str, ...]:
    """The files behind every name of the host's ICD loader (libOpenCL.so, .so.1, ...)."""
    return tuple(sorted({os.path.realpath(c) for c in HOST_LIBOPENCL_CANDIDATES if os.path.exists(c)}))


def host_libopencl() -> str:
    """The host's OpenCL ICD loader, which the phone's /vendor/lib64/libOpenCL.so stands for."""
    for candidate in HOST_LIBOPENCL_CANDIDATES:
        if os.path.exists(candidate):
            return candidate
    raise EnvironmentProblem("no libOpenCL.so.1 on this machine", hint="run `make system-packages`")


def _mkdir(layout: StateLayout, path: Path, mode: int, owner: tuple[int, int]) -> None:
    """A directory of the phone's trees, made without following links: data/, sdcard/ and ctl/
    survive down/up, and the phone's root or shell may have left a link in them (a link at
    ctl/props to /etc made `up` chown the host's /etc to shell)."""
    rel = str(path.relative_to(layout.root))  # its parent is made first (prepare_tree's order)
    beneath.ensure_dir(layout.root, rel, mode, owner if os.geteuid() == 0 else None)


def chown_tree(top: Path, owner: tuple[int, int], *, below: Path | None = None) -> None:
    """lchown everything under `top` (the daemon writes these trees; the phone's root owns them).
    `below`: the directory under which the phone may have planted links (no link is followed)."""
    if os.geteuid() != 0:
        return
    root = below if below is not None else top.parent
    beneath.chown_tree(root, str(top.relative_to(root)), owner)


def _fresh_identity(profile: Profile, serial: str) -> dict[str, object]:
    return {"serial": serial, "profile": profile.name, "layout": LAYOUT_VERSION}


def keeps_data(layout: StateLayout, profile: Profile, serial: str) -> bool:
    """Whether the state dir holds this very phone's data (same serial, profile and layout)."""
    try:
        return bool(
            json.loads(layout.identity.read_text(encoding="utf-8")) == _fresh_identity(profile, serial)
        )
    except (OSError, ValueError):
        return False


def prepare_tree(
    profile: Profile, layout: StateLayout, serial: str, owners: Owners, *, keep_data: bool
) -> None:
    """Create the state dir trees. data/, sdcard/ and ctl/ survive only for the same phone
    (keeps_data) or when `keep_data` says so; otherwise the phone starts clean, like a new one."""
    lay = layout
    lay.root.mkdir(parents=True, exist_ok=True)
    if keeps_data(lay, profile, serial):
        pass
    elif keep_data:
        # Another profile's data, kept on request: what a rooted session left in shell's places
        # (/data/local/tmp, /sdcard) would lock out an unrooted shell, so shell gets them back.
        for tree in (lay.data / "local" / "tmp", lay.sdcard):
            chown_tree(tree, owners.shell, below=lay.root)
    else:
        for tree in (lay.data, lay.sdcard, lay.ctl):
            shutil.rmtree(tree, ignore_errors=True)
    root, shell = owners.root, owners.shell
    _mkdir(lay, lay.data, 0o771, root)
    _mkdir(lay, lay.data / "local", 0o751, root)
    _mkdir(lay, lay.data / "local" / "tmp", 0o771, shell)
    _mkdir(lay, lay.data / "vendor", 0o771, root)
    # /bugreports -> shell's bug report directory, where bugreportz leaves its zips.
    for rel, mode, owner in (
        ("user_de", 0o711, root),
        ("user_de/0", 0o771, root),
        ("user_de/0/com.android.shell", 0o700, shell),
        ("user_de/0/com.android.shell/files", 0o771, shell),
        ("user_de/0/com.android.shell/files/bugreports", 0o770, shell),
    ):
        _mkdir(lay, lay.data / rel, mode, owner)
    # PoCL's kernel cache (the "vendor driver cache"); kept across reboots like a real one.
    _mkdir(lay, lay.data / "vendor" / "pocl-cache", 0o770, shell)
    _mkdir(lay, lay.sdcard, 0o770, shell)
    # /dev/.farm is the phone's root's and closed to shell: root's tools.sock, the daemon's files
    # (rooted, kmsg, thermalservice.txt, battery/state.json) and props/ (the identity in
    # props/ro.json) cannot be replaced or forged by shell. The tools' files go to shared/, sticky
    # (like /tmp): shell adds its own there but cannot remove or replace root's.
    _mkdir(lay, lay.ctl, CTL_MODE, root)
    _mkdir(lay, lay.ctl / ctlfiles.SHARED, SHARED_MODE, (root[0], shell[1]))
    for sub in ("props", "battery"):
        _mkdir(lay, lay.ctl / sub, 0o755, root)
    lay.sys.mkdir(exist_ok=True)
    for sub in ("props/set", "props/persist", "settings", "logcat"):
        _mkdir(lay, lay.ctl / sub, 0o775, shell)
    _prepare_system(profile, lay, serial)
    prepare_vendor(profile, lay)
    _prepare_etc(lay)
    for tree in (lay.system, lay.vendor, lay.etc):
        chown_tree(tree, root)
    os.chmod(lay.system / "lib" / "farm", 0o700)  # the tools' Python is init's, not shell's
    lay.meminfo.touch()
    lay.cpuinfo.touch()
    lay.proc_cgroups.write_text(PROC_CGROUPS_HEADER, encoding="ascii")
    lay.identity.write_text(json.dumps(_fresh_identity(profile, serial)) + "\n", encoding="utf-8")


def _copy_exec(src: str | Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)


def _toybox_applets(toybox: Path) -> list[str]:
    """The applets this toybox build has (`toybox` with no argument lists them)."""
    import subprocess

    out = subprocess.run([str(toybox)], capture_output=True, text=True, check=True, timeout=10).stdout
    return [name for name in out.split() if name.isidentifier() or name.replace("-", "_").isalnum()]


def _prepare_system(profile: Profile, layout: StateLayout, serial: str) -> None:
    system = layout.system
    if system.exists():
        shutil.rmtree(system)
    bin_dir = system / "bin"
    bin_dir.mkdir(parents=True)
    (system / "xbin").mkdir()
    (system / "etc").mkdir()
    lib = system / "lib" / "farm"
    lib.mkdir(parents=True)
    for src in TOOLS_SRC_DIR.glob("*.py"):
        shutil.copyfile(src, lib / src.name)
    (lib / "python3").touch()  # mount point of the host's python (sandbox.py binds it)
    _copy_exec(_host_file(HOST_MKSH, "mksh"), bin_dir / "sh")
    _copy_exec(_host_file(HOST_TOYBOX, "toybox"), bin_dir / "toybox")
    _copy_exec(_host_file(HOST_ONE_TRUE_AWK, "original-awk"), bin_dir / "awk")
    _copy_exec(native_binary("farmtool"), bin_dir / "farmtool")
    first, *others = BUSYBOX_APPLETS
    _copy_exec(_host_file(HOST_BUSYBOX, "busybox"), bin_dir / first)
    for name in others:
        os.link(bin_dir / first, bin_dir / name)
    taken = {"sh", "toybox", "awk", "farmtool", *TOOL_NAMES, *DEBUG_TOOL_NAMES, *BUSYBOX_APPLETS}
    for name in _toybox_applets(bin_dir / "toybox"):
        if name not in taken and name != "[":
            (bin_dir / name).symlink_to("toybox")
    (bin_dir / "[").symlink_to("toybox")
    debuggable = profile.rooted or profile.props.get("ro.debuggable") == "1"
    for name in (*TOOL_NAMES, *(DEBUG_TOOL_NAMES if debuggable else ())):
        (bin_dir / name).symlink_to("farmtool")
    build_prop = "".join(f"{k}={v}\n" for k, v in sorted(build_props(profile.props, serial).items()))
    (system / "build.prop").write_text(build_prop, encoding="utf-8")


def prepare_vendor(profile: Profile, layout: StateLayout) -> None:
    """/vendor afresh: lib64/ and bin/, and every OpenCL library the profile ships."""
    vendor = layout.vendor
    if vendor.exists():
        shutil.rmtree(vendor)
    (vendor / "lib64").mkdir(parents=True)
    (vendor / "bin").mkdir()
    for library in profile.opencl.libraries:
        _install_opencl(vendor, library)


def _install_opencl(vendor: Path, library: OpenClLibrary) -> None:
    target = vendor / library.path.removeprefix("/vendor/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if library.loader is OpenClLoader.PIXEL:
        # The wrapper, and behind it a copy of the ICD loader (a phone with no linker-visible
        # libOpenCL.so has the host's own hidden: sandbox.py) at the one path the wrapper opens.
        shutil.copyfile(native_binary(PIXEL_WRAPPER), target)
        impl = vendor / PIXEL_WRAPPER_IMPL.removeprefix("/vendor/")
        impl.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(host_libopencl(), impl)
        return
    if library.install == "copy":
        shutil.copyfile(host_libopencl(), target)
    else:
        target.symlink_to(host_libopencl())


def _prepare_etc(layout: StateLayout) -> None:
    etc = layout.etc
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/:/system/bin/sh\nshell:x:2000:2000:shell:/:/system/bin/sh\n", encoding="utf-8"
    )
    (etc / "group").write_text("root:x:0:\nshell:x:2000:\n", encoding="utf-8")
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 ip6-localhost\n", encoding="utf-8")
