"""The cable model's rule (vphone/src/vphone/adb/link.py) on synthetic packets: back-to-back packets
cross one after another, each arrives `latency` after it crossed, and the pacer keeps order and
never delivers early (a real event loop; only lower bounds on time are asserted)."""

from __future__ import annotations

import asyncio

import pytest
from vphone.adb.link import PRESETS, LinkKind, LinkModel, Pacer, delivery_times

MODEL = LinkModel(latency_s=0.002, bandwidth_bytes_per_s=1e6)
SIZES = [4000, 10, 2000, 10]


def test_back_to_back_packets_cross_one_after_another() -> None:
    times = delivery_times(MODEL, 10.0, [1000, 3000, 0])
    assert times == pytest.approx([10.0 + 0.001 + 0.002, 10.0 + 0.004 + 0.002, 10.0 + 0.004 + 0.002])


def test_presets_order_usb3_faster_than_usb2_and_none_is_no_model() -> None:
    usb2, usb3 = PRESETS[LinkKind.USB2], PRESETS[LinkKind.USB3]
    assert PRESETS[LinkKind.NONE] is None
    assert usb2 is not None and usb3 is not None
    assert usb3.latency_s < usb2.latency_s and usb3.bandwidth_bytes_per_s > usb2.bandwidth_bytes_per_s


def test_pacer_delivers_in_order_never_early_and_sent_waits_for_all() -> None:
    async def scenario() -> tuple[list[tuple[float, bytes]], list[float], float]:
        loop = asyncio.get_running_loop()
        delivered: list[tuple[float, bytes]] = []
        pacer = Pacer(MODEL, lambda data: delivered.append((loop.time(), data)))
        start = loop.time()
        for i, size in enumerate(SIZES):
            pacer.send(bytes([i]) * size)
        await pacer.sent()
        elapsed_s = loop.time() - start
        pacer.close()
        return delivered, delivery_times(MODEL, start, SIZES), elapsed_s

    delivered, due, elapsed_s = asyncio.run(scenario())
    assert [data[0] for _, data in delivered] == [0, 1, 2, 3]
    assert [len(data) for _, data in delivered] == SIZES
    # Never early by more than the loop clock's resolution (a packet's crossing is >= 10 us here).
    assert all(at >= due_s - 1e-3 for (at, _), due_s in zip(delivered, due, strict=True))
    assert elapsed_s >= sum(MODEL.crossing_s(n) for n in SIZES) + MODEL.latency_s - 1e-3
