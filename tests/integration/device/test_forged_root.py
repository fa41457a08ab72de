"""A phone's shell cannot make farm believe the phone is rooted (issue 27, item 1).

The attack the audit found: on an unrooted phone, `touch /dev/.farm/rooted` and a link named `su`
to a program that prints `uid=0` made the virtual phone's su work and `farm devices` list the phone
as rooted. Root state now comes from the daemon, the control folder is not the shell's, and farm
proves root by running `su` and reading its uid; this checks the whole chain through farm's own
command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
FORGERY = (
    "touch /dev/.farm/rooted 2>/dev/null;"
    " printf '#!/system/bin/sh\\necho uid=0\\(root\\) gid=0\\(root\\)\\n' > /data/local/tmp/su;"
    " chmod 755 /data/local/tmp/su; ln -s /data/local/tmp/su /data/local/tmp/sudo 2>/dev/null;"
    " ls /dev/.farm/rooted 2>&1; /data/local/tmp/su"
)


def _devices(adb_port: int, results: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "farm",
            "devices",
            "--json",
            "--adb-port",
            str(adb_port),
            "--results",
            str(results),
        ],
        env=dict(os.environ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed: list[dict[str, object]] = json.loads(done.stdout)
    return listed


def test_a_forged_root_marker_and_su_do_not_make_farm_list_the_phone_rooted(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-sd8gen2"])  # unrooted
    unrooted = phones[0].device(phones.client())
    out = unrooted.shell(["sh", "-c", FORGERY])
    assert "uid=0(root)" in out  # the forged program runs: it is the marker and su that must not count
    assert "No such file" in out  # the shell could not create the marker in the control folder
    rows = {str(r["serial"]): r for r in _devices(phones.adb_port, tmp_path / "results")}
    assert rows[phones[0].serial]["root"] is False  # (a rooted profile's True: test_deploy_devices)
