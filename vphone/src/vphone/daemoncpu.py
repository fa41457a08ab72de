"""The daemon's own CPU time, charged to the phone it was spent for (issue #27, item 2).

The daemon serves every phone from one Python thread (its event loop) plus a few worker threads.
A phone's processes are held to its budget by their cgroup, but the work the daemon does for the
phone (ADB framing, its services, its physics tick) ran on that thread for free: a raw ADB client
flooding one phone with tiny requests took the daemon's whole core, and every other phone's
round trip waited behind it. The thread cannot join the phone's cgroup (at the phone's quota it
would stall every phone behind the GIL), so the daemon measures instead:

- every asyncio task started on a phone's behalf (its connections, their services, its physics)
  runs in a context that names the phone's `CpuAccount`; the loop's task factory wraps such a
  task's coroutine so that each step (the code between two awaits, run on the loop's thread) is
  timed with time.thread_time(), which counts only this thread's CPU, and charged to the account.
  Worker threads charge their own thread_time (`charge_thread`);
- the account is a token bucket of the phone's share of the daemon's thread (one core, or
  $FARM_VIRTUAL_DAEMON_CORES, split evenly over the phones, a window's worth of burst): once
  the phone has spent more, its connections wait before reading their next packet (`pay`) until
  the share has paid the debt.
  A flooding phone slows itself down; and whatever its share, a phone's step gives the loop to
  the others after SLICE_S of CPU, so their requests keep their turn on it;
- the physics subtracts what the daemon spent on the phone over the last window from the phone's
  CPU quota (`rate_cores`), so the phone's processes plus the daemon's work for it stay within
  the phone's budget.

`vphone ls --json` shows each phone's `daemon_cpu_s` (CPU seconds charged so far) and
`daemon_wait_s` (how long its requests were held back).
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import math
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

WINDOW_S = 1.0  # the burst a phone may take at once, and the span `rate_cores` averages over
DAEMON_CORES = 1.0  # the event loop is one thread: what all phones share
# Less of it for the phones together (e.g. a host whose daemon must leave room to others).
DAEMON_CORES_ENV = "FARM_VIRTUAL_DAEMON_CORES"
MIN_WAIT_S = 0.001
SLICE_S = 0.001  # the loop's CPU one phone's step may take before the others get their turn
QUOTA_STEP_CORES = 0.05
MIN_QUOTA_CORES = 0.05  # a phone's processes keep some CPU however much the daemon did for it

T = TypeVar("T")


class CpuAccount:
    """One phone's share of the daemon's CPU: what it was charged and what it may still take."""

    def __init__(self, serial: str, share_cores: float) -> None:
        self.serial = serial
        self.share_cores = share_cores
        self.charged_s = 0.0
        self.waited_s = 0.0
        self._lock = threading.Lock()  # worker threads charge too
        self._tokens_s = share_cores * WINDOW_S
        self._updated = time.monotonic()
        self._window: collections.deque[tuple[float, float]] = collections.deque()  # (when, seconds)
        # thread_time() when the step of this phone's task now running on the loop began: one
        # step may handle many packets (a read of buffered data does not yield), so `pay`
        # charges the step so far before it judges.
        self.step_began: float | None = None
        self.step_start = 0.0  # thread_time() when that step began (not moved by settle_step)
        self.step_thread: int | None = None  # the thread running it (the loop's)

    def _refill(self, now: float) -> None:
        burst = self.share_cores * WINDOW_S
        self._tokens_s = min(burst, self._tokens_s + (now - self._updated) * self.share_cores)
        self._updated = now

    def charge(self, seconds: float, now: float | None = None) -> None:
        if seconds <= 0:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            self._refill(now)
            self._tokens_s -= seconds
            self.charged_s += seconds
            self._window.append((now, seconds))
            while self._window and self._window[0][0] < now - WINDOW_S:
                self._window.popleft()

    def debt_s(self, now: float | None = None) -> float:
        """How long this phone must wait for its share to cover what it spent (0: none)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._refill(now)
            return max(0.0, -self._tokens_s / self.share_cores)

    def rate_cores(self, now: float | None = None) -> float:
        """The daemon's CPU for this phone over the last window, in cores."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return sum(s for when, s in self._window if when >= now - WINDOW_S) / WINDOW_S

    def settle_step(self) -> None:
        """Charge the running step's CPU so far (called on the loop's thread)."""
        if self.step_began is not None:
            now = time.thread_time()
            self.charge(now - self.step_began)
            self.step_began = now

    async def pay(self) -> None:
        """Wait (without holding the loop) until the phone is within its share again; and give
        the loop to the others after a slice in any case: a read of buffered data does not
        yield, so one step could otherwise serve a flood's packets for seconds on end while every
        other phone's callbacks wait (whatever the phone's share: a loaded host may give the
        daemon less than it)."""
        self.settle_step()
        if self.step_began is not None and time.thread_time() - self.step_start > SLICE_S:
            await asyncio.sleep(0)
        while (debt := self.debt_s()) > 0:
            wait = max(debt, MIN_WAIT_S)
            self.waited_s += wait
            await asyncio.sleep(wait)


def less_daemon_cpu(cores: dict[str, float], daemon_cores: float) -> dict[str, float]:
    """The phone's CPU quotas (cgroup -> host cores) less what the daemon spends on it: cpu/ is
    lowered by `daemon_cores` (in steps of QUOTA_STEP_CORES, so the quota is not rewritten every
    tick), its subgroups capped at the result; never below MIN_QUOTA_CORES."""
    charged = math.ceil(daemon_cores / QUOTA_STEP_CORES - 0.5) * QUOTA_STEP_CORES
    if charged <= 0 or "cpu" not in cores:
        return cores
    top = max(MIN_QUOTA_CORES, cores["cpu"] - charged)
    return {
        group: top if group == "cpu" else min(value, top) if group.startswith("cpu/") else value
        for group, value in cores.items()
    }


def share_cores(phone_count: int, daemon_cores: float = DAEMON_CORES) -> float:
    return daemon_cores / max(1, phone_count)


def daemon_cores_of(value: str | None) -> float:
    """DAEMON_CORES_ENV's value (what the daemon may spend on its phones together, in cores);
    ValueError says what is wrong with it."""
    if value is None or not value.strip():
        return DAEMON_CORES
    try:
        cores = float(value)
    except ValueError:
        cores = float("nan")
    if not 0 < cores <= DAEMON_CORES:
        raise ValueError(f"{DAEMON_CORES_ENV}={value}: want cores in (0, {DAEMON_CORES:g}]")
    return cores


_account: contextvars.ContextVar[CpuAccount | None] = contextvars.ContextVar(
    "vphone_cpu_account", default=None
)


class _Charged(collections.abc.Coroutine[Any, Any, Any]):
    """A coroutine whose every step is charged to an account (the thread's CPU, not wall time)."""

    def __init__(self, inner: Coroutine[Any, Any, Any], account: CpuAccount) -> None:
        self._inner = inner
        self._account = account

    def _timed(self, step: Callable[[], Any]) -> Any:
        self._account.step_began = self._account.step_start = time.thread_time()
        self._account.step_thread = threading.get_ident()
        try:
            return step()
        finally:
            self._account.settle_step()
            self._account.step_began = None
            self._account.step_thread = None

    def send(self, value: Any) -> Any:
        return self._timed(lambda: self._inner.send(value))

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        return self._timed(lambda: self._inner.throw(typ, val, tb))

    def close(self) -> None:
        self._inner.close()

    def __await__(self) -> Generator[Any, None, Any]:
        return self._inner.__await__()


def _task_factory(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, Any],
    context: contextvars.Context | None = None,
) -> asyncio.Task[Any]:
    account = context.get(_account) if context is not None else _account.get()
    wrapped: Coroutine[Any, Any, Any] = coro if account is None else _Charged(coro, account)
    return asyncio.Task(wrapped, loop=loop, context=context)


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Charge the tasks this loop starts on a phone's behalf (see the module doc)."""
    loop.set_task_factory(_task_factory)  # type: ignore[arg-type]


def create_task(account: CpuAccount, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start `coro` as work for `account`'s phone: it and every task it starts are charged."""
    context = contextvars.copy_context()
    context.run(_account.set, account)
    return asyncio.get_running_loop().create_task(coro, context=context)


def current() -> CpuAccount | None:
    return _account.get()


def charge_thread(account: CpuAccount | None, work: Callable[[], T]) -> T:
    """Run `work` on this (worker) thread and charge its CPU to `account` (unless this thread is
    running a step of the account's task already: that step is charged as a whole)."""
    if account is None or account.step_thread == threading.get_ident():
        return work()
    start = time.thread_time()
    try:
        return work()
    finally:
        account.charge(time.thread_time() - start)
