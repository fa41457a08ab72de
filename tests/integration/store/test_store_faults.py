"""A broken store is one line naming it and what to do, and nothing written: corrupt, not a
database, read-only, full (a tiny tmpfs), and a PostgreSQL server that is unreachable, refuses
the login, is not a farm database, or goes away and comes back."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from vphone.testing.phones import free_tcp_port

from farm.errors import (
    StoreAccessDenied,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreReadOnly,
    StoreUnavailable,
)
from farm.store import Store, StoreLocation
from farm.store import events as store_events
from farm.store import runs as rq
from farm.store.events import EventKind
from tests.fixtures.postgres import PostgresServer
from tests.integration.store.conftest import Tmpfs


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line(error: BaseException, *needles: str) -> str:
    message = str(error)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


def _filled_store(results: Path, events: int = 200) -> Path:
    with Store(StoreLocation(results)) as store, store.transaction() as conn:
        conn.executemany(
            "INSERT INTO events (ts, kind, message) VALUES (?, 'note', ?)",
            [(float(i), f"event {i} " + "x" * 200) for i in range(events)],
        )
    return results / "farm.db"


@pytest.mark.parametrize("read_only", [False, True])
def test_a_file_that_is_no_database_says_restore_or_move_aside(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "farm.db"
    path.write_bytes(b"these are someone's notes, not a database\n" * 200)
    before = _digest(path)
    with pytest.raises(StoreCorrupt) as raised:
        Store(path, read_only=read_only).open()
    _one_line(raised.value, str(path), "restore it from a backup or move it aside")
    assert _digest(path) == before


def test_a_damaged_database_says_restore_or_move_aside(tmp_path: Path) -> None:
    path = _filled_store(tmp_path)
    data = bytearray(path.read_bytes())
    page = 4096
    data[page:] = b"\xa5" * (len(data) - page)  # every page but the header and schema page
    path.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupt) as raised, Store(path, read_only=True) as store:
        store.query("SELECT COUNT(*) FROM events WHERE message LIKE '%x%'")
    _one_line(raised.value, str(path), "move it aside")


def test_read_only_store_is_read_by_readers_and_refused_to_writers(
    tiny_tmpfs: Callable[[str], Tmpfs],
) -> None:
    fs = tiny_tmpfs("8m")
    path = _filled_store(fs.path, events=20)
    fs.remount(read_only=True)
    before = _digest(path)
    with Store(path, read_only=True) as reader:  # no -shm can be created: read as immutable
        assert reader.query("SELECT COUNT(*) FROM events")[0][0] == 20
    with pytest.raises(StoreReadOnly) as raised:
        Store(path).open()
    _one_line(raised.value, str(path), "read-only", "writable")
    assert _digest(path) == before


def test_full_disk_is_one_line_keeps_what_was_stored_and_works_again_once_freed(
    tiny_tmpfs: Callable[[str], Tmpfs],
) -> None:
    fs = tiny_tmpfs("2m")
    path = _filled_store(fs.path, events=10)
    with Store(path) as store:  # open when the disk fills up: a sweep in progress
        filler = fs.fill()
        with pytest.raises(StoreFull) as raised:
            for i in range(2000):
                store_events.emit(store, EventKind.NOTE, "y" * 4000 + str(i), experiment="exp")
        _one_line(raised.value, str(path), "disk full", f"free space on the disk holding {fs.path}")
        assert store.query("SELECT COUNT(*) FROM events WHERE ts < 100")[0][0] == 10
        filler.unlink()
        store_events.emit(store, EventKind.NOTE, "after", experiment="exp")
        assert [e.message for e in store_events.recent(store, "exp", limit=1)] == ["after"]
    fs.fill()
    with pytest.raises(StoreFull) as raised:  # and a store opened on a full disk says so too
        Store(fs.path / "other.db").open()
    _one_line(raised.value, "disk full")


# -- PostgreSQL ----------------------------------------------------------------------------------


def _pg(url: str, tmp_path: Path, *, read_only: bool = False) -> Store:
    return Store(StoreLocation(tmp_path, url), read_only=read_only)


def test_unreachable_server_is_one_line_and_retryable(tmp_path: Path) -> None:
    url = f"postgresql://farm:pw@127.0.0.1:{free_tcp_port()}/farm"
    with pytest.raises(StoreUnavailable) as raised:
        _pg(url, tmp_path).open()
    message = _one_line(raised.value, "postgresql://farm:***@127.0.0.1", "not reachable", "server is up")
    assert ":pw@" not in message and raised.value.retryable


def test_wrong_password_and_missing_database_are_refused_by_name(
    postgres_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    wrong = pg_url.replace(":farm-test-password@", ":not-the-password@")
    with pytest.raises(StoreAccessDenied) as raised:
        _pg(wrong, tmp_path).open()
    message = _one_line(raised.value, "wrong user or password", "PGPASSWORD")
    assert "not-the-password" not in message and not raised.value.retryable
    with pytest.raises(StoreAccessDenied) as raised:
        _pg(postgres_server.url("no_such_db"), tmp_path).open()
    _one_line(raised.value, "no_such_db", "createdb")


def test_bad_url_options_are_one_line(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError) as raised:
        _pg(pg_url + "?sslmode=sometimes", tmp_path).open()
    _one_line(raised.value, "postgresql://farm:***@")


def test_a_database_of_something_else_is_not_taken_over(pg_url: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StoreCorrupt) as raised:
        _pg(pg_url, tmp_path).open()
    _one_line(raised.value, "not a farm database", "invoices")
    with psycopg.connect(pg_url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    assert tables == ["invoices"]


def test_read_only_session_refuses_writes(pg_url: str, tmp_path: Path) -> None:
    with _pg(pg_url, tmp_path) as store:
        store_events.emit(store, EventKind.NOTE, "kept")
    with _pg(pg_url, tmp_path, read_only=True) as reader:
        assert [e.message for e in store_events.recent(reader, None)] == ["kept"]
        with pytest.raises(StoreReadOnly):
            store_events.emit(reader, EventKind.NOTE, "refused")
    with _pg(pg_url, tmp_path) as store:
        assert [e.message for e in store_events.recent(store, None)] == ["kept"]


def test_server_going_away_is_retryable_and_the_store_reconnects(
    postgres_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    with _pg(pg_url, tmp_path) as store:
        store_events.emit(store, EventKind.NOTE, "before")
        postgres_server.stop()
        try:
            with pytest.raises(StoreUnavailable) as raised:
                store_events.emit(store, EventKind.NOTE, "while down")
            _one_line(raised.value, "not reachable")
        finally:
            postgres_server.start()
        deadline = time.monotonic() + 30  # a retryable error: the caller tries again, and it works
        while True:
            try:
                store_events.emit(store, EventKind.NOTE, "after")
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store never reconnected"
                time.sleep(0.2)
        assert [e.message for e in store_events.recent(store, None)] == ["before", "after"]


def test_a_result_finished_while_the_server_is_down_is_kept_and_stored_when_it_is_back(
    postgres_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    from farm.store import Metric, Outcome, RunState, outbox

    with _pg(pg_url, tmp_path) as store:
        rq.insert_planned(store, "exp", [rq.PlannedRun("r0", "c", (), 0, None, 0)])
        attempt = rq.claim(store, "r0", 1, "local/A", "exp/r0")
        assert attempt is not None
        measured = outbox.PendingResult(
            "r0", attempt, Outcome.DONE, RunState.DONE, metrics=(Metric("latency_median_ms", 3.0, "ms"),)
        )
        postgres_server.stop()
        try:
            with pytest.raises(StoreUnavailable):
                outbox.finish_or_keep(store, tmp_path / "exp" / "r0", measured)
        finally:
            postgres_server.start()
        assert (tmp_path / "exp" / "r0" / outbox.PENDING_NAME).is_file()
    with _pg(pg_url, tmp_path) as store:  # the next start
        assert outbox.replay(store, tmp_path, "exp") == ["r0"]
        assert [m.value for m in rq.get_metrics(store, "r0")] == [3.0]
        assert rq.count_states(store, "exp")[RunState.DONE] == 1
