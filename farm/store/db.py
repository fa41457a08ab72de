"""The SQLite connection: WAL mode, busy timeout, migrations, one lock for the threads of a process.

Several farm processes share one database (a sweep and `farm status` in another terminal, two
sweeps on different phones); WAL lets readers go on while one writer commits, and every write
transaction is BEGIN IMMEDIATE so two writers queue on the busy timeout instead of deadlocking.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from farm.errors import EnvironmentProblem
from farm.store.schema import MIGRATIONS

BUSY_TIMEOUT_S = 30.0
DEFAULT_RESULTS_DIR = "results"
DB_NAME = "farm.db"


def results_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The results folder: an explicit --results DIR, else $FARM_RESULTS, else ./results."""
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("FARM_RESULTS") or DEFAULT_RESULTS_DIR)


def run_artifacts_dir(results: Path, experiment: str, run_id: str) -> Path:
    """Where one run's artifacts live: results/<experiment>/<run-id>/."""
    return results / experiment / run_id


class Store:
    """One process's handle on the database; thread-safe (one connection behind a lock).

    Constructing does no I/O: `open()` (or `with Store(path) as store:`) connects and migrates.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    @classmethod
    def in_results(cls, results: Path) -> Store:
        return cls(results / DB_NAME)

    def open(self) -> Store:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as error:
            raise EnvironmentProblem(f"{self.path}: cannot open the results database: {error}") from error
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        self._conn = conn
        self.migrate()
        return self

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        return int(self._connection().execute("PRAGMA user_version").fetchone()[0])

    def migrate(self) -> int:
        """Apply the migrations this database lacks; returns how many were applied."""
        if self.version == len(MIGRATIONS):
            return 0  # the common case: no write lock taken (readers like `farm status` open often)
        with self.transaction() as conn:
            current = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if current > len(MIGRATIONS):
                raise EnvironmentProblem(
                    f"{self.path}: database schema version {current} is newer than this farm "
                    f"({len(MIGRATIONS)})",
                    hint="upgrade farm or use another --results folder",
                )
            for index in range(current, len(MIGRATIONS)):
                for statement in _statements(MIGRATIONS[index]):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
            return len(MIGRATIONS) - current

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("Store used before open()")
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): committed on success, rolled back on error."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """One write statement in its own transaction; returns the number of rows changed."""
        with self.transaction() as conn:
            return conn.execute(sql, params).rowcount

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._connection().execute(sql, params).fetchall())


def _statements(script: str) -> list[str]:
    """Split a migration into statements (our migrations have no ';' inside literals)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
