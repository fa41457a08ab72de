"""The shared backend: a PostgreSQL server reached by URL, through psycopg 3.

Write transactions come in two kinds. `exclusive=True` (the default of Store.transaction) first
takes one transaction-scoped advisory lock, so such transactions queue one after another exactly
like SQLite's BEGIN IMMEDIATE: any read-then-write written for SQLite stays correct. The hot
claim paths (a run PENDING -> RUNNING, a phone lease, heartbeats) use `exclusive=False`: they are
single conditional statements (or `FOR UPDATE SKIP LOCKED` picks) whose atomicity lies in the
statement itself, so coordinators on several machines claim in parallel.

Times written by the lease code come from `now()`: the server's clock (measured once per
connection as an offset), so coordinators whose clocks disagree still agree on expiry.

Connections come from a small pool (psycopg_pool), so the phone threads of one coordinator wait
on the server in parallel rather than on one connection's lock. A thread inside a transaction
keeps its connection for anything it runs meanwhile (same view, no self-deadlock). A server that
went away and came back is reconnected by the pool; meanwhile calls fail with StoreUnavailable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool

from farm.errors import (
    StoreAccessDenied,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreReadOnly,
    StoreUnavailable,
)
from farm.store.backend import Connection, Params
from farm.store.backend.sql import postgres_ddl, statements, to_pyformat
from farm.store.backend.sqlite import newer_schema
from farm.store.location import redact

CONNECT_TIMEOUT_S = 10
POOL_SIZE = 8  # connections per coordinator process: its phone threads share them
RETRY_AFTER_OUTAGE_S = 2.0  # after the server was found gone, calls fail at once for this long
POOL_WAIT_S = 5.0  # how long a call waits for a free (or re-made) connection: transactions take ms
LOCK_TIMEOUT_S = 30  # like SQLite's busy timeout: how long a writer queues before giving up
# libpq keepalives: a server (or the network to it) that vanishes is noticed in ~30 s, not hours.
TCP_USER_TIMEOUT_MS = 30_000
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 10, 5, 3
WRITERS_LOCK_KEY = 0x6661726D  # "farm": the advisory lock exclusive write transactions queue on
VERSION_TABLE = "farm_schema"
URL_FORM = "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"

# The pool logs each failed reconnect as a warning; with no logging set up Python would print
# them on stderr. farm reports the outage itself, as one StoreUnavailable line.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())


class PgRow(tuple[Any, ...]):
    """A row readable by position and by column name, like sqlite3.Row."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _pg_row(cursor: Any) -> Any:
    names = {column.name: index for index, column in enumerate(cursor.description or ())}
    return lambda values: PgRow(values, names)


