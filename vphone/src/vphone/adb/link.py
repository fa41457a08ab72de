"""An optional model of the cable between the host and a phone: per-packet latency and bandwidth.

By default a virtual phone is as fast as loopback allows. A lab's phones hang off USB, where every
ADB packet waits for the bus and a push is bounded by its bandwidth, so farm's round-trip count
(not loopback's speed) is what its overhead is made of. A link model puts that back on purpose:
each packet, either way, is delivered `latency_s` after the previous packet in its direction
finished crossing the link, and crossing takes `size / bandwidth`. Packets keep their order.

The presets are typical, not any particular phone's: adb over USB 2 high-speed moves 30-40 MB/s
(adbd's own copy loop, not the 60 MB/s of the bus) with a transfer turnaround of about a
millisecond at the 125 us microframe; over USB 3 adb push reaches 100-300 MB/s with a turnaround
of a few hundred microseconds.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


class LinkKind(enum.StrEnum):
    NONE = "none"
    USB2 = "usb2"
    USB3 = "usb3"


@dataclass(frozen=True)
class LinkModel:
    latency_s: float  # one way, per packet
    bandwidth_bytes_per_s: float

    def crossing_s(self, n_bytes: int) -> float:
        return n_bytes / self.bandwidth_bytes_per_s


PRESETS: dict[LinkKind, LinkModel | None] = {
    LinkKind.NONE: None,
    LinkKind.USB2: LinkModel(latency_s=0.0005, bandwidth_bytes_per_s=35e6),
    LinkKind.USB3: LinkModel(latency_s=0.00015, bandwidth_bytes_per_s=200e6),
}


def delivery_times(model: LinkModel, start_s: float, sizes: list[int]) -> list[float]:
    """When each of `sizes` (sent back to back from `start_s`) arrives (pure; for tests and the
    pacer's rule): a packet starts crossing when the previous one has crossed."""
    times = []
    free_at = start_s
    for size in sizes:
        free_at += model.crossing_s(size)
        times.append(free_at + model.latency_s)
    return times


class Pacer:
    """Delivers byte strings through `deliver` in order, each at its time under the model.

    `send()` never blocks (OKAY and CLSE are sent from synchronous code); `sent()` waits until
    everything queued so far has been delivered, which is what backpressure on a stream needs."""

    def __init__(self, model: LinkModel, deliver: Callable[[bytes], None]) -> None:
        self._model = model
        self._deliver = deliver
        self._queue: deque[tuple[float, bytes]] = deque()
        self._free_at = 0.0
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    def send(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        self._free_at = max(self._free_at, loop.time()) + self._model.crossing_s(len(data))
        self._queue.append((self._free_at + self._model.latency_s, data))
        self._idle.clear()
        self._wake.set()
        if self._task is None:
            self._task = loop.create_task(self._run())

    async def sent(self) -> None:
        await self._idle.wait()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
            due_s, data = self._queue[0]
            delay_s = due_s - loop.time()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            self._queue.popleft()
            self._deliver(data)

    def close(self) -> None:
        """Stop delivering (the connection is gone); what is still queued is dropped."""
        if self._task is not None:
            self._task.cancel()
        self._queue.clear()
        self._idle.set()


async def cross_inbound(model: LinkModel | None, n_bytes: int) -> None:
    """Hold a packet the host sent for its trip over the link (the packet loop reads in order,
    so holding it here delays every later packet too, as a bus would)."""
    if model is not None:
        await asyncio.sleep(model.latency_s + model.crossing_s(n_bytes))
