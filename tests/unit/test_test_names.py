"""Test modules outside packages are imported by their basename (pytest's default `prepend` import
mode), so two test files of one name in different folders abort the whole collection with "import
file mismatch" -- on a clean clone only, where no __pycache__ hides it. Names must be unique."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_two_test_files_share_a_name() -> None:
    by_name: defaultdict[str, list[str]] = defaultdict(list)
    for folder in (ROOT / "tests", ROOT / "vphone" / "tests"):
        for path in folder.rglob("test_*.py"):
            if not (path.parent / "__init__.py").exists():
                by_name[path.name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
