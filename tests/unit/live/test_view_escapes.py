"""The live view and the plain progress lines never print a phone's or a file's control characters."""

from __future__ import annotations

import io

from rich.console import Console

from farm.engine.model import Phase
from farm.live.from_engine import progress_line
from farm.live.snapshot import Event, EventLevel, PhoneRow, Progress, Snapshot
from farm.live.view import plain_lines, render

ESC = "\x1b[31mRED\x1b]0;owned\x07"
CELL = "g=4\n[9] local/VP6520 fake-run: done"


def _snapshot() -> Snapshot:
    phones = (PhoneRow(f"VP{ESC}", "local", Phase.RUNNING, CELL, 0.5),)
    events = (
        Event(1_700_000_000.0, f"run failed: cnn exited 2: bad --g {ESC}\nTraceback", EventLevel.ERROR, "VP"),
    )
    return Snapshot("cnn_g", phones, Progress(1, 1, 4), events, 1_700_000_001.0)


def test_the_rich_view_shows_escapes_as_text() -> None:
    buffer = io.StringIO()
    Console(file=buffer, width=200, force_terminal=True, color_system=None).print(render(_snapshot()))
    text = buffer.getvalue()
    assert "\x07" not in text and "]0;owned" in text
    assert "\x1b[31m" not in text  # colours off: any ESC left would be the phone's
    assert "\\x1b[31mRED" in text and "g=4\\n[9]" in text


def test_plain_lines_are_one_line_each() -> None:
    lines = plain_lines(None, _snapshot())
    assert all("\n" not in line and "\x1b" not in line for line in lines)
    assert any("VP\\x1b[31mRED" in line and "g=4\\n[9] local/VP6520" in line for line in lines)


def test_a_progress_line_with_a_newline_in_a_factor_value_stays_one_line() -> None:
    line = progress_line(3, "local/VP6520", "cnn_g-abc", CELL, f"failed (exited 2: {ESC})")
    assert line == (
        "[3] local/VP6520 cnn_g-abc g=4\\n[9] local/VP6520 fake-run: done: failed (exited 2: "
        "\\x1b[31mRED\\x1b]0;owned\\x07)"
    )
