"""Claims are exactly-once across processes: several coordinator processes on one store (PostgreSQL,
and SQLite for comparison) race for the same phones and runs; a lease held by a stalled process
expires and passes to exactly one taker, and the stalled one notices it lost the phone.

Independent witnesses: each process marks a phone busy with O_EXCL files while it uses it (a
second user of one phone fails to create the file), and writes every run id it claimed to its
own file; the database's attempts table must agree with those files.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from vphone.testing.waiting import eventually

from farm.store import RunState, Store, ownership
from farm.store import runs as rq

PROCESSES = 4
PHONES = [f"lab/phone{i}" for i in range(6)]
RUNS = 120
DEADLINE_S = 120.0
STALE_S = 2.0


def _claimant(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.store.claimant", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _wait_line(path: Path, wanted: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if path.exists() and wanted in path.read_text().split():
            return
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            pytest.fail(f"claimant exited {proc.returncode} before {wanted!r}: {output}")
        time.sleep(0.02)
    pytest.fail(f"no {wanted!r} in {path} within {DEADLINE_S} s")


@pytest.fixture(params=["postgresql", "sqlite"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "results")


def test_racing_coordinators_claim_every_run_once_and_never_share_a_phone(where: str, tmp_path: Path) -> None:
    with Store.in_results(where) as store:
        rq.insert_planned(
            store, "exp", [rq.PlannedRun(f"r{i:03d}", "c", (), 0, None, i) for i in range(RUNS)]
        )
    lockdir, go = tmp_path / "busy", tmp_path / "go"
    lockdir.mkdir()
    outs = [tmp_path / f"claims{i}.txt" for i in range(PROCESSES)]
    procs = [_claimant("sweep", where, "exp", str(out), str(lockdir), str(go), *PHONES) for out in outs]
    ready = [out.with_suffix(".ready") for out in outs]
    assert eventually(lambda: all(path.exists() for path in ready), DEADLINE_S), "claimants never ready"
    go.touch()  # all start together (each is imported and connected: a loaded machine starts them late)
    try:
        for proc in procs:
            proc.wait(DEADLINE_S)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    outputs = [proc.stdout.read().decode() if proc.stdout else "" for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * PROCESSES, outputs
    claimed = [line for out in outs if out.exists() for line in out.read_text().split()]
    assert not [line for line in claimed if line == "DOUBLE"], "a phone was used by two processes at once"
    counts = collections.Counter(claimed)
    assert set(counts) == {f"r{i:03d}" for i in range(RUNS)}
    assert max(counts.values()) == 1, [run for run, n in counts.items() if n > 1]
    per_process = [len(out.read_text().split()) if out.exists() else 0 for out in outs]
    assert min(per_process) > 0, per_process  # they really raced: every process won runs
    with Store.in_results(where) as store:
        assert rq.count_states(store, "exp")[RunState.DONE] == RUNS
        attempts = store.query(
            "SELECT run_id, COUNT(*) AS n, MIN(outcome) AS o FROM attempts GROUP BY run_id"
        )
        assert len(attempts) == RUNS and {(r["n"], r["o"]) for r in attempts} == {(1, "done")}
        assert ownership.leased_devices(store) == {}


def test_a_stalled_holder_loses_its_lease_to_exactly_one_taker_and_notices(
    where: str, tmp_path: Path
) -> None:
    lockdir = tmp_path / "busy"
    lockdir.mkdir()
    held, taken = tmp_path / "held.txt", [tmp_path / "took1.txt", tmp_path / "took2.txt"]
    holder = _claimant("hold", where, "lab/phone0", str(held))
    takers: list[subprocess.Popen[bytes]] = []
    try:
        _wait_line(held, "held", holder)
        takers = [
            _claimant("take", where, "lab/phone0", str(out), str(lockdir), str(STALE_S)) for out in taken
        ]
        # While the holder heartbeats, nobody takes the phone: the holder's lease is fresh.
        with Store.in_results(where) as store:
            for _ in range(20):
                time.sleep(0.1)
                assert not any(out.exists() for out in taken)
                assert list(ownership.leased_devices(store).values()) == [_holder_id(store, holder.pid)]
        holder.send_signal(signal.SIGSTOP)  # alive (pid exists) but silent: only expiry frees it
        deadline = time.monotonic() + DEADLINE_S
        while not any(out.exists() for out in taken) and time.monotonic() < deadline:
            time.sleep(0.02)
        for taker in takers:
            taker.send_signal(signal.SIGSTOP)
        lines = [out.read_text().split() if out.exists() else [] for out in taken]
        assert sorted(lines) == [[], ["took"]], lines  # exactly one taker, no DOUBLE
        winner = takers[[bool(line) for line in lines].index(True)]
        with Store.in_results(where) as store:
            assert ownership.leased_devices(store) == {"lab/phone0": _holder_id(store, winner.pid)}
        holder.send_signal(signal.SIGCONT)
        assert holder.wait(DEADLINE_S) == 0
        assert held.read_text().split() == ["held", "lost"]  # its next heartbeat told it
    finally:
        for proc in [holder, *takers]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _holder_id(store: Store, pid: int) -> int:
    rows = store.query("SELECT id FROM executions WHERE pid = ? ORDER BY id DESC", (pid,))
    return int(rows[0][0])
