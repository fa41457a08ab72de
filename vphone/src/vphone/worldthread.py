"""Run one phone world on a private event loop in a background thread, for synchronous callers
(tests, scripts): `with WorldThread(world) as w: subprocess.run(w.argv("getprop"), env=w.env)`."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from vphone.world import SandboxWorld

T = TypeVar("T")
STOP_TIMEOUT_S = 10.0


class WorldThread:
    """Starts the world (sandbox + physics) on enter, stops it and the loop on exit."""

    def __init__(self, world: SandboxWorld) -> None:
        self.world = world
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = STOP_TIMEOUT_S) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def __enter__(self) -> WorldThread:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"world-{self.world.serial}")
        self._thread.start()
        try:
            self.call(self.world.start())
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is None or self._thread is None:
            return
        try:
            self.call(self.world.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_TIMEOUT_S)
            self._loop.close()
            self._loop = None
            # A start or stop that ran out of time left the userdata partition mounted.
            self.world.sandbox.release()
            self._thread = None

    def sh(self, command: str, timeout_s: float = 30.0, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run `command` in the phone like `adb shell` (stdout and stderr kept apart)."""
        done = subprocess.run(
            self.world.shell_argv(command),
            env=self.world.shell_env(None),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            start_new_session=True,
            check=False,
            **kwargs,
        )
        self.call(self._settle())  # as the adb shell service does after each command
        return done

    async def _settle(self) -> None:
        self.world.settle()
