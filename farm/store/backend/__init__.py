"""The two store backends behind one seam: SQLite (embedded, the default) and PostgreSQL (shared).

A backend owns one connection and knows its dialect: how to connect (read-only or not), how to
run a write transaction, where the schema version lives, the database's clock, and how a driver
error reads as a farm StoreError. farm.store.db.Store is the only user; the query modules (runs,
ownership, devices) and other packages see Store and the Connection/Row protocols only.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from farm.errors import StoreError

Params = Sequence[Any] | dict[str, Any]


class Row(Protocol):
    """A result row: by position (`row[0]`) or by column name (`row["state"]`); `dict(row)`."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What a transaction body sees: statements in farm's SQL (qmark `?` placeholders)."""

    def execute(self, sql: str, params: Params = (), /) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Params], /) -> Any: ...


class Backend(Protocol):
    label: str
    read_only: bool
    shared: bool
    """True where coordinators on several machines may share the store (PostgreSQL)."""
    skip_locked: str
    """Appended to a SELECT that picks rows to claim: ` FOR UPDATE SKIP LOCKED` where concurrent
    claimers should pass over each other's rows (PostgreSQL), empty where writers queue anyway."""

    def connect(self) -> None: ...

    def close(self) -> None: ...

    def schema_version(self) -> int: ...

    def migrate(self, migrations: Sequence[str]) -> int: ...

    def transaction(self, *, exclusive: bool) -> AbstractContextManager[Connection]: ...

    def query(self, sql: str, params: Params) -> list[Any]: ...

    def statement(self, sql: str, params: Params) -> list[Any]:
        """One write statement that is atomic by itself (its own transaction, no BEGIN/COMMIT
        round trips where the server allows: PostgreSQL autocommit); the rows it RETURNs."""
        ...

    def now(self) -> float: ...

    def store_error(self, error: BaseException) -> StoreError | None:
        """The farm error a driver/OS exception stands for; None for a bug (let it propagate)."""
        ...
