"""Fixtures for the device agents on this host: the built binaries and a world-readable tmp dir.

`agents` is the host build unless a test module sets `AGENT_ABIS` (e.g. to ALL_ABIS): its tests
then run once per ABI, the ARM builds under qemu-user.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from telemetry_trees import AGENTS_DIR, Agents

from tests.fixtures.cross import HOST_ABI, build_for_abi, emulator_for, require_toolchain


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    abis = getattr(metafunc.module, "AGENT_ABIS", None)
    if abis and "agents" in metafunc.fixturenames:
        metafunc.parametrize("agents", abis, indirect=True, scope="session")


@pytest.fixture(scope="session")
def agents(request: pytest.FixtureRequest) -> Agents:
    """Builds device_agents for one ABI (under a lock: engineers share the checkout)."""
    abi: str = getattr(request, "param", HOST_ABI)
    require_toolchain(abi)
    out = build_for_abi(AGENTS_DIR, abi)
    return Agents(abi, out / "farm-probe", out / "farm-sampler", emulator_for(abi), out / "farm-pagecache")


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A tmp dir that uid 2000 can traverse (pytest's tmp_path is 0700 when running as root)."""
    d = Path(tempfile.mkdtemp(prefix="farm-telemetry-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)
