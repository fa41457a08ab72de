"""The error hierarchy: every error says who failed and whether a retry can help.

The scheduler decides retries from the type alone, so wrap library exceptions (adbutils,
paramiko, sqlite3, OSError) at the boundary where they happen, keeping the serial / host /
command / exit code on the error. The CLI prints `str(error)` as one line and exits with
`exit_code`; nothing below the CLI prints.
"""

from __future__ import annotations


class FarmError(Exception):
    """Base of all errors farm reports to a user."""

    exit_code: int = 1
    retryable: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(FarmError):
    """Bad input from the user: an experiment file, a profile, a config, a CLI argument.

    `location` is `FILE:LINE` where known; the message then reads `FILE:LINE: key.path: what`.
    """

    exit_code = 2

    def __init__(self, message: str, *, location: str | None = None, hint: str | None = None) -> None:
        super().__init__(f"{location}: {message}" if location else message, hint=hint)
        self.location = location


class DeviceError(FarmError):
    """A phone failed. `serial` names it (as `host/serial` once the fleet knows the host)."""

    def __init__(self, serial: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{serial}: {message}", hint=hint)
        self.serial = serial


class DeviceTransientError(DeviceError):
    """The phone dropped off, timed out or went offline: waiting and retrying can help."""

    retryable = True


class DevicePermanentError(DeviceError):
    """The phone cannot do this at all (no OpenCL, wrong ABI, no such path): do not retry."""


class CommandTimeout(DeviceTransientError):
    """A device call ran past its timeout."""


class OutputTooLarge(DeviceError):
    """A phone returned more than farm takes from it (a command's output, a line of the run
    script, a run's file): that call or run fails, the phone is not suspected of being gone, and
    a retry would only bring the same bytes back."""


class CommandRefused(DeviceError):
    """A command line longer than an adb request carries: the run that needs it fails; the phone
    is fine and a retry cannot help."""


class HostError(FarmError):
    """A lab host (SSH, tunnel, its adb server) failed; `retryable` says whether to try again."""

    def __init__(self, host: str, message: str, *, retryable: bool, hint: str | None = None) -> None:
        super().__init__(f"{host}: {message}", hint=hint)
        self.host = host
        self.retryable = retryable


class BenchmarkError(FarmError):
    """A benchmark program failed on the phone; its exit code and stderr tail are kept."""

    def __init__(self, serial: str, program: str, exit_code: int, stderr_tail: str) -> None:
        tail = stderr_tail.strip().splitlines()[-1] if stderr_tail.strip() else "no stderr"
        super().__init__(f"{serial}: {program} exited {exit_code}: {tail}")
        self.serial = serial
        self.program = program
        self.program_exit_code = exit_code
        self.stderr_tail = stderr_tail


class EnvironmentProblem(FarmError):
    """Something on this machine is missing or in the way (adb not installed, port in use)."""

    exit_code = 2


class StoreError(EnvironmentProblem):
    """The results store failed. `where` names it: the SQLite file, or the PostgreSQL URL with
    the password left out. The subclass says what to do; nothing below the store catches these
    except to stop a sweep cleanly."""

    def __init__(self, where: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{where}: {message}", hint=hint)
        self.where = where


class StoreCorrupt(StoreError):
    """Not a farm database, or a damaged one: retrying cannot help."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(where, message, hint="restore it from a backup or move it aside")


class StoreReadOnly(StoreError):
    """A write was refused: the file, its folder or the database session is read-only."""


class StoreFull(StoreError):
    """The disk (or the database server's) is full: free space, then resume the sweep."""


class StoreSchemaNewer(StoreError):
    """The database was migrated by a newer farm; this one must not write to it."""


class StoreAccessDenied(StoreError):
    """The database server refused us: wrong user or password, no such database, no privilege."""


class StoreUnavailable(StoreError):
    """The database server cannot be reached or went away mid-work: the data is fine and a later
    retry (server back up, network back) can help."""

    retryable = True
