"""The one way farm's commands print `--json`: strict JSON (RFC 8259) that every parser reads.

Python's json module writes NaN, Infinity and -Infinity for non-finite floats by default; jq,
JavaScript and most other readers refuse the whole document then. A statistic that has no value
(the MAD of one run, a MAPE over nothing) is written as null instead, and json is told to refuse
anything non-finite that is left, so a non-JSON document can never reach a script.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import click


def json_text(document: object) -> str:
    """`document` as indented JSON text; non-finite floats become null."""
    return json.dumps(_finite(document), indent=2, allow_nan=False)


def echo_json(document: object) -> None:
    """Print `document` as JSON on stdout (what every `--json` option does)."""
    click.echo(json_text(document))


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
