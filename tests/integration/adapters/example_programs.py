"""The example external programs (kernels/examples), built once per ABI, run on this host."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.cross import build_for_abi, emulator_for

EXAMPLES = Path(__file__).resolve().parents[3] / "kernels" / "examples"
RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class Example:
    """One built example program of one ABI, run on this host (ARM under qemu-user)."""

    abi: str
    path: Path

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [*emulator_for(self.abi), str(self.path), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, input=stdin)


_built: set[str] = set()


def build_examples(abi: str) -> Path:
    if abi not in _built:
        build_for_abi(EXAMPLES, abi)
        _built.add(abi)
    return EXAMPLES / "build" / abi
