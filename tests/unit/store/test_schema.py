"""The same schema and migrations on both backends; a schema from a newer farm is refused."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import psycopg
import pytest

from farm.errors import StoreSchemaNewer
from farm.store import Store, StoreLocation
from farm.store.backend.sql import postgres_ddl, statements
from farm.store.schema import MIGRATIONS, TABLE_DOCS
from tests.fixtures.postgres import PostgresServer


def _sqlite_columns(path: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    conn.close()
    return {t: c for t, c in columns.items() if not t.startswith("sqlite_")}


def _postgres_columns(url: str) -> dict[str, list[str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name <> 'farm_schema' "
            "ORDER BY table_name, ordinal_position"
        ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    return columns


def test_both_backends_get_the_same_tables_and_columns(tmp_path: Path, pg_url: str) -> None:
    with Store(StoreLocation(tmp_path)) as lite, Store(StoreLocation(tmp_path, pg_url)) as pg:
        assert lite.version == pg.version == len(MIGRATIONS)
    lite_columns = _sqlite_columns(tmp_path / "farm.db")
    assert set(TABLE_DOCS) == set(lite_columns)
    assert _postgres_columns(pg_url) == lite_columns


def test_time_columns_keep_sub_microsecond_unix_seconds_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    """REAL is 4 bytes on PostgreSQL: the schema must say DOUBLE PRECISION, or times lose minutes."""
    assert "DOUBLE PRECISION" in postgres_ddl(MIGRATIONS[0]) and " REAL" not in postgres_ddl(MIGRATIONS[0])
    with Store(StoreLocation(tmp_path, pg_url)) as pg:
        pg.execute("INSERT INTO events (ts, kind, message) VALUES (?, 'note', 'x')", (1767225600.123456,))
        assert pg.query("SELECT ts FROM events")[0]["ts"] == 1767225600.123456


def test_sqlite_store_is_in_wal_mode(tmp_path: Path) -> None:
    with Store(StoreLocation(tmp_path)) as store:
        assert store.query("PRAGMA journal_mode")[0][0] == "wal"


def test_migrate_applies_only_missing_migrations_on_both(location: StoreLocation) -> None:
    # Build the store at version 1 by hand, as a farm of that time would have.
    with Store(location) as store:
        assert store.migrate() == 0
    if location.url is None:
        location.sqlite_path.unlink()
        conn = sqlite3.connect(location.sqlite_path)
        for statement in statements(MIGRATIONS[0]):
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
        conn.close()
    else:
        with psycopg.connect(location.url, autocommit=True) as conn:
            conn.execute("ALTER TABLE executions DROP COLUMN results_dir")
            for column in ("quarantined_at", "quarantine_reason", "quarantined_by"):
                conn.execute(f"ALTER TABLE devices DROP COLUMN {column}")
            conn.execute("DROP TABLE schedule_firings")
            conn.execute("DROP TABLE layers")
            conn.execute("ALTER TABLE devices DROP COLUMN clocks_restore_json")
            conn.execute("ALTER TABLE devices DROP COLUMN screen_timeout_restore")
            conn.execute("UPDATE farm_schema SET version = 1")
    store = Store(location)
    store.open()  # migrates
    try:
        assert store.version == len(MIGRATIONS)
        assert store.query("SELECT COUNT(*) FROM schedule_firings")[0][0] == 0
        assert store.query("SELECT COUNT(*) FROM layers")[0][0] == 0
    finally:
        store.close()


def _set_version(location: StoreLocation, version: int) -> None:
    if location.url is None:
        conn = sqlite3.connect(location.sqlite_path)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
        conn.close()
    else:
        with psycopg.connect(location.url, autocommit=True) as conn:
            conn.execute("UPDATE farm_schema SET version = %s", (version,))


@pytest.mark.parametrize("read_only", [False, True])
def test_schema_from_a_newer_farm_is_refused_and_nothing_written(
    location: StoreLocation, read_only: bool
) -> None:
    with Store(location) as store:
        store.execute("INSERT INTO events (ts, kind, message) VALUES (1, 'note', 'before')")
    _set_version(location, len(MIGRATIONS) + 1)
    with pytest.raises(StoreSchemaNewer) as raised:
        Store(location, read_only=read_only).open()
    message = str(raised.value)
    assert "newer than this farm" in message and "upgrade farm" in message
    assert location.label in message and "\n" not in message
    _set_version(location, len(MIGRATIONS))
    with Store(location) as store:
        assert [r["message"] for r in store.query("SELECT message FROM events")] == ["before"]
        assert store.version == len(MIGRATIONS)


def test_coordinators_opening_a_fresh_postgresql_database_at_once_all_get_the_schema(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Several farm processes started together on an empty shared database (the first sweep of a
    lab): one creates the schema, the others wait for it and find it, none calls it foreign."""
    for _ in range(3):
        url = postgres_server.new_database()
        start = threading.Barrier(4)
        errors: list[BaseException] = []

        def open_store(
            url: str = url, start: threading.Barrier = start, errors: list[BaseException] = errors
        ) -> None:
            start.wait()
            try:
                with Store(StoreLocation(tmp_path, url)) as store:
                    assert store.version == len(MIGRATIONS)
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=open_store) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
