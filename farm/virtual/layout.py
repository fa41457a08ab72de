"""The phone's filesystem on the host: the state dir's trees and how they are laid out.

<state_dir>/
  data/        /data (writable; data/local/tmp is shell's, executable)
  sdcard/      /storage/emulated/0 (= /sdcard), shell's, noexec
  system/      /system (read-only): bin/ (sh -> host dash, Android tools), lib/farm/ (tool code)
  vendor/      /vendor (read-only): lib64/libOpenCL.so unless the profile has no OpenCL
  etc/         passwd, group, hosts for the phone's /etc
  sys/         /sys telemetry (farm/virtual/nodes.py), driven by the physics
  ctl/         /dev/.farm: state shared by the tools and the world (farm/virtual/ctlfiles.py)
  proc-meminfo bound over /proc/meminfo (the profile's RAM)
  init.log     bwrap's and the phone's init's output
  ground_truth.jsonl  the physics' ground truth (farm/virtual/groundtruth.py)
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from farm.errors import EnvironmentProblem
from farm.virtual.profile import Profile

SHELL_UID = 2000
SHELL_GID = 2000
TOOLS_SRC_DIR = Path(__file__).parent / "tools"
TOOLS_PHONE_DIR = "/system/lib/farm"
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
    "pm",
)
HOST_LIBOPENCL_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1",
    "/usr/lib/aarch64-linux-gnu/libOpenCL.so.1",
    "/usr/lib64/libOpenCL.so.1",
    "/usr/lib/libOpenCL.so.1",
)


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


def host_libopencl() -> str:
    """The host's OpenCL ICD loader, which the phone's /vendor/lib64/libOpenCL.so stands for."""
    for candidate in HOST_LIBOPENCL_CANDIDATES:
        if os.path.exists(candidate):
            return candidate
    raise EnvironmentProblem("no libOpenCL.so.1 on this machine", hint="run `make system-packages`")


def prepare_tree(profile: Profile, layout: StateLayout, *, privileged: bool) -> None:
    """Create the state dir trees (idempotent; keeps data/, sdcard/ and ctl/ persist state)."""
    lay = layout
    shell = (SHELL_UID, SHELL_GID) if privileged else (os.geteuid(), os.getegid())
    root = (0, 0) if privileged else shell
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
    _prepare_system(profile, lay)
    _prepare_vendor(profile, lay)
    _prepare_etc(lay)
    lay.meminfo.touch()


def _prepare_system(profile: Profile, layout: StateLayout) -> None:
    system = layout.system
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
    build_prop = "".join(f"{k}={v}\n" for k, v in sorted(profile.props.items()))
    (system / "build.prop").write_text(build_prop, encoding="utf-8")


def _prepare_vendor(profile: Profile, layout: StateLayout) -> None:
    vendor = layout.vendor
    if vendor.exists():
        shutil.rmtree(vendor)
    (vendor / "lib64").mkdir(parents=True)
    (vendor / "bin").mkdir()
    lib = profile.opencl.library
    if lib is None:
        return
    target = vendor / lib.removeprefix("/vendor/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if profile.opencl.install == "copy":
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
