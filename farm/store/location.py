"""Where the results live: a database (SQLite file or PostgreSQL URL) and the artifacts folder.

`--results` (and `store:` in farm.yaml, and $FARM_RESULTS) name either a folder, which holds
farm.db (SQLite) and the run folders, or a `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`
URL, in which case the run folders still go to a local folder: $FARM_RESULTS when that is a
folder, else ./results. Pure: nothing here opens a file or a connection.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from farm.errors import ConfigError, StoreError

DEFAULT_RESULTS_DIR = "results"
DB_NAME = "farm.db"
RESULTS_ENV = "FARM_RESULTS"
URL_SCHEMES = ("postgresql", "postgres")


class Backend(enum.StrEnum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True)
class StoreLocation:
    """The database and the local artifacts folder of one farm command.

    `url` is None for the embedded SQLite store at `artifacts/farm.db`.
    """

    artifacts: Path
    url: str | None = None

    @property
    def backend(self) -> Backend:
        return Backend.SQLITE if self.url is None else Backend.POSTGRESQL

    @property
    def sqlite_path(self) -> Path:
        return self.artifacts / DB_NAME

    @property
    def label(self) -> str:
        """How messages name the database: the file, or the URL without its password."""
        return str(self.sqlite_path) if self.url is None else redact(self.url)


def is_url(value: str) -> bool:
    return "://" in value


def redact(url: str) -> str:
    """The URL with its password (if any) replaced by ***, safe for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _check_url(value: str, source: str) -> str:
    scheme = value.split("://", 1)[0].lower()
    if scheme not in URL_SCHEMES:
        raise ConfigError(
            f"{source}: {redact(value)}: unsupported store URL scheme {scheme!r}",
            hint="give a folder, or postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
        )
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises ValueError on a port that is not a number in range
    except ValueError as error:
        raise ConfigError(
            f"{source}: {redact(value)}: {error}",
            hint="the form is postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
        ) from error
    if not parts.path.strip("/"):
        raise ConfigError(
            f"{source}: {redact(value)}: no database name",
            hint="add it after the host: postgresql://USER@HOST:5432/farm",
        )
    return value


def resolve(
    explicit: str | os.PathLike[str] | StoreLocation | None = None,
    *,
    configured: str | None = None,
    configured_at: str = "farm.yaml: store",
    env: Mapping[str, str] | None = None,
) -> StoreLocation:
    """The store a command uses: `explicit` (--results) first, then $FARM_RESULTS, then
    `configured` (farm.yaml `store:`), then ./results. Each may be a folder or a URL."""
    if isinstance(explicit, StoreLocation):
        return explicit
    environ = os.environ if env is None else env
    from_env = environ.get(RESULTS_ENV) or None
    candidates = [
        (os.fspath(explicit) if explicit is not None else None, "--results"),
        (from_env, f"${RESULTS_ENV}"),
        (configured, configured_at),
    ]
    chosen = next(((value, source) for value, source in candidates if value), None)
    if chosen is None:
        return StoreLocation(Path(DEFAULT_RESULTS_DIR))
    value, source = chosen
    if not is_url(value):
        return StoreLocation(Path(value))
    folder = from_env if from_env and not is_url(from_env) else DEFAULT_RESULTS_DIR
    return StoreLocation(Path(folder), _check_url(value, source))


def results_dir(explicit: str | os.PathLike[str] | StoreLocation | None = None) -> Path:
    """The local results folder (run artifacts; farm.db too for SQLite)."""
    return resolve(explicit).artifacts


# A run id or an experiment key as farm makes them (16 hex digits, `trepn-<hex>`, `name.variant`):
# one path component, never `.`/`..`, no separator. A store is shared (PostgreSQL) and a row may
# come from anyone who can write to it, so every id that becomes a folder name is checked.
_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")


class BadStoredName(StoreError):
    """A run id or experiment name read from the store (or an import) is not one farm makes: it
    would name a folder outside the results folder. Refused; retrying cannot help."""

    def __init__(self, where: str, what: str, value: str) -> None:
        super().__init__(
            where,
            f"{what} {value[:80]!r} is not one farm makes (letters, digits, `_.-`; one folder name)",
            hint="the row was not written by farm: remove it, or ask who writes to this store",
        )


def check_component(value: str, what: str, where: str = "the store") -> str:
    """`value` when it is one safe folder name (pure); BadStoredName otherwise."""
    if not _COMPONENT.fullmatch(value) or ".." in value:
        raise BadStoredName(where, what, value)
    return value


def check_relative_run_dir(value: str, where: str = "the store") -> str:
    """A stored runs.artifacts_dir (`<experiment>/<run-id>`): safe folder names, relative, so it
    stays beneath the results folder (pure)."""
    parts = value.split("/")
    if len(parts) > 4:
        raise BadStoredName(where, "run folder", value)
    for part in parts:
        check_component(part, "run folder part", where)
    return value


def run_artifacts_dir(results: Path, experiment: str, run_id: str) -> Path:
    """Where one run's artifacts live: results/<experiment>/<run-id>/ (both names checked)."""
    return results / check_component(experiment, "experiment") / check_component(run_id, "run id")
