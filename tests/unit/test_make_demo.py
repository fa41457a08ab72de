"""`make demo ADB_PORT=N` moves the demo's private adb server off its default port."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_make_demo_passes_adb_port_to_the_demo() -> None:
    # -n: print the recipe without running it (or its setup prerequisite)
    done = subprocess.run(
        ["make", "-n", "-W", "setup", "demo", "ADB_PORT=5240"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    demo_line = next(line for line in done.stdout.splitlines() if "-m farm.demo" in line)
    assert demo_line.endswith("--adb-port 5240")
