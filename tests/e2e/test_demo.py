"""`make demo` end to end: virtual phones up, the quick MobiRNN study, the report, its path printed.

This is what a newcomer runs first; it must end by printing where the report is, and that report
must hold the figures lstm_gpu_load.yaml declares.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.farm_cli import REPO

pytestmark = pytest.mark.integration

DEMO_TIMEOUT_S = 600


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_demo_ends_by_printing_the_report_path_with_the_declared_figures(tmp_path: Path) -> None:
    results = tmp_path / "results"
    demo = [
        "--results",
        str(results),
        "--adb-port",
        str(_free_port()),
        "--state-dir",
        str(tmp_path / "phones"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "farm.demo", *demo],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last_line = done.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"Report: (.+)", last_line)
    assert match, last_line
    report = Path(match.group(1))
    assert report.is_file() and report.parent.parent.parent == results.resolve()

    html = report.read_text(encoding="utf-8")
    assert html.count("<svg") >= 4  # figures are inline: the page opens with no network
    assert not re.search(r"""(src|href)=["']https?://""", html)  # nothing fetched from a network
    declared = yaml.safe_load((REPO / "experiments" / "lstm_gpu_load.yaml").read_text())["report"]["figures"]
    for figure in declared:
        assert figure["title"] in html, figure["title"]
    figures = report.parent / "figures"
    assert len(list(figures.glob("*.svg"))) >= len(declared)
    assert len(list(figures.glob("*.pdf"))) == len(list(figures.glob("*.svg")))
    assert (report.parent / "report.md").is_file()

    # The demo stops what it started: no phone daemon of this demo is left running.
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "phones")], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""
