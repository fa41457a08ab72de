"""farm.safe_text against independent readers: unicodedata, a CommonMark renderer, the csv module."""

from __future__ import annotations

import csv
import io
import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from farm.safe_text import CSV_FORMULA_STARTS, csv_cell, markdown, printable, terminal

ESC_MODEL = "Pixel\x1b[31mRED\x1b[0m\x1b]0;owned\x07\x1b[2J"
BIDI = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) == "Cc" or char in BIDI or char in "\u2028\u2029"


def test_terminal_shows_escape_sequences_as_text() -> None:
    assert terminal(ESC_MODEL) == "Pixel\\x1b[31mRED\\x1b[0m\\x1b]0;owned\\x07\\x1b[2J"
    assert terminal("hidden=4\n[2] local/VP fake: done\r") == "hidden=4\\n[2] local/VP fake: done\\r"
    assert terminal("C1 \x9b31m and \u202eevil") == "C1 \\x9b31m and \\u202eevil"
    assert terminal(3.5) == "3.5" and terminal("plain ümlaut – ok") == "plain ümlaut – ok"


@given(st.text())
def test_no_control_character_survives_and_the_text_stays_one_line(text: str) -> None:
    shown = terminal(text)
    assert not any(_unsafe(char) for char in shown)
    assert len(shown.splitlines()) <= 1


@given(st.text())
def test_printable_keeps_only_newlines_and_tabs(text: str) -> None:
    shown = printable(text)
    assert all(char in "\n\t" for char in shown if _unsafe(char))
    assert shown.count("\n") == text.count("\n")


MD = MarkdownIt("commonmark").enable("table")
HOSTILE_CELLS = (
    "[click](http://evil.example)",
    "![pixel](http://evil.example/t.png)",
    "<img src=x onerror=alert(1)>",
    "a | b | c",
    "`code` with \\| pipe",
    "*bold* and <http://evil.example>",
    ESC_MODEL,
    "line one\nline two\n\n# heading",
    "\\[escaped\\](http://evil.example)",
)


def _table(cell: str) -> str:
    return MD.render(f"| a | b |\n|---|---|\n| {markdown(cell)} | end |\n")


def test_markdown_cells_render_as_text_in_their_own_column() -> None:
    for cell in HOSTILE_CELLS:
        html = _table(cell)
        assert html.count("<td>") == 2, (cell, html)
        for tag in ("<a ", "<img", "<code", "<strong", "<em", "<h1", "<script"):
            assert tag not in html, (cell, html)
        assert "\x1b" not in html


def test_markdown_paragraph_starts_are_not_block_markers() -> None:
    for text, tag in (("# heading", "<h1"), ("- item", "<li"), ("+ item", "<li"), ("12. item", "<ol")):
        html = MD.render(markdown(text) + "\n")
        assert html.startswith("<p>") and tag not in html, (text, html)
    assert markdown("-5") == "-5" and markdown(0.25) == "0.25"  # numbers stay readable
    assert markdown("gpu_load") == "gpu_load"


def _written(values: list[object]) -> list[str]:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([csv_cell(v) for v in values])
    return next(csv.reader(io.StringIO(buffer.getvalue())))


def test_csv_formulas_are_neutralised_and_numbers_stay_numbers() -> None:
    formulas = [
        '=HYPERLINK("http://evil","x")',
        "+1+1",
        "-2+3",
        "@SUM(A1)",
        "\t=1",
        "\r=1",
        "=cmd|'/c calc'!A1",
    ]
    written = _written(formulas)
    for cell in written:
        assert cell.startswith("'") or not cell.startswith(CSV_FORMULA_STARTS), cell
        assert not any(_unsafe(char) for char in cell)
    assert written[1:5] == ["'+1+1", "'-2+3", "'@SUM(A1)", "\\t=1"]  # a tab is shown, not kept
    numbers: list[object] = [-5, -0.25, 1e-7, -3.0e10, 0, True]
    assert _written(numbers) == ["-5", "-0.25", "1e-07", "-30000000000.0", "0", "True"]
    assert [float(cell) for cell in _written([-0.1 * 3, 2.0 / 3])] == [-0.1 * 3, 2.0 / 3]  # every digit
    assert _written(["-5", "+1.5e3", "-.5"]) == ["-5", "+1.5e3", "-.5"]  # numbers written as text too
    assert _written([None, "plain", "a-b", ESC_MODEL]) == ["", "plain", "a-b", terminal(ESC_MODEL)]


def test_a_csv_cell_with_a_newline_stays_on_its_row() -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([csv_cell("two\nlines"), 1])
    assert buffer.getvalue() == "two\\nlines,1\n"
