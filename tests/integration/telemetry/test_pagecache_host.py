"""The built farm-pagecache against this host's page cache, with Python's own mincore(2) over a
mapping of the same file as the independent count (the ARM builds under qemu-user: the syscalls
are the host kernel's)."""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
from pathlib import Path

import pytest
from telemetry_trees import Agents

from farm.engine.pagecache import parse_residency
from tests.fixtures.cross import ALL_ABIS

AGENT_ABIS = ALL_ABIS
FILE_BYTES = 3 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def resident_pages(path: Path) -> tuple[int, int]:
    """(pages, resident pages) of `path` by mincore over an untouched shared mapping."""
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            vector = (ctypes.c_ubyte * pages)()
            assert _libc.mincore(address, size, vector) == 0, ctypes.get_errno()
            return pages, sum(byte & 1 for byte in vector)
        finally:
            _libc.munmap(address, size)
    finally:
        os.close(fd)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A file written, synced and read back whole: every page in the page cache. Skips where this
    file system keeps its pages whatever the advice (tmpfs), as the test's own drop shows."""
    path = tmp_path / "model.gguf"
    path.write_bytes(os.urandom(FILE_BYTES))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if resident_pages(path)[1] != 0:
        pytest.skip(f"{tmp_path} keeps its pages after POSIX_FADV_DONTNEED (tmpfs?)")
    path.read_bytes()
    return path


def _run(agents: Agents, *args: str) -> subprocess.CompletedProcess[str]:
    assert agents.pagecache is not None
    return subprocess.run(
        agents.command([str(agents.pagecache), *args]), capture_output=True, text=True, timeout=60
    )


def test_it_counts_what_mincore_counts_and_its_drop_empties_the_cache(agents: Agents, model: Path) -> None:
    pages, resident = resident_pages(model)
    assert resident == pages  # read whole just now
    counted = _run(agents, str(model))
    assert counted.returncode == 0, counted.stderr
    (file,) = parse_residency(counted.stdout.splitlines())
    assert (file.path, file.pages, file.resident, file.dropped) == (str(model), pages, pages, False)
    # Counting faults nothing in: still all resident, and the drop's own count matches ours after
    dropped = _run(agents, "--drop", str(model))
    assert dropped.returncode == 0, dropped.stderr
    (file,) = parse_residency(dropped.stdout.splitlines())
    assert (file.pages, file.resident, file.dropped, file.resident_after) == (pages, pages, True, 0)
    assert resident_pages(model) == (pages, 0)


def test_a_dirty_file_is_dropped_too(agents: Agents, tmp_path: Path) -> None:
    """A file just written (as a push leaves it) has dirty pages, which DONTNEED alone skips."""
    path = tmp_path / "fresh.gguf"
    path.write_bytes(os.urandom(FILE_BYTES))
    dropped = _run(agents, "--drop", str(path))
    (file,) = parse_residency(dropped.stdout.splitlines())
    if resident_pages(path)[1] != 0 and file.resident_after == resident_pages(path)[1]:
        pytest.skip(f"{tmp_path} keeps its pages after POSIX_FADV_DONTNEED (tmpfs?)")
    assert dropped.returncode == 0 and file.resident_after == 0 and resident_pages(path)[1] == 0


def test_a_file_it_cannot_open_is_one_error_line_and_no_file_is_a_usage_error(
    agents: Agents, model: Path
) -> None:
    missing = model.parent / "nowhere.gguf"
    done = _run(agents, "--drop", str(missing), str(model))
    assert done.returncode == 1
    failed, ok = parse_residency(done.stdout.splitlines())
    assert (failed.path, failed.error) == (str(missing), "ENOENT at open")
    assert ok.path == str(model) and ok.resident_after == 0  # the other file is still dropped
    usage = _run(agents, "--drop")
    assert usage.returncode == 2 and usage.stdout == "" and "usage" in usage.stderr
