"""Fixtures for the benchmark-program tests: build a kernels/ program once, run it, parse its events.

The binaries are real (gcc, ocl-icd, PoCL); each test gets its own OpenCL program-binary cache
directory so cache hits and misses are the test's own.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
KERNELS = ROOT / "kernels"
ABI = platform.machine()
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class KernelRun:
    """One finished run of a benchmark program: exit code, parsed stdout events, raw stderr."""

    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]

    def one(self, event: str) -> dict[str, Any]:
        found = self.of(event)
        assert len(found) == 1, f"expected one {event!r} event, got {len(found)}: {self.events}"
        return found[0]


@dataclass
class KernelProgram:
    path: Path
    cache_dir: Path
    env: dict[str, str] = field(default_factory=dict)

    def run_raw(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        private_cache: bool = True,
        timeout_s: float = RUN_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        """Runs the program; adds --cl-cache=<test's dir> unless private_cache is False or given."""
        argv = [str(self.path), *args]
        if private_cache and not any(a.startswith("--cl-cache=") for a in args):
            argv.append(f"--cl-cache={self.cache_dir}")
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env={**self.env, **(env or {})}, cwd=cwd
        )

    def run(self, *args: str, **kwargs: Any) -> KernelRun:
        """Runs the program and parses stdout as JSON Lines (see run_raw for the options)."""
        proc = self.run_raw(*args, **kwargs)
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        return KernelRun(proc.returncode, events, proc.stderr)


_built: set[str] = set()


def build_program(name: str) -> Path:
    """Builds kernels/build/<abi>/<name> (make is a no-op when it is up to date)."""
    target = f"build/{ABI}/{name}"
    if name not in _built:
        proc = subprocess.run(
            ["make", "-s", "-C", str(KERNELS), target],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
        assert proc.returncode == 0, f"make {target} failed:\n{proc.stdout}\n{proc.stderr}"
        _built.add(name)
    return KERNELS / target


@pytest.fixture
def kernel_program(tmp_path: Path) -> Iterator[Callable[[str], KernelProgram]]:
    """Factory: kernel_program("gemm") -> a runnable program with a private --cl-cache dir."""
    env = {k: v for k, v in os.environ.items() if k != "FARM_CL_CACHE"}

    def make(name: str) -> KernelProgram:
        return KernelProgram(build_program(name), tmp_path / "clcache", env)

    yield make


@pytest.fixture
def kernel_build() -> Callable[[str], Path]:
    """Factory: kernel_build("gpuload") -> path of the built binary (for pushing to a phone)."""
    return build_program
