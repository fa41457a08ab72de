"""The pure parts of issue #27 item 2: the daemon's log is bounded per client, and the limits a
phone gets from its profile (memory, userdata partition)."""

from __future__ import annotations

import logging
from pathlib import Path

from vphone.cgroup import memory_limit_bytes, memory_problem
from vphone.logcap import MAX_LINE_CHARS, LineLimit, RotatingLog
from vphone.userdata import MIN_BYTES, size_bytes


def record(peer: str, name: str) -> logging.LogRecord:
    return logging.LogRecord(
        "vphone.adb.transport", logging.INFO, __file__, 1, "%s: no service for %r", (peer, name), None
    )


def test_log_lines_are_rated_per_client_and_cut() -> None:
    limit = LineLimit(burst=5, rate_per_s=0.0)
    passed = [limit.filter(record("127.0.0.1:1", "x" * 100_000)) for _ in range(300)]
    assert sum(passed) == 5
    other = record("127.0.0.1:2", "y")
    assert limit.filter(other), "another client's lines are its own"
    first = record("127.0.0.1:3", "z" * 100_000)
    assert limit.filter(first)
    assert len(str(first.msg)) < MAX_LINE_CHARS + 100


def test_log_says_how_many_lines_were_held_back() -> None:
    limit = LineLimit(burst=1, rate_per_s=1000.0)
    limit._buckets.clear()
    assert limit.filter(record("a", "b"))
    limit.rate_per_s = 0.0
    assert not limit.filter(record("a", "b"))
    limit.rate_per_s = 1e9
    later = record("a", "b")
    assert limit.filter(later)
    assert "(1 similar lines held back)" in str(later.msg)


def test_memory_limit_is_the_apps_share_of_the_phones_ram_within_the_host() -> None:
    assert memory_limit_bytes(8192, 64 << 30) == int(8192 * 0.65) << 20
    assert memory_limit_bytes(8192, 16 << 30) == 4 << 30  # a quarter of a 16 GiB host
    assert memory_limit_bytes(1, 64 << 30) == 64 << 20


def test_userdata_is_the_phones_storage_within_the_hosts_free_space() -> None:
    assert size_bytes(131072, 1 << 40) == 128 << 30
    assert size_bytes(131072, 80 << 30) == 10 << 30
    assert size_bytes(64, 1 << 40) == max(MIN_BYTES, 64 << 20)


def test_the_log_rotates_and_stays_bounded(tmp_path: Path) -> None:
    handler = RotatingLog(tmp_path / "daemon.log", max_bytes=10_000, backups=2, streams=False)
    logger = logging.getLogger("test_the_log_rotates")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for i in range(2000):
            logger.warning("line %d %s", i, "x" * 100)
    finally:
        logger.removeHandler(handler)
        handler.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["daemon.log", "daemon.log.1", "daemon.log.2"]
    assert sum((tmp_path / f).stat().st_size for f in files) <= 3 * 10_000
    assert "line 1999" in (tmp_path / "daemon.log").read_text()


def test_up_warns_when_the_memory_limits_overcommit_the_host() -> None:
    host = 24 << 30
    limits = [memory_limit_bytes(8192, host)] * 5  # 5 x 5.2 GiB > 24 GiB
    line = memory_problem(limits, host)
    assert line is not None and "5 phone(s)" in line and "> 24.0 GiB" in line
    assert memory_problem(limits[:4], host) is None
    assert memory_problem([host * 2], host) is None  # one phone has no neighbours to starve
