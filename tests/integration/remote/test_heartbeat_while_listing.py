"""A coordinator that is stuck looking for phones keeps its leases: while a lab host's adb server
holds a `host:devices` listing without answering (a wedged server behind a live SSH tunnel: the
listing waits for its socket timeout), `farm run` still heartbeats, so the phones it runs on are
not judged abandoned and taken by another coordinator mid-run.

The lab host is real (its own sshd, reached through farm's tunnel); its adb server is a small one
here that answers like adb (`host:version`, an empty `host:devices`) until the test tells it to
hang, then accepts and says nothing. The witness is the execution's heartbeat in the store.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.fleet.hostkeys import KNOWN_HOSTS_FILE_NAME
from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm
from tests.integration.remote.labs import REPO, cli_env, open_store, wait_for, write_experiment

pytestmark = pytest.mark.integration
ADB_VERSION = 41


class WedgingAdbServer:
    """Answers like an adb server (`host:version`, an empty `host:devices`); once `wedge` is set,
    a device listing is held open without an answer. `waiting` counts listings held so far."""

    def __init__(self) -> None:
        self.wedge = threading.Event()
        self.waiting = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._held: list[socket.socket] = []
        self._stop = threading.Event()

    def __enter__(self) -> WedgingAdbServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        for conn in self._held:
            conn.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        reader = conn.makefile("rb")  # read(n) waits for n bytes or the end
        try:
            length = int(reader.read(4), 16)
            request = reader.read(length).decode()
            if request.startswith("host:devices") and self.wedge.is_set():
                self._held.append(conn)  # open and unanswered until the test ends
                self.waiting += 1
                return
            if request == "host:version":
                conn.sendall(b"OKAY" + _block(f"{ADB_VERSION:04x}"))
            elif request.startswith("host:devices"):
                conn.sendall(b"OKAY" + _block(""))
            else:
                conn.sendall(b"FAIL" + _block(f"unsupported here: {request}"))
        except (OSError, ValueError):
            pass
        conn.close()


def _block(text: str) -> bytes:
    return f"{len(text):04x}{text}".encode()


@pytest.fixture
def wedging_server() -> Iterator[WedgingAdbServer]:
    with WedgingAdbServer() as server:
        yield server


def _heartbeat_at(results: Path, pid: int) -> float:
    with open_store(results) as store:
        rows = store.query("SELECT heartbeat_at FROM executions WHERE pid = ? ORDER BY id DESC", (pid,))
        return float(rows[0][0]) if rows else 0.0


def test_a_wedged_lab_adb_server_does_not_stop_the_heartbeat(
    lab_hosts, virtual_phones, wedging_server: WedgingAdbServer, tmp_path: Path
) -> None:
    lab = lab_hosts("wedged", "127.0.0.5", phones=0)
    local = virtual_phones(count=1)
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "farm.yaml").write_text("hosts:\n" + lab.config_entry(adb_port=wedging_server.port))
    (config_dir / KNOWN_HOSTS_FILE_NAME).write_text(lab.sshd.known_hosts_line())
    results = tmp_path / "results"
    env = cli_env(config_dir, tmp_path / "home", local.adb_port, results)
    spec = write_experiment(
        tmp_path,
        "long",
        fast_lstm(measurement="{warmup: 1, iterations: 3, min_seconds: 40, max_seconds: 60, repetitions: 1}"),
    )
    farm = subprocess.Popen(
        [sys.executable, "-m", "farm", "run", str(spec), "--no-live"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def running() -> bool:
            assert farm.poll() is None, farm.communicate()[0]
            if not (results / "farm.db").exists():
                return False
            with open_store(results) as store:
                return bool(run_store.list_runs(store, "long", [RunState.RUNNING]))

        wait_for(running, 120, "the local phone's run to start")
        wedging_server.wedge.set()
        # The supervisor lists every host at least every 5 s: its next listing of the lab host hangs.
        wait_for(lambda: wedging_server.waiting > 0, 60, "farm to list the wedged host")
        before = _heartbeat_at(results, farm.pid)
        beats = {before}
        deadline = time.monotonic() + 8.0  # the listing waits 10 s for its answer before giving up
        while time.monotonic() < deadline and len(beats) < 2:
            beats.add(_heartbeat_at(results, farm.pid))
            time.sleep(0.2)
        # A beat (one every 2 s) while the listing still waits; stuck behind it there is none, and
        # one in 8 s holds on a loaded host too.
        assert len(beats) >= 2, f"heartbeats while listing: {sorted(b - before for b in beats)}"
        with open_store(results) as store:
            assert run_store.list_runs(store, "long", [RunState.RUNNING])  # still its run
    finally:
        if farm.poll() is None:
            os.kill(farm.pid, signal.SIGINT)
        output = farm.communicate(timeout=120)[0]
    assert farm.returncode in (0, 130), output
