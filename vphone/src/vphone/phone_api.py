"""The seam between the ADB device side (protocol, services, daemon) and one phone's world.

The ADB side (vphone/src/vphone/adb/*, daemon.py) speaks the wire protocol and runs streams; it knows
nothing about Android. The phone side (sandbox.py, profiles, tools, physics.py) knows Android's
layout, runs commands in the sandbox and drives the telemetry files; it knows nothing about ADB.
Both code against this Protocol only.
"""

from __future__ import annotations

from typing import Protocol

from vphone.phonefiles import PhoneFiles


class PhoneWorld(Protocol):
    """One virtual phone's sandbox, properties and physics. Created without I/O; `start` does it."""

    serial: str  # ro.serialno, unique per phone

    async def start(self) -> None:
        """Lay out the phone's filesystem, start its init/namespace and its physics task."""

    async def stop(self) -> None:
        """Kill every process of this phone and stop the physics; idempotent."""

    async def reboot(self) -> None:
        """Kill every process, reset volatile state (adbd root, setprops, battery overrides)."""

    def settle(self) -> None:
        """A command of the phone has ended: handle what it wrote to the phone's kernel files
        (clock nodes, cgroups, mount requests) before its end is reported, so the next command
        sees the kernel's answer. Runs on the world's loop; cheap when nothing was written."""

    def banner_props(self) -> dict[str, str]:
        """ro.product.name / ro.product.model / ro.product.device for the CNXN banner."""

    def shell_argv(self, command: str | None) -> list[str]:
        """argv (host side) that runs `/system/bin/sh -c command` inside the phone, as the
        current adbd user (shell, or root after `adb root`); None means an interactive login
        shell. The process must be killable as a group: the caller starts it with
        start_new_session=True and signals the process group on stream close."""

    def shell_env(self, term: str | None) -> dict[str, str]:
        """Environment for shell_argv, as adbd gives it (HOME, TMPDIR, USER=shell, TERM...)."""

    async def open_files(self) -> PhoneFiles:
        """File access for one sync session as the current adbd user (shell, or root after
        `adb root`), with the phone's own errors (vphone.phonefiles); close() it."""

    def can_root(self) -> bool:
        """Whether `adb root` may succeed (userdebug/eng profile)."""

    @property
    def adbd_root(self) -> bool:
        """Whether adbd currently runs as root."""

    def set_adbd_root(self, root: bool) -> None:
        """Switch the user that later shell_argv commands run as."""

    def set_property(self, key: str, value: str) -> None:
        """setprop from the adbd side (e.g. service.adb.tcp.port for tcpip:)."""
