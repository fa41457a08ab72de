"""A stand-in PhoneWorld for testing the ADB side alone: a host directory as the phone's root.

Commands run with the host's /bin/sh inside a bubblewrap that binds the directory as `/` (host
/usr read-only), so /data/local/tmp is the phone's path. A two-line getprop serves identity. It
models no telemetry, no users and no permissions; the real world is vphone.world.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from vphone.phonefiles import HostDirFiles

_MARKER = "FARM_HOSTDIR_PHONE"
_MODEL = "HostDir Phone"


class HostDirWorld:
    def __init__(self, profile: str, serial: str, state_dir: Path) -> None:
        self.serial = serial
        self.profile = profile
        self.root = Path(state_dir) / "root"
        self._adbd_root = False
        self.props: dict[str, str] = {
            "ro.serialno": serial,
            "ro.product.name": "hostdir",
            "ro.product.model": _MODEL,
            "ro.product.device": "hostdir",
            "ro.build.type": "userdebug",
        }

    async def start(self) -> None:
        for sub in ("data/local/tmp", "sdcard", "system/bin", "tmp", "usr", "etc", "proc", "dev"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            if not (self.root / link).is_symlink():
                (self.root / link).symlink_to(target)
        (self.root / "data/local/tmp").chmod(0o771)
        self._write_getprop()

    def _write_getprop(self) -> None:
        lines = "\n".join(f'  {key}) echo "{value}";;' for key, value in self.props.items())
        listing = "\n".join(f"echo '[{key}]: [{value}]'" for key, value in self.props.items())
        script = self.root / "system/bin/getprop"
        body = f'if [ $# -eq 0 ]; then\n{listing}\nexit 0\nfi\ncase "$1" in\n{lines}\n  *) echo;;\nesac\n'
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)

    def _processes(self) -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if f"{_MARKER}={self.serial}".encode() in (entry / "environ").read_bytes():
                        pids.append(int(entry.name))
        return pids

    async def stop(self) -> None:
        for pid in self._processes():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    async def reboot(self) -> None:
        await self.stop()
        self._adbd_root = False

    def settle(self) -> None:
        return None  # no kernel files to judge

    def banner_props(self) -> dict[str, str]:
        return {k: v for k, v in self.props.items() if k.startswith("ro.product.")}

    def shell_argv(self, command: str | None) -> list[str]:
        sandbox = ["bwrap", "--bind", str(self.root), "/", "--ro-bind", "/usr", "/usr"]
        sandbox += ["--ro-bind", "/etc", "/etc"]
        sandbox += ["--proc", "/proc", "--dev", "/dev", "--chdir", "/", "--"]
        if command is None:
            return [*sandbox, "/bin/sh", "-i"]
        return [*sandbox, "/bin/sh", "-c", command]

    def shell_env(self, term: str | None) -> dict[str, str]:
        return {
            "PATH": "/system/bin:/usr/bin:/bin",
            "HOME": "/",
            "USER": "root" if self._adbd_root else "shell",
            "LOGNAME": "shell",
            "SHELL": "/system/bin/sh",
            "TMPDIR": "/data/local/tmp",
            "TERM": term or "dumb",
            _MARKER: self.serial,
        }

    async def open_files(self) -> HostDirFiles:
        return HostDirFiles(self.root)

    def can_root(self) -> bool:
        return True

    @property
    def adbd_root(self) -> bool:
        return self._adbd_root

    def set_adbd_root(self, root: bool) -> None:
        self._adbd_root = root

    def set_property(self, key: str, value: str) -> None:
        self.props[key] = value
        self._write_getprop()


def make_world(profile: str, serial: str, state_dir: Path, *, keep_data: bool = False) -> HostDirWorld:
    """The daemon's factory; a host dir keeps its files anyway (keep_data changes nothing)."""
    del keep_data
    return HostDirWorld(profile, serial, state_dir)
