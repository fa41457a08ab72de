"""`make demo` end to end: virtual phones up, the quick MobiRNN study, the report, its path printed.

This is what a newcomer runs first; it must end by printing where the report is, and that report
must hold the figures lstm_gpu_load.yaml declares.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.e2e.farm_cli import REPO

pytestmark = pytest.mark.integration

DEMO_TIMEOUT_S = 600
CLEANUP_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _demo_argv(tmp_path: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "farm.demo",
        "--results",
        str(tmp_path / "results"),
        "--adb-port",
        str(_free_port()),
        "--state-dir",
        str(tmp_path / "phones"),
    ]


def _daemons_of(state_dir: Path) -> str:
    return subprocess.run(["pgrep", "-f", str(state_dir)], capture_output=True, text=True).stdout.strip()


@contextmanager
def _demo(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """`python -m farm.demo` in its own process group; whatever happens to the test, the group is
    stopped (SIGTERM, which the demo turns into stopping its phones, then SIGKILL) and any phone
    daemon still running from its state dir is brought down, so a timeout leaks nothing."""
    demo = subprocess.Popen(
        _demo_argv(tmp_path),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield demo
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGTERM)
            try:
                demo.communicate(timeout=CLEANUP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(demo.pid, signal.SIGKILL)
                demo.communicate()
        if _daemons_of(tmp_path / "phones"):
            env = dict(os.environ, FARM_VIRTUAL_DIR=str(tmp_path / "phones"))
            subprocess.run(
                [sys.executable, "-m", "farm", "virtual", "down"],
                cwd=REPO,
                env=env,
                capture_output=True,
                timeout=CLEANUP_TIMEOUT_S,
                check=False,
            )


# The demo's own deadline, not the suite's 300 s default (a loaded host takes longer than that).
@pytest.mark.timeout(DEMO_TIMEOUT_S + CLEANUP_TIMEOUT_S + 30)
def test_demo_ends_by_printing_the_report_path_with_the_declared_figures(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with _demo(tmp_path) as demo:
        stdout, stderr = demo.communicate(timeout=DEMO_TIMEOUT_S)
        # The demo stops what it started: no phone daemon of this demo is left running (checked
        # before _demo's own clean-up could stop one).
        leftover = _daemons_of(tmp_path / "phones")
    assert demo.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert leftover == ""
    last_line = stdout.strip().splitlines()[-1]
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
    # A declared figure is drawn, or the report says why it is not (energy on the quick variant's
    # 2 s runs can miss the fuel gauge's third reading on every run of a phone).
    undrawn = [f for f in declared if f"Figure &#39;{f['title']}&#39; is not drawn" in html]
    figures = report.parent / "figures"
    assert len(list(figures.glob("*.svg"))) >= len(declared) - len(undrawn)
    assert all("energy" in f["y"] for f in undrawn), undrawn  # latency is always measured
    assert len(list(figures.glob("*.pdf"))) == len(list(figures.glob("*.svg")))
    assert (report.parent / "report.md").is_file()


def test_a_demo_stopped_by_sigterm_stops_its_phones_and_exits_143(tmp_path: Path) -> None:
    with _demo(tmp_path) as demo:
        assert demo.stdout is not None
        for line in demo.stdout:  # the step after `farm virtual up`: the phones are running
            if line.startswith("== the phones farm sees"):
                break
        else:
            pytest.fail(f"the demo ended before its phones were up: {demo.communicate()}")
        assert _daemons_of(tmp_path / "phones") != ""
        os.killpg(demo.pid, signal.SIGTERM)  # what a timeout or `kill` sends the whole group
        _, stderr = demo.communicate(timeout=CLEANUP_TIMEOUT_S)
        leftover = _daemons_of(tmp_path / "phones")
    assert demo.returncode == 128 + signal.SIGTERM, stderr
    assert "stopped by signal SIGTERM" in stderr and "Traceback" not in stderr, stderr
    assert leftover == ""