class _Translated:
    """A psycopg connection that speaks farm's SQL (qmark placeholders)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Params = (), /) -> Any:
        return self._conn.execute(to_pyformat(sql), params)

    def executemany(self, sql: str, rows: Sequence[Params], /) -> Any:
        with self._conn.cursor() as cursor:
            cursor.executemany(to_pyformat(sql), rows)
            return cursor


class PostgresBackend:
    skip_locked = " FOR UPDATE SKIP LOCKED"
    shared = True

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.label = redact(url)
        self.read_only = read_only
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._held = threading.local()  # .conn: the connection of this thread's open transaction
        self._clock_offset_s = 0.0
        self._outage_at: float | None = None  # monotonic time the server was last found gone

    # -- lifecycle -------------------------------------------------------------------------------

    def connect(self) -> None:
        settings = f"-c lock_timeout={LOCK_TIMEOUT_S * 1000}"
        if self.read_only:
            settings += " -c default_transaction_read_only=on"
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "row_factory": _pg_row,
            "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": "farm",
            "options": settings,
            "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
            "keepalives": 1,
            "keepalives_idle": KEEPALIVE_IDLE_S,
            "keepalives_interval": KEEPALIVE_INTERVAL_S,
            "keepalives_count": KEEPALIVE_COUNT,
        }
        # One direct connection first: its failure says why (the pool's would only time out).
        try:
            probe = psycopg.connect(self.url, **kwargs)
        except psycopg.ProgrammingError as error:  # the URL itself does not parse
            raise StoreError(
                self.label, f"not a usable database URL ({_first_line(error)})", hint=URL_FORM
            ) from error
        except psycopg.Error as error:
            raise self.store_error(error) or _unavailable(self.label, error) from error
        with probe:
            sent = time.time()
            server = float(_one(probe.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8"))[0])
            self._clock_offset_s = server - (sent + time.time()) / 2
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.url,
            kwargs=kwargs,
            min_size=1,
            max_size=POOL_SIZE,
            timeout=POOL_WAIT_S,
            name="farm-store",
            open=False,
        )
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        self._pool = pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's connection: the one of its open transaction, else one from the pool."""
        held = getattr(self._held, "conn", None)
        if held is not None:
            yield held
            return
        if self._pool is None:
            raise RuntimeError("Store used before open()")
        if self._outage_at is not None and time.monotonic() - self._outage_at < RETRY_AFTER_OUTAGE_S:
            # Fail at once while the server is known gone: a stopping sweep (restoring phones,
            # keeping results) must not wait POOL_WAIT_S on every write.
            raise StoreUnavailable(
                self.label,
                "database server not reachable (it went away moments ago)",
                hint="check that the server is up and the host/port in the URL, then retry",
            )
        with self._pool.connection() as conn:
            self._outage_at = None
            self._held.conn = conn
            try:
                yield conn
            finally:
                self._held.conn = None

    # -- schema ----------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self._connection() as conn:
            exists = _one(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (VERSION_TABLE,)))[0]
            if not exists:
                return 0
            row = conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()
            return int(row[0]) if row is not None else 0

    def migrate(self, migrations: Sequence[str]) -> int:
        with self.transaction(exclusive=True) as conn:
            current = self._version_in(conn)
            if current > len(migrations):
                raise newer_schema(self.label, current, len(migrations))
            for index in range(current, len(migrations)):
                for statement in statements(postgres_ddl(migrations[index])):
                    conn.execute(statement)
            conn.execute(f"DELETE FROM {VERSION_TABLE}")
            conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (?)", (len(migrations),))
            return len(migrations) - current

    def _version_in(self, conn: Connection) -> int:
        # The tables are read from the catalog, not looked up by name (to_regclass): a name lookup
        # can answer from this session's cache, which still says "no farm_schema" when another
        # farm created the schema while this one waited for the lock (coordinators starting
        # together on an empty database); reading pg_class takes in what was committed.
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                "ORDER BY table_name"
            ).fetchall()
        ]
        if VERSION_TABLE in tables:
            row = conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()
            return int(row[0]) if row is not None else 0
        others = tables
        if others:
            shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            raise StoreCorrupt(self.label, f"not a farm database: it has other tables ({shown})")
        conn.execute(f"CREATE TABLE {VERSION_TABLE} (version INTEGER NOT NULL)")
        return 0

    # -- statements ------------------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, exclusive: bool) -> Iterator[Connection]:
        with self._connection() as conn, conn.transaction():
            if exclusive:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITERS_LOCK_KEY,))
            yield _Translated(conn)

    def query(self, sql: str, params: Params) -> list[Any]:
        with self._connection() as conn:
            return list(conn.execute(to_pyformat(sql), params).fetchall())

    def statement(self, sql: str, params: Params) -> list[Any]:
        # Autocommit: a single statement is its own transaction, one round trip in all.
        with self._connection() as conn:
            return list(conn.execute(to_pyformat(sql), params).fetchall())

    def now(self) -> float:
        return time.time() + self._clock_offset_s

    # -- errors ----------------------------------------------------------------------------------

    def store_error(self, error: BaseException) -> StoreError | None:
        where = self.label
        if isinstance(error, StoreError):
            return error
        if not isinstance(error, psycopg.Error):
            return None
        text = _first_line(error)
        lowered = str(error).lower()
        if isinstance(error, pg_errors.ReadOnlySqlTransaction):
            return StoreReadOnly(where, "read-only database session", hint="this command only reads")
        if isinstance(error, pg_errors.DiskFull):
            return StoreFull(
                where,
                "the database server's disk is full",
                hint="free space on the server and run again; finished runs are kept",
            )
        if isinstance(error, pg_errors.InsufficientPrivilege):
            return StoreAccessDenied(
                where, f"permission denied ({text})", hint="GRANT the user rights on the database"
            )
        if isinstance(error, pg_errors.LockNotAvailable):
            return StoreUnavailable(
                where,
                f"database is locked for more than {LOCK_TIMEOUT_S} s",
                hint="another farm holds a long write transaction; retry when it is done",
            )
        if "password authentication failed" in lowered or "no password supplied" in lowered:
            return StoreAccessDenied(
                where,
                "the server refused the login (wrong user or password)",
                hint="fix the user:password in the URL, or set PGPASSWORD / ~/.pgpass",
            )
        if "does not exist" in lowered and ("database" in lowered or "role" in lowered):
            return StoreAccessDenied(
                where, text, hint="create it on the server (createdb / createuser), or fix the URL"
            )
        if isinstance(
            error,
            pg_errors.AdminShutdown
            | pg_errors.CrashShutdown
            | pg_errors.CannotConnectNow
            | pg_errors.TooManyConnections
            | psycopg.OperationalError
            | psycopg.InterfaceError,
        ):
            self._outage_at = time.monotonic()
            return _unavailable(where, error)
        return None


def _one(cursor: Any) -> Any:
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("a query that returns one row returned none")
    return row


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _unavailable(where: str, error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        where,
        f"database server not reachable ({_first_line(error)})",
        hint="check that the server is up and the host/port in the URL, then retry",
    )
