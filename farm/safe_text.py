"""Untrusted text made safe for the medium it is shown in: a terminal, Markdown, HTML or CSV.

A phone controls its model string, its props, its dumpsys output and a benchmark's stderr; an
experiment file controls names, descriptions and factor levels. Any of them can carry ESC
sequences (recolour or rewrite the terminal, set its title, hide text), raw newlines (forge
progress or log lines), bidi overrides (show text in another order than it is), Markdown or HTML
(links and tracking images in a report), or spreadsheet formulas (`=HYPERLINK(...)` in a CSV).
Nothing is rejected where it enters: the value is kept as it was measured or written, and each
output edge calls the function for its medium once, as it renders:

- `terminal(text)`: one line; every control character shown as an escape (`\\x1b`, `\\n`).
- `printable(text)`: the same, but newlines and tabs kept (a `<pre>` block, a code fence).
- `markdown(text)`: one line for a Markdown table cell or paragraph: controls escaped, no raw
  HTML, no links or images, no code spans, no column breaks, no block markers at the start.
- HTML needs `printable` only: jinja2's autoescape already turns `< > & " '` into entities.
- `csv_cell(value)`: numbers stay numbers; text has its controls escaped and, per OWASP's CSV
  injection advice, a leading `= + - @` (tab, CR) neutralised by a `'` (a plain number written
  as text, like "-5", is not a formula and stays as it is).
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls; Arabic letter mark, LRM/RLM, line/paragraph separators, and
# the bidi embeddings, overrides and isolates ("Trojan source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_BUT_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# Characters that start Markdown inline syntax able to link, embed, run HTML or break a table.
# `_` and `~` are left alone: they only emphasise (cosmetic), and `gpu_load` stays readable.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]|])")
_MARKDOWN_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))
# A paragraph or list item that starts like this becomes a heading, a list or a rule.
_MARKDOWN_BLOCK_START = re.compile(r"^(#|[-+=]|\d+(?=[.)]))")

CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal(text: object) -> str:
    """`text` as one line a terminal shows as it is: no control character survives."""
    return _UNSAFE.sub(_escape, str(text))


def printable(text: object) -> str:
    """Like `terminal`, but newlines and tabs are kept (multi-line blocks)."""
    return _UNSAFE_BUT_LINES.sub(_escape, str(text))


def markdown(text: object) -> str:
    """`text` for one Markdown table cell or paragraph; whitespace runs (newlines too) become one space."""
    line = terminal(" ".join(str(text).split()))
    if _PLAIN_NUMBER.fullmatch(line):
        return line  # -5 is a number, not a list item
    line = _MARKDOWN_SPECIAL.sub(r"\\\1", line)
    for raw, entity in _MARKDOWN_ENTITIES:
        line = line.replace(raw, entity)
    return _MARKDOWN_BLOCK_START.sub(r"\1\\" if line[:1].isdigit() else r"\\\1", line, count=1)


def csv_cell(value: object) -> str | int:
    """A CSV cell: numbers as numbers (floats with every digit), text safe for a spreadsheet and a
    terminal."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):  # bool too: csv writes True / False
        return value
    text = terminal(value)
    if text.startswith(CSV_FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text
