"""The embedded backend: one SQLite file (WAL mode), the default store.

Several farm processes share one file (a sweep and `farm status` in another terminal, two sweeps
on different phones); WAL lets readers go on while one writer commits, and every write
transaction is BEGIN IMMEDIATE so two writers queue on the busy timeout instead of deadlocking.
That queueing also makes every write transaction exclusive, so `exclusive` changes nothing here.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from farm.errors import (
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreReadOnly,
    StoreSchemaNewer,
    StoreUnavailable,
)
from farm.store.backend import Connection, Params
from farm.store.backend.sql import statements

BUSY_TIMEOUT_S = 30.0
FULL_BELOW_BYTES = 64 * 1024  # less free space than this is a full disk to SQLite (pages, -shm)

# sqlite3 primary result codes (the low byte of sqlite_errorcode): https://sqlite.org/rescode.html
_SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 3, 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 10, 11, 13, 14, 26


class SqliteBackend:
    skip_locked = ""
    shared = False

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.label = str(path)
        self.read_only = read_only
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()  # one connection shared by the phone threads of a process

    # -- lifecycle -------------------------------------------------------------------------------

    def connect(self) -> None:
        if self.read_only:
            self._conn = self._connect_read_only()
            return
        conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
        except (OSError, sqlite3.Error) as error:
            if conn is not None:  # a file left open would keep its disk busy (and unmountable)
                conn.close()
            raise self._opening_error(error) from error
        self._conn = conn

    def _connect_read_only(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise StoreError(
                self.label,
                "no results database here: no results yet",
                hint="run `farm run FILE` first, or pass --results",
            )
        uri = self.path.resolve().as_uri()
        # mode=ro still needs the -shm file, which a read-only folder cannot get; immutable=1 then
        # reads the file as it is (nobody can be writing it where we cannot write either).
        last: sqlite3.Error | None = None
        for query in ("?mode=ro", "?immutable=1"):
            conn: sqlite3.Connection | None = None
            try:
                conn = sqlite3.connect(
                    uri + query,
                    uri=True,
                    timeout=BUSY_TIMEOUT_S,
                    isolation_level=None,
                    check_same_thread=False,
                )
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA user_version").fetchone()
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.Error as error:
                if conn is not None:
                    conn.close()
                last = error
                if _code(error) not in (_SQLITE_CANTOPEN, _SQLITE_READONLY, _SQLITE_IOERR):
                    break
        assert last is not None
        raise self._opening_error(last) from last

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("Store used before open()")
        return self._conn

    # -- schema ----------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._lock:
            return int(self._connection().execute("PRAGMA user_version").fetchone()[0])

    def migrate(self, migrations: Sequence[str]) -> int:
        with self.transaction(exclusive=True) as conn:
            current = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if current > len(migrations):
                raise newer_schema(self.label, current, len(migrations))
            for index in range(current, len(migrations)):
                for statement in statements(migrations[index]):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {len(migrations)}")
            return len(migrations) - current

    # -- statements ------------------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, exclusive: bool) -> Iterator[Connection]:
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error:
                if conn.in_transaction:  # a COMMIT that failed (disk full) leaves it open
                    conn.execute("ROLLBACK")
                raise

    def query(self, sql: str, params: Params) -> list[Any]:
        with self._lock:
            return list(self._connection().execute(sql, params).fetchall())

    def statement(self, sql: str, params: Params) -> list[Any]:
        with self.transaction(exclusive=False) as conn:
            return list(conn.execute(sql, params).fetchall())

    def now(self) -> float:
        return time.time()

    # -- errors ----------------------------------------------------------------------------------

    def _opening_error(self, error: BaseException) -> StoreError:
        return self.store_error(error) or StoreError(self.label, f"cannot open the results database: {error}")

    def store_error(self, error: BaseException) -> StoreError | None:
        where = self.label
        folder = self.path.parent
        if isinstance(error, StoreError):
            return error
        if isinstance(error, OSError):
            if error.errno == errno.ENOSPC:
                return _full(where, folder)
            if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return _read_only(where, str(error.strerror or error))
            return StoreError(where, f"cannot open the results database: {error}")
        if not isinstance(error, sqlite3.Error):
            return None
        code = _code(error)
        text = str(error)
        if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
            return StoreCorrupt(where, f"not a usable farm database ({text})")
        if code == _SQLITE_FULL:
            return _full(where, folder)
        if code in (_SQLITE_READONLY, _SQLITE_PERM):
            return _read_only(where, text)
        if code in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            # SQLite reports a read-only or full disk met while making -wal/-shm as an I/O error.
            if _read_only_folder(folder):
                return _read_only(where, text)
            if _disk_full(folder):
                return _full(where, folder)
        if code == _SQLITE_CANTOPEN:
            return StoreError(
                where,
                f"cannot open the results database ({text})",
                hint="check that its folder exists and is writable",
            )
        if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return StoreUnavailable(
                where,
                f"database is locked for more than {BUSY_TIMEOUT_S:.0f} s",
                hint="another process holds a long write transaction; retry when it is done",
            )
        if code == _SQLITE_IOERR:
            return StoreError(
                where, f"I/O error ({text})", hint="check the disk holding it (dmesg), then retry"
            )
        return None


def _code(error: sqlite3.Error) -> int:
    return int(getattr(error, "sqlite_errorcode", 0) or 0) & 0xFF


def _read_only_folder(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY) or not os.access(folder, os.W_OK)
    except OSError:
        return False


def _disk_full(folder: Path) -> bool:
    try:
        stat = os.statvfs(folder)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < FULL_BELOW_BYTES


def _full(where: str, folder: Path) -> StoreFull:
    return StoreFull(
        where,
        "disk full: nothing more can be written",
        hint=f"free space on the disk holding {folder} and run again; finished runs are kept",
    )


def _read_only(where: str, text: str) -> StoreReadOnly:
    return StoreReadOnly(
        where,
        f"read-only ({text})",
        hint="make the file and its folder writable, or copy them elsewhere and pass --results",
    )


def newer_schema(where: str, found: int, known: int) -> StoreSchemaNewer:
    return StoreSchemaNewer(
        where,
        f"database schema version {found} is newer than this farm ({known}); nothing was written",
        hint="upgrade farm, or use another --results",
    )
