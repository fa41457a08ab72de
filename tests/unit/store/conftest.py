"""The store tests run on both backends: `store` is an open Store on a fresh SQLite file, then on a
fresh database of the private PostgreSQL server (tests/fixtures/postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.store import Store, StoreLocation


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> StoreLocation:
    if request.param == "sqlite":
        return StoreLocation(tmp_path / "results")
    return StoreLocation(tmp_path / "results", request.getfixturevalue("pg_url"))


@pytest.fixture
def store(location: StoreLocation) -> Iterator[Store]:
    with Store(location) as opened:
        yield opened
