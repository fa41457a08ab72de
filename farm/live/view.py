"""The live terminal view of a running experiment, rendered from a pure Snapshot with rich.

`render(snapshot)` builds the rich renderable (a table with one row per phone, overall progress
with ETA, recent events); `plain_lines(previous, snapshot)` says what changed as log lines for
logs, pipes and `--no-live`. `LiveView` picks one of the two and refreshes at most
MAX_REFRESH_HZ times a second; `watch` drives it from a snapshot source (`farm status --watch`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from farm.engine.model import Phase
from farm.live.snapshot import Event, EventLevel, PhoneRow, Progress, Snapshot
from farm.safe_text import terminal

MAX_REFRESH_HZ = 4.0
RECENT_EVENTS = 8
_STATE_STYLES = {
    Phase.RUNNING: "bold green",
    Phase.PREPARING: "cyan",
    Phase.BASELINE: "cyan",
    Phase.LOADING: "cyan",
    Phase.CHARGING: "blue",
    Phase.COOLING: "blue",
    Phase.RESTORING: "cyan",
    Phase.IDLE: "dim",
    Phase.OFFLINE: "bold red",
    Phase.FAILED: "bold red",
    Phase.LOST: "bold red",
}
_LEVEL_STYLES = {EventLevel.INFO: "", EventLevel.WARNING: "yellow", EventLevel.ERROR: "bold red"}


def _dash(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "–"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def format_progress(progress: Progress) -> str:
    return (
        f"{progress.finished}/{progress.total} runs ({progress.fraction * 100:.0f}%): {progress.done} done, "
        f"{progress.failed} failed; ETA {format_duration(progress.eta_s)}"
    )


def _bar(fraction: float | None, width: int = 10) -> str:
    if fraction is None:
        return "–"
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled) + f" {fraction * 100:3.0f}%"


def phone_cells(row: PhoneRow) -> tuple[str, ...]:
    """The texts of one phone's row, in column order (plain strings: rich does not parse markup)."""
    return (
        terminal(row.phone),
        terminal(row.host),
        row.state.value,
        terminal(row.cell or "–"),
        _bar(row.run_progress),
        _dash(row.temperature_c, ".1f"),
        _dash(row.battery_pct, ".0f"),
        _dash(None if row.gpu_load_achieved is None else row.gpu_load_achieved * 100, ".0f"),
        _dash(row.power_mw, ".0f"),
    )


COLUMNS: tuple[str, ...] = (
    "phone",
    "host",
    "state",
    "cell",
    "run",
    "temp °C",
    "batt %",
    "GPU load %",
    "power mW",
)


def _time(event: Event) -> str:
    return time.strftime("%H:%M:%S", time.localtime(event.time_s))


def format_event(event: Event) -> str:
    where = f"{event.phone}: " if event.phone else ""
    return terminal(f"{_time(event)} {event.level.value:<7} {where}{event.message}")


def render(snapshot: Snapshot, *, events: int = RECENT_EVENTS) -> RenderableType:
    table = Table(title=Text(terminal(f"farm: {snapshot.experiment}")), title_justify="left", expand=False)
    for column in COLUMNS:
        table.add_column(column, justify="right" if column.endswith(("%", "mW", "°C")) else "left")
    for row in snapshot.phones:
        cells = [Text(cell) for cell in phone_cells(row)]
        cells[2].stylize(_STATE_STYLES.get(row.state, ""))
        table.add_row(*cells)
    progress = Text(format_progress(snapshot.progress), style="bold")
    recent = [Text(format_event(e), style=_LEVEL_STYLES[e.level]) for e in snapshot.recent_events(events)]
    return Group(table, progress, *recent)


def plain_lines(previous: Snapshot | None, snapshot: Snapshot) -> list[str]:
    """Log lines for what changed since `previous` (everything for the first snapshot)."""
    lines: list[str] = []
    before = {row.phone: row for row in previous.phones} if previous else {}
    for row in snapshot.phones:
        old = before.get(row.phone)
        if old is None or (old.state, old.cell) != (row.state, row.cell):
            cell = f" {row.cell}" if row.cell else ""
            lines.append(terminal(f"{row.phone} ({row.host}): {row.state}{cell}"))
    seen = set(previous.events) if previous else set()
    lines += [format_event(e) for e in sorted(snapshot.events, key=lambda e: e.time_s) if e not in seen]
    if previous is None or previous.progress != snapshot.progress:
        lines.append(format_progress(snapshot.progress))
    return lines


class LiveView:
    """Shows snapshots: a rich Live table on a terminal, plain log lines otherwise.

    Use as a context manager; call `update(snapshot)` as often as you like: the screen is redrawn
    at most MAX_REFRESH_HZ times a second, and the last snapshot is always drawn on exit.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console or Console()
        self.live_mode = self.console.is_terminal if live is None else live
        self._clock = clock
        self._live: Live | None = None
        self._last_draw: float | None = None
        self._pending: Snapshot | None = None
        self._previous: Snapshot | None = None
        self.refreshes = 0

    def start(self) -> LiveView:
        if self.live_mode and self._live is None:
            self._live = Live(console=self.console, auto_refresh=False, transient=False)
            self._live.start()
        return self

    def stop(self) -> None:
        """Draw the last snapshot if it is still pending, then leave the screen as it is."""
        if self._pending is not None:
            self._draw(self._pending)
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> LiveView:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def update(self, snapshot: Snapshot) -> None:
        now = self._clock()
        if self._last_draw is not None and now - self._last_draw < 1.0 / MAX_REFRESH_HZ:
            self._pending = snapshot
            return
        self._last_draw = now
        self._draw(snapshot)

    def _draw(self, snapshot: Snapshot) -> None:
        self._pending = None
        self.refreshes += 1
        if self._live is not None:
            self._live.update(render(snapshot), refresh=True)
        else:
            for line in plain_lines(self._previous, snapshot):
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        self._previous = snapshot


def start_live(snapshot: Snapshot, console: Console | None = None, *, live: bool | None = None) -> LiveView:
    """Start a view showing `snapshot`; call `.update(snapshot)` per tick and `.stop()` at the end."""
    view = LiveView(console, live=live).start()
    view.update(snapshot)
    return view


def watch(
    fetch: Callable[[], Snapshot],
    *,
    console: Console | None = None,
    live: bool | None = None,
    interval_s: float = 1.0,
    until: Callable[[Snapshot], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Snapshot:
    """Fetch and show snapshots every interval_s until `until(snapshot)` (default: all runs
    finished) or Ctrl-C; returns the last snapshot. `farm status --watch` calls this with a
    fetch that reads the store (farm.live.from_store.snapshot_from_store)."""
    done = until or (lambda s: s.progress.total > 0 and s.progress.finished >= s.progress.total)
    with LiveView(console, live=live) as view:
        snapshot = fetch()
        view.update(snapshot)
        while not done(snapshot):
            sleep(max(interval_s, 1.0 / MAX_REFRESH_HZ))
            snapshot = fetch()
            view.update(snapshot)
    return snapshot
