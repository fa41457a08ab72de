"""Where stacks go: every catch-all in farm writes its traceback to one log file and names it.

A bug reaches the user as one line ("internal error: KeyError: 'x' (stack in results/farm.log)")
and the stack is kept for whoever fixes it; `farm --debug` also prints it. The file is chosen by
the command that knows where results live (`use`), else $FARM_LOG, else ./results/farm.log, and
is opened only when something is written (nothing at import). It rotates at MAX_LOG_BYTES, so a
bug in a loop cannot fill the disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import traceback
from logging.handlers import RotatingFileHandler
from pathlib import Path

LOG_ENV = "FARM_LOG"
LOG_NAME = "farm.log"
MAX_LOG_BYTES = 4 * 1024 * 1024
LOG_BACKUPS = 2

_lock = threading.Lock()
_chosen: Path | None = None
_echo = threading.Event()  # set by `farm --debug`: stacks are printed on stderr too
_handler: _StackFile | None = None
_logger = logging.getLogger("farm.crash")
_logger.propagate = False  # stacks go to the file, never to a handler on the terminal
_logger.setLevel(logging.DEBUG)


def use(results_folder: Path) -> None:
    """Write stacks into `results_folder`/farm.log from now on (the sweep's own folder of results)."""
    global _chosen
    with _lock:
        _chosen = results_folder / LOG_NAME
        _close_locked()


def echo_stacks() -> None:
    """Print every recorded stack on stderr as well (`farm --debug`)."""
    _echo.set()


def log_path() -> Path:
    """The file stacks go to now."""
    if _chosen is not None:
        return _chosen
    configured = os.environ.get(LOG_ENV)
    return Path(configured) if configured else Path("results") / LOG_NAME


def record(error: BaseException, context: str) -> Path:
    """Write `error`'s traceback, with `context` (the command, the run id), to the log; its path.

    Falls back to the temporary folder when the chosen file cannot be written (a read-only or
    full results folder must not turn a bug report into a second bug)."""
    stack = "".join(traceback.format_exception(error)).rstrip()
    if _echo.is_set():
        print(stack, file=sys.stderr)
    with _lock:
        for path in (log_path(), Path(tempfile.gettempdir()) / f"farm-{os.getuid()}.log"):
            try:
                handler = _handler_for_locked(path)
                _logger.error("%s\n%s", context, stack)
                handler.flush()
            except OSError:  # a full or read-only folder: try the next file
                _close_locked()
                continue
            return path
    return log_path()


class _StackFile(RotatingFileHandler):
    """A rotating file that lets a failed write raise (to record(), which tries the next file)
    instead of printing logging's "--- Logging error ---" report on stderr."""

    def handleError(self, record: logging.LogRecord) -> None:
        raise


def _handler_for_locked(path: Path) -> _StackFile:
    global _handler
    if _handler is not None and Path(_handler.baseFilename) == path.resolve():
        return _handler
    _close_locked()
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = _StackFile(path, maxBytes=MAX_LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(message)s"))
    _logger.addHandler(handler)
    _handler = handler
    return handler


def _close_locked() -> None:
    global _handler
    if _handler is not None:
        _logger.removeHandler(_handler)
        with contextlib.suppress(OSError):  # closing flushes: a full disk fails it once more
            _handler.close()
        _handler = None
