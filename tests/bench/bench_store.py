"""Benchmark: lease-claim throughput of the store, 64 simulated phones, SQLite vs PostgreSQL.

Each simulated phone is a thread of a coordinator process, as in `farm run` (one thread per leased
phone, one Store connection per process). A phone's cycle is what a worker does around every run:
take the phone's lease (ownership.acquire_lease), claim the next run (runs.claim_next), finish it
DONE with two metrics, release the lease. Runs take no time, so this is the store's own ceiling.
The 64 phones are split over 1 and 4 coordinator processes; SQLite is one file, PostgreSQL a
private server started here (tests/fixtures/postgres.py: initdb in a temp dir, fsync off, as the
test suite runs it). Prints a table and writes results/bench/bench_store.json.

Run: .venv/bin/python tests/bench/bench_store.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "bench" / "bench_store.json"
PHONES = 64
RUNS = 3000
COORDINATORS = (1, 4)


def worker(where: str, phones: list[str], go: Path, out: Path) -> None:
    """One coordinator process: a thread per phone cycling lease -> claim -> finish -> release."""
    from farm.store import Metric, Outcome, RunState, Store, ownership
    from farm.store import runs as rq

    with Store.in_results(where) as store:
        me = ownership.start_execution(store, "bench", sys.argv, "bench")
        lease_ms: list[float] = []
        claimed = [0]
        lock = threading.Lock()

        def phone_loop(phone: str) -> None:
            while True:
                start = time.perf_counter()
                got = ownership.acquire_lease(store, phone, me)
                took = (time.perf_counter() - start) * 1000.0
                if not got:
                    continue
                run = rq.claim_next(store, "bench", me, phone, "bench/", on_lease=True)
                if run is not None:
                    metrics = [Metric("latency_median_ms", 1.0, "ms"), Metric("power_mean_mw", 900.0, "mW")]
                    rq.finish(
                        store, run[0].run_id, run[1], Outcome.DONE, next_state=RunState.DONE, metrics=metrics
                    )
                ownership.release_lease(store, phone, me)
                with lock:
                    lease_ms.append(took)
                    if run is None:
                        return
                    claimed[0] += 1

        while not go.exists():
            time.sleep(0.005)
        threads = [threading.Thread(target=phone_loop, args=(phone,)) for phone in phones]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ownership.finish_execution(store, me, "finished")
    out.write_text(json.dumps({"claimed": claimed[0], "lease_ms": lease_ms}))


def measure(where: str, coordinators: int, scratch: Path) -> dict[str, float | int | str]:
    from farm.store import RunState, Store
    from farm.store import runs as rq

    with Store.in_results(where) as store:
        rq.forget_experiment_runs(store, "bench")
        store.execute("DELETE FROM leases")
        rq.insert_planned(
            store, "bench", [rq.PlannedRun(f"r{i:05d}", "c", (), 0, None, i) for i in range(RUNS)]
        )
    phones = [f"lab{i // 16}/phone{i:02d}" for i in range(PHONES)]
    go = scratch / f"go-{coordinators}-{time.monotonic_ns()}"
    outs = [scratch / f"out-{coordinators}-{i}-{go.name}.json" for i in range(coordinators)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", where, str(go), str(out), *phones[i::coordinators]],
            cwd=ROOT,
        )
        for i, out in enumerate(outs)
    ]
    time.sleep(3.0)  # let every process import and connect before the clock starts
    start = time.perf_counter()
    go.touch()
    for proc in procs:
        if proc.wait(600) != 0:
            raise SystemExit(f"worker exited {proc.returncode}")
    wall_s = time.perf_counter() - start
    results = [json.loads(out.read_text()) for out in outs]
    lease_ms = sorted(ms for r in results for ms in r["lease_ms"])
    with Store.in_results(where) as store:
        done = rq.count_states(store, "bench")[RunState.DONE]
        doubles = store.query(
            "SELECT COUNT(*) FROM attempts a JOIN runs r ON r.run_id = a.run_id "
            "WHERE r.experiment = 'bench' GROUP BY a.run_id HAVING COUNT(*) > 1"
        )
    return {
        "coordinators": coordinators,
        "phones": PHONES,
        "runs": sum(r["claimed"] for r in results),
        "done_in_db": done,
        "runs_claimed_twice": len(doubles),
        "wall_s": round(wall_s, 2),
        "claims_per_s": round(sum(r["claimed"] for r in results) / wall_s, 1),
        "lease_p50_ms": round(statistics.median(lease_ms), 2),
        "lease_p99_ms": round(lease_ms[int(0.99 * (len(lease_ms) - 1))], 2),
    }


def main() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.fixtures.postgres import PostgresServer, find_bindir

    rows = []
    with tempfile.TemporaryDirectory(prefix="farm-bench-store-") as scratch_name:
        scratch = Path(scratch_name)
        backends = [("sqlite", str(scratch / "results"))]
        server = None
        bindir = find_bindir()
        if bindir is not None:
            server = PostgresServer(bindir)
            server.init()
            server.start()
            backends.append(("postgresql", server.new_database()))
        else:
            print("PostgreSQL server binaries not installed: SQLite only")
        try:
            for name, where in backends:
                for coordinators in COORDINATORS:
                    row = {"backend": name, **measure(where, coordinators, scratch)}
                    rows.append(row)
        finally:
            if server is not None:
                server.destroy()
    print(
        f"{PHONES} simulated phones, {RUNS} zero-length runs; a claim = lease + claim_next + finish + release"
    )
    header = ("backend", "coord.", "claims/s", "lease p50 ms", "lease p99 ms", "twice")
    keys = ("backend", "coordinators", "claims_per_s", "lease_p50_ms", "lease_p99_ms", "runs_claimed_twice")
    widths = (11, 6, 9, 13, 13, 6)
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print(" ".join(f"{row[k]!s:>{w}}" for k, w in zip(keys, widths, strict=True)))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"rows": rows, "note": "2-core machine shared with other work: noisy"}, indent=2)
    )
    print(f"saved {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        worker(sys.argv[2], sys.argv[5:], Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
