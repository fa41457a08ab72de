import io
import json

from rich.console import Console

from farm.engine.model import Phase
from farm.live.from_store import snapshot_from_store
from farm.live.snapshot import Event, EventLevel, PhoneRow, Progress, Snapshot
from farm.live.view import MAX_REFRESH_HZ, LiveView, format_duration, plain_lines, render, start_live, watch
from farm.store import events as store_events
from farm.store.db import Store
from farm.store.devices import record_device
from farm.store.events import EventKind
from farm.store.runs import PlannedRun, insert_planned


def _snapshot(done: int = 3, state: Phase = Phase.RUNNING, events: int = 2) -> Snapshot:
    phones = (
        PhoneRow("emulator-5554", "local", state, "backend=gpu hidden=128", 0.5, 41.26, 77.0, 0.62, 2345.6),
        PhoneRow("[bold]x[/bold]", "lab2", Phase.OFFLINE),
    )
    recent = tuple(
        Event(
            1_700_000_000.0 + i, f"run r{i} done", EventLevel.INFO if i else EventLevel.ERROR, "emulator-5554"
        )
        for i in range(events)
    )
    return Snapshot("lstm_gpu_load", phones, Progress(done, 1, 12, 95.0), recent, 1_700_000_010.0)


def _recording_console(terminal: bool) -> Console:
    return Console(record=True, width=160, force_terminal=terminal, color_system=None, file=io.StringIO())


def test_render_shows_every_column_of_every_phone() -> None:
    console = _recording_console(True)
    console.print(render(_snapshot()))
    text = console.export_text()
    for expected in (
        "emulator-5554",
        "local",
        "running",
        "backend=gpu hidden=128",
        "50%",
        "41.3",
        "77",
        "62",
        "2346",
    ):
        assert expected in text
    # rich markup in a device name is shown literally, not interpreted
    assert "[bold]x[/bold]" in text
    assert "4/12 runs (33%): 3 done, 1 failed; ETA 1m35s" in text
    assert "run r1 done" in text and "error" in text
    # unknown values render as a dash, never as 0
    offline_line = next(line for line in text.splitlines() if "lab2" in line)
    assert "–" in offline_line and " 0 " not in offline_line


def test_plain_lines_report_changes_only() -> None:
    first = _snapshot(done=3)
    lines = plain_lines(None, first)
    assert "emulator-5554 (local): running backend=gpu hidden=128" in lines
    assert any("run r0 done" in line for line in lines)
    assert lines[-1].startswith("4/12 runs")
    second = _snapshot(done=4, events=3)
    changed = plain_lines(first, second)
    assert len(changed) == 2  # one new event, new progress; phones unchanged
    assert "run r2 done" in changed[0]
    assert plain_lines(second, second) == []


def test_not_a_terminal_degrades_to_plain_lines() -> None:
    console = _recording_console(False)
    with LiveView(console) as view:
        assert not view.live_mode
        view.update(_snapshot())
    text = console.export_text()
    assert "emulator-5554 (local): running" in text
    assert "┃" not in text and "│" not in text  # no table drawing


def test_live_mode_draws_table_and_throttles_refreshes() -> None:
    now = {"t": 100.0}
    console = _recording_console(True)
    view = LiveView(console, live=True, clock=lambda: now["t"])
    step_s = 1 / 16  # exact in binary: the draws fall on known updates
    with view:
        for i in range(16):  # 16 updates within 1 s
            view.update(_snapshot(done=i % 12))
            now["t"] += step_s
        # drawn at 0, 0.25, 0.5 and 0.75 s (MAX_REFRESH_HZ = 4); the last update is pending
        assert view.refreshes == MAX_REFRESH_HZ == 4
    # ... and drawn on exit
    assert view.refreshes == MAX_REFRESH_HZ + 1
    text = console.export_text()
    assert "emulator-5554" in text
    # the pending snapshot (update 15: 3 done + 1 failed) is the one drawn on exit; the drawn ones
    # were updates 0, 4, 8 and 12 (1, 5, 9 and 1 finished)
    assert "4/12 runs" in text and "2/12 runs" not in text


def test_start_live_and_watch_until_finished() -> None:
    console = _recording_console(False)
    view = start_live(_snapshot(), console)
    view.update(_snapshot(done=5))
    view.stop()
    snapshots = iter([_snapshot(done=4), _snapshot(done=8), _snapshot(done=11)])
    last = watch(lambda: next(snapshots), console=console, live=False, sleep=lambda _s: None)
    assert last.progress.finished == 12
    assert "12/12 runs" in console.export_text()


def test_format_duration() -> None:
    assert format_duration(None) == "–"
    assert format_duration(5.2) == "5s"
    assert format_duration(3725) == "1h02m"


def test_snapshot_from_store(tmp_path) -> None:
    with Store.in_results(tmp_path) as store:
        record_device(
            store, "local/emu-1", host="local", serial="emu-1", battery_pct=80.0, temperature_c=33.5
        )
        record_device(store, "local/other", host="local", serial="other")
        insert_planned(
            store, "exp", [PlannedRun(f"r{i}", "c", (("hidden", 32),), i, "local/emu-1", i) for i in range(4)]
        )
        store.execute(
            "UPDATE runs SET state = 'DONE', started_at = 0, finished_at = 10, ran_on = device_id "
            "WHERE run_id IN ('r0', 'r1')"
        )
        store.execute(
            "UPDATE runs SET state = 'RUNNING', started_at = 20, ran_on = device_id, attempts = 1 "
            "WHERE run_id = 'r2'"
        )
        store_events.emit(
            store, EventKind.FAULT, "phone dropped off", experiment="exp", device_id="local/emu-1"
        )
        snapshot = snapshot_from_store(store, "exp")
    assert [p.phone for p in snapshot.phones] == ["emu-1"]
    row = snapshot.phones[0]
    assert (row.state, row.cell, row.battery_pct, row.temperature_c) == ("running", "hidden=32", 80.0, 33.5)
    assert snapshot.progress == Progress(2, 0, 4, 20.0)
    assert snapshot.events[0].level is EventLevel.WARNING
    assert json.dumps(snapshot.events[0].message) == '"phone dropped off"'
