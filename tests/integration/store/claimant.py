"""A coordinator stand-in for the claim tests: a real process claiming phones and runs on a store.

    python -m tests.integration.store.claimant sweep STORE EXPERIMENT OUT LOCKDIR GO PHONE...
        Waits for the file GO, then until no PENDING run is left: for each phone it can lease,
        claim the next run, mark the phone busy in LOCKDIR (O_EXCL: an independent witness that
        no one else uses it), finish the run DONE, unmark, release. Each claimed run id is a line
        in OUT; a phone found busy is a line `DOUBLE <phone>` and exit 3. After its first run a
        claimant holds that phone until every claimant (each made OUT.ready) has won one, so the
        race is real on a loaded host too: runs take no time, and one late starter could otherwise
        find the sweep done (each holds at most one phone and there are more phones than
        claimants, so the others always find a free phone meanwhile).
    python -m tests.integration.store.claimant hold STORE PHONE OUT
        Leases PHONE, prints `held` to OUT, then heartbeats every 0.1 s; when a heartbeat no
        longer lists PHONE (taken over after a stall), prints `lost` and exits 0.
    python -m tests.integration.store.claimant take STORE PHONE OUT LOCKDIR STALE_S
        Tries to lease PHONE every 0.05 s (a holder is stale after STALE_S); on success marks it
        in LOCKDIR (O_EXCL), prints `took`, and heartbeats until killed.

STORE is a results folder (SQLite) or a postgresql:// URL.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from farm.store import Outcome, RunState, Store, ownership
from farm.store import runs as rq

POLL_S = 0.05
BARRIER_S = 90.0


def _line(out: Path, text: str) -> None:
    with out.open("a") as handle:
        handle.write(text + "\n")
        handle.flush()


def _mark(lockdir: Path, phone: str) -> bool:
    try:
        os.close(os.open(lockdir / phone.replace("/", "_"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def sweep(store: Store, experiment: str, out: Path, lockdir: Path, go: Path, phones: list[str]) -> int:
    out.with_suffix(".ready").touch()  # imported and connected: the test starts all at once
    while not go.exists():
        time.sleep(0.01)
    me = ownership.start_execution(store, experiment, sys.argv, "test")
    first = out.with_suffix(".first")
    while rq.count_states(store, experiment)[RunState.PENDING]:
        for phone in phones:
            if not ownership.acquire_lease(store, phone, me):
                continue
            if not _mark(lockdir, phone):
                _line(out, f"DOUBLE {phone}")
                return 3
            claimed = rq.claim_next(store, experiment, me, phone, f"{experiment}/", on_lease=True)
            if claimed is not None:
                run, attempt = claimed
                _line(out, run.run_id)
                if not first.exists():
                    first.touch()
                    _wait_for_every_claimant(out.parent)
                rq.finish(store, run.run_id, attempt, Outcome.DONE, next_state=RunState.DONE)
            (lockdir / phone.replace("/", "_")).unlink()
            ownership.release_lease(store, phone, me)
    ownership.finish_execution(store, me, "finished")
    return 0


def _wait_for_every_claimant(folder: Path) -> None:
    deadline = time.monotonic() + BARRIER_S
    while len(list(folder.glob("*.first"))) < len(list(folder.glob("*.ready"))):
        if time.monotonic() > deadline:
            return  # the test's own check then names the claimant that never won a run
        time.sleep(0.01)


def hold(store: Store, phone: str, out: Path) -> int:
    me = ownership.start_execution(store, None, sys.argv, "test")
    if not ownership.acquire_lease(store, phone, me):
        _line(out, "refused")
        return 1
    _line(out, "held")
    while phone in ownership.heartbeat(store, me):
        time.sleep(0.1)
    _line(out, "lost")
    return 0


def take(store: Store, phone: str, out: Path, lockdir: Path) -> int:
    me = ownership.start_execution(store, None, sys.argv, "test")
    while not ownership.acquire_lease(store, phone, me):
        ownership.heartbeat(store, me)
        time.sleep(POLL_S)
    if not _mark(lockdir, phone):
        _line(out, f"DOUBLE {phone}")
        return 3
    _line(out, "took")
    while True:
        ownership.heartbeat(store, me)
        time.sleep(0.1)


def main(argv: list[str]) -> int:
    mode, where = argv[0], argv[1]
    with Store.in_results(where) as store:
        if mode == "sweep":
            return sweep(store, argv[2], Path(argv[3]), Path(argv[4]), Path(argv[5]), argv[6:])
        if mode == "hold":
            return hold(store, argv[2], Path(argv[3]))
        if mode == "take":
            ownership.HEARTBEAT_STALE_S = float(argv[5])  # this process judges staleness sooner
            return take(store, argv[2], Path(argv[3]), Path(argv[4]))
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
