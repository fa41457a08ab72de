"""A world whose start hangs once its userdata partition is mounted, as a phone's boot on a host
too loaded to finish in time: the launcher's start timeout then ends the daemon (tests of what a
failed start leaves behind). `vphone.testing.stalled_world:make_world` as the world factory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from vphone.profiles import load_profile
from vphone.world import SandboxWorld

STALLED_MARKER = "stalled"  # in the phone's state dir once its partition is mounted


class StalledWorld(SandboxWorld):
    async def start(self) -> None:
        self.sandbox.prepare()  # mounts the userdata partition (vphone.userdata)
        (self.sandbox.layout.root / STALLED_MARKER).write_text("mounted\n", encoding="ascii")
        await asyncio.Event().wait()  # never set: the boot never ends


def make_world(profile_name: str, serial: str, state_dir: Path, *, keep_data: bool = False) -> StalledWorld:
    return StalledWorld(load_profile(profile_name), serial, Path(state_dir), keep_data=keep_data)
