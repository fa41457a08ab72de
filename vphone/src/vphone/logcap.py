"""The daemon's log, bounded: what a phone or an ADB client makes the daemon log cannot fill the
host's disk (300 bogus OPENs once added 60 MB to daemon.log in 0.2 s).

* Each line is cut at MAX_LINE_CHARS (a service name or path in a message is the client's).
* Each kind of line per client (the logger, the message's format and its first argument, which
  names the peer or the phone) passes at BURST lines, then RATE_PER_S; what is held back is
  counted and said on the next line of that kind that passes.
* The file rotates at MAX_BYTES, keeping BACKUPS older files (daemon.log.1, ...): at most
  (1 + BACKUPS) x MAX_BYTES on disk. stdout and stderr (a traceback, faulthandler's dump, a
  child's message) follow the current file.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import time
from collections import OrderedDict
from pathlib import Path

MAX_BYTES = 8 << 20
BACKUPS = 2
MAX_LINE_CHARS = 2000
BURST = 20
RATE_PER_S = 2.0
MAX_KEYS = 1024  # kinds of line remembered; the oldest is forgotten first


class LineLimit(logging.Filter):
    """Cuts long messages and rates each (logger, format, first argument) like a token bucket."""

    def __init__(self, *, burst: int = BURST, rate_per_s: float = RATE_PER_S) -> None:
        super().__init__()
        self.burst = burst
        self.rate_per_s = rate_per_s
        # key -> (tokens, last refill time, lines held back)
        self._buckets: OrderedDict[tuple[str, str, str], tuple[float, float, int]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        first = record.args[0] if isinstance(record.args, tuple) and record.args else ""
        key = (record.name, str(record.msg)[:200], str(first)[:200])
        now = time.monotonic()
        tokens, last, held = self._buckets.pop(key, (float(self.burst), now, 0))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate_per_s)
        if tokens < 1.0:
            self._remember(key, (tokens, now, held + 1))
            return False
        self._remember(key, (tokens - 1.0, now, 0))
        text = record.getMessage()
        if len(text) > MAX_LINE_CHARS:
            text = f"{text[:MAX_LINE_CHARS]}... ({len(text) - MAX_LINE_CHARS} more characters)"
        if held:
            text += f" ({held} similar lines held back)"
        record.msg, record.args = text, None
        return True

    def _remember(self, key: tuple[str, str, str], value: tuple[float, float, int]) -> None:
        self._buckets[key] = value
        while len(self._buckets) > MAX_KEYS:
            self._buckets.popitem(last=False)


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose file is also the process's stdout and stderr (`streams`)."""

    def __init__(
        self, path: Path, *, max_bytes: int = MAX_BYTES, backups: int = BACKUPS, streams: bool = True
    ) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self.streams = streams
        self._follow()

    def doRollover(self) -> None:
        super().doRollover()
        self._follow()

    def _follow(self) -> None:
        if not self.streams:
            return
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            os.dup2(fd, 1)
            os.dup2(fd, 2)
        finally:
            os.close(fd)


def install(path: Path, level: int | str = logging.INFO) -> RotatingLog:
    """Send the root logger (and stdout, stderr) to `path`, bounded as the module doc says."""
    handler = RotatingLog(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(LineLimit())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
