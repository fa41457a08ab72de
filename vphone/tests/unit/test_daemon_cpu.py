"""The daemon's CPU charged to the phone it was spent for (vphone.daemoncpu): each step of a
phone's task is charged with the loop thread's CPU time, an account over its share waits, and the
phone's CPU quota is lowered by what the daemon spent on it."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from vphone.adb import server
from vphone.adb.server import PhoneServer
from vphone.daemoncpu import CpuAccount

from vphone import daemoncpu

BUSY_S = 0.2


def burn(seconds: float) -> None:
    """Spin on this thread's CPU clock (an independent truth: time.thread_time itself)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def busy(rounds: int) -> None:
    for _ in range(rounds):
        burn(BUSY_S / rounds)
        await asyncio.sleep(0)


async def idle(rounds: int) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_each_phone_is_charged_the_loop_cpu_of_its_own_tasks() -> None:
    loud, quiet = CpuAccount("A", 1.0), CpuAccount("B", 1.0)

    async def main() -> None:
        daemoncpu.install(asyncio.get_running_loop())

        async def loud_phone() -> None:
            # a task started by the phone's work is the phone's work too
            await asyncio.gather(busy(20), asyncio.get_running_loop().create_task(busy(20)))

        await asyncio.gather(
            daemoncpu.create_task(loud, loud_phone()), daemoncpu.create_task(quiet, idle(40))
        )

    asyncio.run(main())
    assert loud.charged_s >= 2 * BUSY_S * 0.95
    assert quiet.charged_s < BUSY_S / 10, "the quiet phone was charged the loud one's steps"


def test_worker_thread_cpu_is_charged() -> None:
    account = CpuAccount("A", 1.0)
    daemoncpu.charge_thread(account, lambda: burn(BUSY_S))
    assert account.charged_s >= BUSY_S * 0.95
    assert daemoncpu.charge_thread(None, lambda: 7) == 7


def test_work_inside_a_charged_step_is_not_charged_twice() -> None:
    """The physics handles the phone's writes on its watch thread, or on the loop's when a command
    ends (settle): there the step is charged already."""
    account = CpuAccount("A", 1.0)

    async def step() -> None:
        daemoncpu.charge_thread(account, lambda: burn(BUSY_S))

    async def main() -> None:
        daemoncpu.install(asyncio.get_running_loop())
        await daemoncpu.create_task(account, step())

    asyncio.run(main())
    assert BUSY_S * 0.95 <= account.charged_s < BUSY_S * 1.5


def test_an_account_over_its_share_owes_time_and_pays_it_by_waiting() -> None:
    account = CpuAccount("A", 0.25)  # a burst of 0.25 s, then 0.25 CPU-s per second
    now = time.monotonic()
    account.charge(0.25, now)
    assert account.debt_s(now) == 0.0
    account.charge(0.5, now)
    assert account.debt_s(now) == pytest.approx(2.0)  # 0.5 s over, at 0.25 cores
    assert account.debt_s(now + 1.0) == pytest.approx(1.0)
    assert account.debt_s(now + 3.0) == 0.0
    assert account.rate_cores(now) == pytest.approx(0.75)
    assert account.rate_cores(now + 2 * daemoncpu.WINDOW_S) == 0.0

    small = CpuAccount("B", 50.0)  # owes 10 ms: the wait is taken and counted
    small.charge(50.0 * daemoncpu.WINDOW_S + 0.5)
    asyncio.run(small.pay())
    assert small.waited_s > 0 and small.debt_s() == 0.0


def test_the_phone_quota_is_lowered_by_the_daemon_cpu_spent_on_it() -> None:
    cores = {"cpu": 2.0, "cpu/big": 1.5, "cpu/little": 0.5, "gpu": 1.0}
    assert daemoncpu.less_daemon_cpu(cores, 0.0) == cores
    assert daemoncpu.less_daemon_cpu(cores, 0.01) == cores  # under a step: no cgroup write
    lowered = daemoncpu.less_daemon_cpu(cores, 0.6)
    assert lowered == pytest.approx({"cpu": 1.4, "cpu/big": 1.4, "cpu/little": 0.5, "gpu": 1.0})
    assert daemoncpu.less_daemon_cpu(cores, 5.0)["cpu"] == daemoncpu.MIN_QUOTA_CORES


def test_shares_split_the_daemon_thread() -> None:
    assert daemoncpu.share_cores(4) == pytest.approx(daemoncpu.DAEMON_CORES / 4)
    assert daemoncpu.share_cores(0) == daemoncpu.DAEMON_CORES


def test_the_daemon_cores_setting_is_checked() -> None:
    assert daemoncpu.daemon_cores_of(None) == daemoncpu.DAEMON_CORES
    assert daemoncpu.daemon_cores_of("0.25") == 0.25
    for bad in ("0", "-1", "2", "lots", "nan"):
        with pytest.raises(ValueError, match=daemoncpu.DAEMON_CORES_ENV):
            daemoncpu.daemon_cores_of(bad)


def test_a_phone_within_its_share_still_gives_the_loop_to_the_others() -> None:
    """A connection reading buffered packets never suspends on its own (its reads return at
    once): before, one step served a whole flood while the other phones waited."""
    loud, quiet = CpuAccount("A", 100.0), CpuAccount("B", 100.0)  # shares it never exceeds
    finished: list[str] = []

    async def flood_loop() -> None:
        for _ in range(400):
            await loud.pay()  # no suspension of its own unless pay gives the loop away
            burn(daemoncpu.SLICE_S / 4)
        finished.append("A")

    async def round_trip() -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        finished.append("B")

    async def main() -> None:
        daemoncpu.install(asyncio.get_running_loop())
        a = daemoncpu.create_task(loud, flood_loop())
        await asyncio.sleep(0)  # A's step is running first
        await asyncio.gather(a, daemoncpu.create_task(quiet, round_trip()))

    asyncio.run(main())
    assert finished == ["B", "A"]
    assert loud.waited_s == 0.0


class RebootWorld:
    """Just enough PhoneWorld for a reboot: it records whose work its reboot ran as."""

    serial = "T2"

    def __init__(self) -> None:
        self.accounts: list[CpuAccount | None] = []
        self.rebooted = asyncio.Event()

    async def reboot(self) -> None:
        self.accounts.append(daemoncpu.current())
        self.rebooted.set()


def test_a_reboot_asked_from_outside_the_phone_is_still_its_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault from the control socket (no phone's context) reboots the phone: the physics its
    reboot starts again must be charged to the phone and lower its quota (before: nobody's)."""
    monkeypatch.setattr(server, "RESTART_DELAY_S", 0.0)
    monkeypatch.setattr(server, "REBOOT_OFFLINE_S", 0.0)
    world = RebootWorld()

    async def main() -> PhoneServer:
        daemoncpu.install(asyncio.get_running_loop())
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            phone = PhoneServer(world, listener, "test")  # type: ignore[arg-type]
            phone.begin_reboot()
            await asyncio.wait_for(world.rebooted.wait(), timeout=10)
            return phone

    phone = asyncio.run(main())
    assert world.accounts == [phone.cpu]
