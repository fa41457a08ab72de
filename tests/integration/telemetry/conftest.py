"""Fixtures for the device agents on this host: the built binaries and a world-readable tmp dir."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from telemetry_trees import ABI, AGENTS_DIR, Agents


@pytest.fixture(scope="session")
def agents() -> Agents:
    """Builds device_agents for this host (under a lock: engineers share the checkout)."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make and a C compiler are needed to build device_agents")
    (AGENTS_DIR / "build").mkdir(exist_ok=True)
    with open(AGENTS_DIR / "build" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["make", "-s", "-C", str(AGENTS_DIR), f"ABI={ABI}"], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, f"building device_agents failed:\n{done.stderr[-2000:]}"
    return Agents(AGENTS_DIR / "build" / ABI / "farm-probe", AGENTS_DIR / "build" / ABI / "farm-sampler")


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A tmp dir that uid 2000 can traverse (pytest's tmp_path is 0700 when running as root)."""
    d = Path(tempfile.mkdtemp(prefix="farm-telemetry-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)
