"""The one JSON reader for text a phone or a program on it sent: a benchmark's events, farm-probe's
document, a trace header, gpuload's reports.

Such text may be nested as deep as its writer likes; Python's parser then raises RecursionError,
which no caller expects from a parse and which would end up as an "internal error". Here it is
a ValueError like any other malformed JSON (json.JSONDecodeError is one too), so every caller's
`except ValueError` says what was wrong with the text, in one line.

    doc = loads(line)   # ValueError when it is not JSON or nested too deeply to read
"""

from __future__ import annotations

import json
from typing import Any


class TooDeep(ValueError):
    """JSON nested deeper than Python's parser goes (about a thousand levels)."""


def loads(text: str | bytes) -> Any:
    """json.loads, with nesting too deep to read raised as ValueError (TooDeep)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep("JSON nested too deeply to read") from None
