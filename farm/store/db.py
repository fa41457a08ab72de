"""The Store: one process's handle on the results database, whichever backend holds it.

`Store(location)` picks the backend: a StoreLocation with a `postgresql://` URL is the shared
PostgreSQL store (farm.store.backend.postgres), a folder or a file path the embedded SQLite file
(farm.store.backend.sqlite). Everything above talks to Store only: `query`, `execute` and
`transaction` take farm's SQL (qmark `?` placeholders, the dialect SQLite and PostgreSQL share)
and give rows readable by position and by name.

Every driver or OS error leaves here as a farm StoreError (corrupt, read-only, full, unavailable,
schema newer...) naming the file or the URL (password left out) and what to do; errors that are
bugs (bad SQL) propagate as they are.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from farm.errors import StoreError
from farm.store.backend import Backend, Connection, Params, Row
from farm.store.backend.sqlite import SqliteBackend
from farm.store.location import DB_NAME, StoreLocation, resolve, results_dir, run_artifacts_dir
from farm.store.schema import MIGRATIONS

__all__ = ["DB_NAME", "Store", "StoreLocation", "results_dir", "run_artifacts_dir"]


class Store:
    """Thread-safe (each backend says how: SQLite one connection behind a lock, PostgreSQL a small
    pool). Constructing does no I/O: `open()` (or
    `with Store(...) as store:`) connects and migrates. `read_only=True` never writes: SQLite
    opens the file read-only (and never creates it), PostgreSQL sessions are read-only."""

    def __init__(self, location: Path | StoreLocation, *, read_only: bool = False) -> None:
        if isinstance(location, StoreLocation):
            self.location = location
            self.path = location.sqlite_path
        else:  # a SQLite file path (tests, tools)
            self.location = StoreLocation(location.parent)
            self.path = location
        self.read_only = read_only
        self._backend: Backend = self._make_backend(read_only)
        self._lock = threading.RLock()  # open/close only: statements are the backend's to order

    def _make_backend(self, read_only: bool) -> Backend:
        if self.location.url is None:
            return SqliteBackend(self.path, read_only=read_only)
        from farm.store.backend.postgres import PostgresBackend  # psycopg only when a URL is used

        return PostgresBackend(self.location.url, read_only=read_only)

    @classmethod
    def in_results(
        cls, results: str | os.PathLike[str] | StoreLocation | None, *, read_only: bool = False
    ) -> Store:
        """The store of a results folder (farm.db inside), a URL, or a resolved StoreLocation."""
        return cls(resolve(results), read_only=read_only)

    @property
    def label(self) -> str:
        """How messages name this store: the SQLite file, or the URL without its password."""
        return self._backend.label

    @property
    def results(self) -> Path:
        """The local folder run artifacts go to."""
        return self.location.artifacts

    @property
    def shared(self) -> bool:
        """A store coordinators on several machines may share (PostgreSQL), not a local file."""
        return self._backend.shared

    @property
    def skip_locked(self) -> str:
        """Suffix for a SELECT that picks rows to claim (see Backend.skip_locked)."""
        return self._backend.skip_locked

    # -- lifecycle -------------------------------------------------------------------------------

    def open(self) -> Store:
        with self._lock, self._errors():
            self._backend.connect()
            if self._backend.schema_version() != len(MIGRATIONS):
                if self.read_only:
                    self._migrate_with_a_writer()
                else:
                    self._backend.migrate(MIGRATIONS)
        return self

    def _migrate_with_a_writer(self) -> None:
        """A read-only command on a store an older farm wrote: migrate it once (or say why not)."""
        writer = self._make_backend(read_only=False)
        writer.connect()
        try:
            writer.migrate(MIGRATIONS)
        finally:
            writer.close()

    def close(self) -> None:
        with self._lock:
            self._backend.close()

    def __enter__(self) -> Store:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        with self._errors():
            return self._backend.schema_version()

    def migrate(self) -> int:
        """Apply the migrations this database lacks; returns how many were applied."""
        with self._lock, self._errors():
            if self._backend.schema_version() == len(MIGRATIONS):
                return 0  # the common case: no write lock taken (readers like `farm status` open often)
            return self._backend.migrate(MIGRATIONS)

    # -- statements ------------------------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except Exception as error:
            translated = self._backend.store_error(error)
            if translated is None:
                raise
            raise translated from error

    @contextmanager
    def transaction(self, *, exclusive: bool = True) -> Iterator[Connection]:
        """A write transaction: committed on success, rolled back on error.

        `exclusive` (the default) queues it behind every other exclusive write transaction of
        every process on this store, so a read-then-write inside it is atomic on both backends.
        Pass `exclusive=False` only for bodies whose atomicity is in each statement (a conditional
        UPDATE, INSERT ... ON CONFLICT, a SELECT with `skip_locked`): on PostgreSQL they then run
        in parallel with other coordinators' transactions.
        """
        with self._errors(), self._backend.transaction(exclusive=exclusive) as conn:
            yield conn

    def execute(self, sql: str, params: Params = ()) -> int:
        """One write statement in its own (exclusive) transaction; returns the rows changed."""
        with self.transaction() as conn:
            return int(conn.execute(sql, params).rowcount)

    def statement(self, sql: str, params: Params = ()) -> list[Row]:
        """One write statement, atomic by itself (e.g. a data-changing WITH ... RETURNING): on
        PostgreSQL it is sent alone, without BEGIN/COMMIT round trips. Returns its rows."""
        with self._errors():
            return self._backend.statement(sql, params)

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        with self._errors():
            return self._backend.query(sql, params)

    def now(self) -> float:
        """UNIX seconds on the database's clock (the server's for PostgreSQL): lease times use it so
        coordinators with skewed clocks agree on when a heartbeat is stale."""
        return self._backend.now()
