"""The simulator's errors: each says who failed and whether trying again can help.

The simulator is its own distribution and imports nothing from farm, so it has its own small
hierarchy. Its CLI prints `str(error)` as one line and exits with `exit_code`; the stack goes to
the log. `farm virtual ...` runs that CLI as a program, so farm never sees these types.
"""

from __future__ import annotations


class VphoneError(Exception):
    """Base of every error the simulator reports to a user."""

    exit_code: int = 1
    retryable: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(VphoneError):
    """Bad input: a profile file, a CLI argument. `location` is FILE:LINE where known."""

    exit_code = 2

    def __init__(self, message: str, *, location: str | None = None, hint: str | None = None) -> None:
        super().__init__(f"{location}: {message}" if location else message, hint=hint)
        self.location = location


class EnvironmentProblem(VphoneError):
    """Something on this machine is missing or in the way (no root, port in use, no bubblewrap)."""

    exit_code = 2


class PhoneTransientError(VphoneError):
    """A phone is busy, rebooting or not answering yet: waiting and retrying can help."""

    retryable = True

    def __init__(self, serial: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{serial}: {message}", hint=hint)
        self.serial = serial
