"""What every bench prints and keeps: a two-column table and results/bench/<name>.json."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def report(
    out: Path, bench: str, rows: Sequence[tuple[str, str]], results: dict[str, Any], root: Path
) -> None:
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}}  value")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"bench": bench, "cpu_count": os.cpu_count(), **results}, indent=2) + "\n")
    print(f"wrote {out.relative_to(root)}")
