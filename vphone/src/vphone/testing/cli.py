"""The simulator's command line as a user runs it: `python -m vphone ...` in a subprocess.

The program name is set to `farm virtual`, as farm sets it when it delegates, so the tests read
the lines a farm user sees; farm's own test of the delegation is tests/unit/cli/test_virtual_delegation.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def vphone_cli(*args: str, state_dir: Path, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FARM_VIRTUAL_DIR": str(state_dir), "VPHONE_PROG_NAME": "farm virtual"}
    return subprocess.run(
        [sys.executable, "-m", "vphone", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )
