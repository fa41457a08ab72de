"""Fixtures for the device agents on this host: the built binaries and a world-readable tmp dir.

`agents` is the host build unless a test module sets `AGENT_ABIS` (e.g. to ALL_ABIS): its tests
then run once per ABI, the ARM builds under qemu-user.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from telemetry_trees import AGENTS_DIR, CROSS_ABIS, HOST_ABI, Agents


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    abis = getattr(metafunc.module, "AGENT_ABIS", None)
    if abis and "agents" in metafunc.fixturenames:
        metafunc.parametrize("agents", abis, indirect=True, scope="session")


def _missing(abi: str) -> str | None:
    """What this host lacks to build and run the agents of `abi`, or None."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        return "make and a C compiler are needed to build device_agents"
    if abi == HOST_ABI:
        return None
    package, emulator = CROSS_ABIS[abi]
    compiler = package.removeprefix("gcc-") + "-gcc"
    if shutil.which(compiler) is None or shutil.which(emulator) is None:
        return f"{abi} agents need {package} and qemu-user-static (make setup installs them)"
    return None


@pytest.fixture(scope="session")
def agents(request: pytest.FixtureRequest) -> Agents:
    """Builds device_agents for one ABI (under a lock: engineers share the checkout)."""
    abi: str = getattr(request, "param", HOST_ABI)
    missing = _missing(abi)
    if missing is not None:
        # CI installs everything through `make setup`: a missing toolchain there is a failure
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    (AGENTS_DIR / "build").mkdir(exist_ok=True)
    with open(AGENTS_DIR / "build" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["make", "-s", "-C", str(AGENTS_DIR), f"ABI={abi}"], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, f"building device_agents for {abi} failed:\n{done.stderr[-2000:]}"
    out = AGENTS_DIR / "build" / abi
    emulator = () if abi == HOST_ABI else (CROSS_ABIS[abi][1],)
    return Agents(abi, out / "farm-probe", out / "farm-sampler", emulator)


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A tmp dir that uid 2000 can traverse (pytest's tmp_path is 0700 when running as root)."""
    d = Path(tempfile.mkdtemp(prefix="farm-telemetry-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)
