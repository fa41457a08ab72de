"""Benchmark: several coordinators sharing one PostgreSQL store (issue 13, the shared lab).

1. scale: 1,000 simulated phones shared by 3 coordinator processes, 1-second runs. Each process is
   a real Sweep (farm.engine.scheduler: leases, claims, supervisor, heartbeats) over every phone,
   whose phones are BenchOnlyInstantPhones: a bench-only endpoint and driver (defined here, never
   in farm/) whose every call answers at once and whose run is a 1 s wait. So the store and the
   coordinators are what is measured: claims/s, coordinator CPU per run, rows written per second
   (pg_stat_database), and whether a phone ever ran two runs at once (from the attempts' times).
2. takeover: two coordinators over 16 simulated phones; one is killed with -9; the seconds until
   the survivor holds every phone the dead one held. Once as on one machine (the dead pid is seen
   at once) and once as on another machine (the victim records another hostname: only its
   heartbeat going stale, ownership.HEARTBEAT_STALE_S, tells).
3. wall time of one real `farm run` (virtual phones, real adb, 4 phones, 16 spread runs) with one
   coordinator holding all 4 phones vs two coordinators with 2 phones each.

On this shared 2-core machine the coordinators, PostgreSQL and the phones share the CPUs with
other work: the numbers are noisy and an upper bound of what coordination costs.
FARM_BENCH_SCALE_PHONES / FARM_BENCH_SCALE_RUNS override the scale run's size.
Prints a table and writes results/bench/bench_shared_lab.json.

Run: .venv/bin/python tests/bench/bench_shared_lab.py
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from farm.engine import planner  # noqa: E402
from farm.engine.model import (  # noqa: E402
    Gates,
    IdleBaseline,
    JsonObject,
    OnPhase,
    PreparedPhone,
    RunJob,
    RunResult,
)
from farm.engine.runner import planned_rows  # noqa: E402
from farm.engine.scheduler import Sweep  # noqa: E402
from farm.experiment import load  # noqa: E402
from farm.experiment.model import Experiment  # noqa: E402
from farm.fleet.endpoint import AdbState, Listed  # noqa: E402
from farm.fleet.inventory import Phone, PhoneState  # noqa: E402
from farm.store import Metric, Outcome, Store, ownership  # noqa: E402
from farm.store import runs as run_store  # noqa: E402

OUT = ROOT / "results" / "bench" / "bench_shared_lab.json"
SCALE_PHONES = int(os.environ.get("FARM_BENCH_SCALE_PHONES", "1000"))
SCALE_RUNS = int(os.environ.get("FARM_BENCH_SCALE_RUNS", "5000"))
SCALE_COORDINATORS = 3
RUN_S = 1.0
TAKEOVER_PHONES = 16
KEY = "bench"


# -- the bench-only phones --------------------------------------------------------------------


class BenchOnlyInstantPhones:
    """BENCH ONLY: an endpoint and a PhoneDriver for simulated phones that answer at once.

    Every run is a RUN_S wait (cut short by the phone's cancel). `overlaps` counts runs started
    on a phone of this process that was already running one (must stay 0)."""

    host = "bench"

    def __init__(self, count: int) -> None:
        self.phones = [
            Phone(f"bench/P{i:04d}", "bench", f"P{i:04d}", f"P{i:04d}", PhoneState.ONLINE)
            for i in range(count)
        ]
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self.overlaps = 0
        self.runs = 0

    # Endpoint
    def list(self) -> list[Listed]:
        return [Listed(p.adb_serial, AdbState.DEVICE) for p in self.phones]

    def device(self, adb_serial: str) -> Any:
        raise NotImplementedError("bench phones have no adb device")

    def reconnect(self, adb_serial: str) -> None:
        return None

    def reset_transport(self, adb_serial: str) -> None:
        return None

    def wait_online(self, adb_serial: str, device_id: str, timeout_s: float, poll_s: float = 0.5) -> None:
        return None

    # PhoneDriver
    def endpoint(self, phone: Phone) -> Any:
        return self

    def prepare(self, phone: Phone, experiment: Experiment, store: Store) -> PreparedPhone:
        return PreparedPhone(cast(Any, None), phone, cast(Any, None), {})

    def baseline(
        self, prepared: PreparedPhone, gates: Gates, store: Store, cancel: threading.Event, artifacts: Path
    ) -> IdleBaseline:
        return IdleBaseline(None)

    def execute(
        self,
        prepared: PreparedPhone,
        job: RunJob,
        gates: Gates,
        store: Store,
        cancel: threading.Event,
        on_phase: OnPhase,
    ) -> RunResult:
        device_id = prepared.phone.device_id
        with self._lock:
            if device_id in self._busy:
                self.overlaps += 1
            self._busy.add(device_id)
        try:
            interrupted = cancel.wait(RUN_S)
        finally:
            with self._lock:
                self._busy.discard(device_id)
                self.runs += 1
        if interrupted:
            return RunResult(Outcome.INTERRUPTED, error="interrupted")
        return RunResult(Outcome.DONE, exit_code=0)

    def document(self, prepared: PreparedPhone, job: RunJob, result: RunResult) -> JsonObject:
        return {"device_id": prepared.phone.device_id, "bench": True}

    def metrics(self, prepared: PreparedPhone, job: RunJob, result: RunResult) -> list[Metric]:
        return [Metric("latency_median_ms", 1.0, "ms"), Metric("power_mean_mw", 900.0, "mW")]

    def watcher(
        self, prepared: PreparedPhone, run_id: str, on_readings: Any, *, discharging: bool = False
    ) -> Any:
        return contextlib.nullcontext()

    def healthy(self, phone: Phone) -> bool:
        return True

    def reboot(self, phone: Phone) -> None:
        return None


def _spec(folder: Path, runs: int) -> Path:
    cells = 50
    path = folder / "bench.yaml"
    path.write_text(
        "name: bench\n"
        "benchmark: {program: lstm, params: {layers: 1, seq_len: 4, input_dim: 3, classes: 2, batch: 1}}\n"
        f"sweep: {{hidden: [{', '.join(str(8 + i) for i in range(cells))}]}}\n"
        f"measurement: {{warmup: 1, iterations: 3, repetitions: {max(1, runs // cells)}}}\n"
        "telemetry: {idle_baseline_s: 0}\n"
        "devices: {spread: true}\n"
    )
    return path


# -- one coordinator process ------------------------------------------------------------------


def coordinator(url: str, spec: Path, phones: int, go: Path, out: Path, hostname: str | None) -> None:
    if hostname is not None:  # "another machine": ownership records this name, so no pid check
        socket.gethostname = lambda: hostname  # type: ignore[assignment]
    experiment = load(spec)
    bench = BenchOnlyInstantPhones(phones)
    scratch = out.parent / f"results-{os.getpid()}"
    with Store.in_results(url) as store:
        execution_id = ownership.start_execution(store, KEY, sys.argv, "bench", results=scratch)
        out.with_suffix(".ready").write_text(str(execution_id))
        while not go.exists():
            time.sleep(0.01)
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        sweep = Sweep(
            experiment,
            KEY,
            bench.phones,
            cast(Any, bench),
            store,
            scratch,
            execution_id,
            threading.Event(),
            lost_wait_s=5.0,
            driver=bench,
        )
        sweep.start()
        while sweep.alive():
            sweep.join(0.5)
        sweep.close()
        wall_s = time.perf_counter() - started
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        ownership.finish_execution(store, execution_id, "finished")
    cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    result = {"runs": bench.runs, "overlaps": bench.overlaps, "cpu_s": cpu_s, "wall_s": wall_s}
    out.write_text(json.dumps({**result, "problems": sweep.problems[:5]}))


def _start_coordinators(
    url: str, spec: Path, phones: int, scratch: Path, count: int, hostnames: list[str | None]
) -> tuple[list[subprocess.Popen[bytes]], list[Path], Path]:
    go = scratch / f"go-{time.monotonic_ns()}"
    outs = [scratch / f"coord-{i}-{go.name}.json" for i in range(count)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--coordinator", url, str(spec), str(phones), str(go), str(out)]
            + ([hostnames[i]] if hostnames[i] else []),
            cwd=ROOT,
        )
        for i, out in enumerate(outs)
    ]
    deadline = time.monotonic() + 120
    while not all(out.with_suffix(".ready").exists() for out in outs):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise SystemExit("coordinators did not start")
        time.sleep(0.05)
    return procs, outs, go


def _plan(url: str, spec: Path, phones: int) -> int:
    experiment = load(spec)
    plan = planner.plan(experiment, [p.device_id for p in BenchOnlyInstantPhones(phones).phones])
    with Store.in_results(url) as store:
        run_store.insert_planned(store, KEY, planned_rows(plan))
    return len(plan.runs)


def _rows_written(url: str) -> int:
    with Store.in_results(url) as store:
        row = store.query(
            "SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database "
            "WHERE datname = current_database()"
        )
    return int(row[0][0])


def _two_at_once(url: str) -> int:
    """Phones whose attempts overlap in time (a phone running two runs at once), from the store."""
    with Store.in_results(url) as store:
        rows = store.query(
            "SELECT device_id, started_at, finished_at FROM attempts ORDER BY device_id, started_at"
        )
    overlaps = 0
    last_end: dict[str, float] = {}
    for row in rows:
        if row["started_at"] < last_end.get(row["device_id"], float("-inf")):
            overlaps += 1
        end = row["finished_at"] if row["finished_at"] is not None else float("inf")
        last_end[row["device_id"]] = max(end, last_end.get(row["device_id"], float("-inf")))
    return overlaps


def scale(server: Any, scratch: Path) -> dict[str, Any]:
    url = server.new_database()
    spec = _spec(scratch, SCALE_RUNS)
    planned = _plan(url, spec, SCALE_PHONES)
    procs, outs, go = _start_coordinators(
        url, spec, SCALE_PHONES, scratch, SCALE_COORDINATORS, [None] * SCALE_COORDINATORS
    )
    rows0 = _rows_written(url)
    started = time.perf_counter()
    go.touch()
    for proc in procs:
        if proc.wait(1800) != 0:
            raise SystemExit(f"coordinator exited {proc.returncode}")
    wall_s = time.perf_counter() - started
    time.sleep(1.5)  # the server's statistics are flushed about once a second
    rows = _rows_written(url) - rows0
    results = [json.loads(out.read_text()) for out in outs]
    with Store.in_results(url) as store:
        done = run_store.count_states(store, KEY)[run_store.RunState.DONE]
        twice = store.query(
            "SELECT COUNT(*) FROM (SELECT run_id FROM attempts WHERE outcome = 'done' "
            "GROUP BY run_id HAVING COUNT(*) > 1) t"
        )[0][0]
        span = store.query("SELECT MIN(started_at), MAX(started_at) FROM attempts")[0]
    claims = sum(r["runs"] for r in results)
    claim_window_s = max(1e-9, float(span[1]) - float(span[0]))
    return {
        "phones": SCALE_PHONES,
        "coordinators": SCALE_COORDINATORS,
        "planned": planned,
        "done": done,
        "done_twice": twice,
        "wall_s": round(wall_s, 1),
        "ideal_wall_s": round(planned * RUN_S / SCALE_PHONES, 1),
        "claims_per_s": round(claims / claim_window_s, 1),
        "cpu_ms_per_run": round(1000 * sum(r["cpu_s"] for r in results) / max(1, claims), 2),
        "store_rows_per_s": round(rows / wall_s, 1),
        "phone_two_runs_at_once": _two_at_once(url) + sum(r["overlaps"] for r in results),
        "per_coordinator_runs": [r["runs"] for r in results],
        "problems": [p for r in results for p in r["problems"]],
    }


def takeover(server: Any, scratch: Path, other_machine: bool) -> dict[str, Any]:
    url = server.new_database()
    spec = _spec(scratch, 2000)  # long enough to outlast the measurement
    _plan(url, spec, TAKEOVER_PHONES)
    victim_host = "bench-other-machine" if other_machine else None
    procs, outs, go = _start_coordinators(url, spec, TAKEOVER_PHONES, scratch, 2, [victim_host, None])
    victim_id = int(outs[0].with_suffix(".ready").read_text())
    go.touch()
    try:
        with Store.in_results(url) as store:
            deadline = time.monotonic() + 60
            while True:  # every phone leased, some by each: the sweep is under way
                held = {lease.device_id: lease.execution_id for lease in ownership.leases(store)}
                if len(held) == TAKEOVER_PHONES and len(set(held.values())) == 2:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("the victim never held a phone")
                time.sleep(0.05)
            victims = {d for d, e in held.items() if e == victim_id}
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait()
            killed = time.perf_counter()
            while True:
                now_held = {lease.device_id: lease.execution_id for lease in ownership.leases(store)}
                rows = store.query(
                    "SELECT device_id, execution_id FROM leases WHERE device_id IN ("
                    + ", ".join("?" for _ in victims)
                    + ")",
                    tuple(victims),
                )
                if all(r["execution_id"] != victim_id for r in rows) and victims <= set(now_held):
                    break
                if time.perf_counter() - killed > 120:
                    raise SystemExit("the survivor never took the dead one's phones")
                time.sleep(0.05)
            took_s = time.perf_counter() - killed
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {
        "case": "another machine (stale heartbeat)" if other_machine else "same machine (pid gone)",
        "phones_taken_over": len(victims),
        "takeover_s": round(took_s, 2),
        "stale_after_s": ownership.HEARTBEAT_STALE_S,
    }


def wall_one_vs_two(server: Any, scratch: Path) -> dict[str, Any]:
    from vphone.testing.phones import kill_adb_server, start_adb_server

    from tests.e2e.farm_cli import farm_argv, farm_env, fast_lstm, write_experiment
    from vphone import control

    adb = start_adb_server()
    state = control.start_daemon(scratch / "vphones", ["adreno-sd8gen2"] * 4, adb_port=adb.port)
    try:
        control.connect_phones(state.phones, adb.port)
        serials = [p.serial for p in state.phones]
        sweep = "{hidden: [" + ", ".join(str(8 + i) for i in range(16)) + "]}"
        body = fast_lstm(
            sweep,
            "{warmup: 1, iterations: 3, min_seconds: 1, max_seconds: 10, repetitions: 1}",
            extra="devices: {spread: true}\n",
        )
        walls = {}
        for label, groups in (("one", [serials]), ("two", [serials[:2], serials[2:]])):
            url = server.new_database()
            spec = write_experiment(scratch, f"wall_{label}", body)
            started = time.perf_counter()
            procs = []
            for index, group in enumerate(groups):
                env = farm_env(adb.port, scratch / f"wall-{label}-{index}")
                env["FARM_CONFIG_DIR"] = str(scratch / "no-config")
                argv = farm_argv(
                    "run", str(spec), "--no-live", "--json", "--results", url, "--devices", ",".join(group)
                )
                procs.append(
                    subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                )
            for proc in procs:
                _, err = proc.communicate(timeout=900)
                if proc.returncode != 0:
                    raise SystemExit(f"farm run failed: {err.decode()[-500:]}")
            walls[label] = round(time.perf_counter() - started, 1)
        return {
            "phones": 4,
            "runs": 16,
            "wall_one_coordinator_s": walls["one"],
            "wall_two_coordinators_s": walls["two"],
        }
    finally:
        control.disconnect_phones(state.phones, adb.port)
        control.stop_daemon(state)
        kill_adb_server(adb)


def main() -> None:
    from tests.fixtures.postgres import PostgresServer, find_bindir

    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL server binaries not installed: nothing to measure")
        return
    report: dict[str, Any] = {"note": "2-core machine shared with other work: noisy"}
    with tempfile.TemporaryDirectory(prefix="farm-bench-lab-") as scratch_name:
        scratch = Path(scratch_name)
        server = PostgresServer(bindir)
        server.init()
        server.start()
        try:
            report["scale"] = scale(server, scratch)
            report["takeover"] = [takeover(server, scratch, False), takeover(server, scratch, True)]
            report["wall"] = wall_one_vs_two(server, scratch)
        finally:
            server.destroy()
    s = report["scale"]
    print(
        f"scale: {s['phones']} simulated phones, {s['coordinators']} coordinators, {s['planned']} runs of "
        f"{RUN_S:g} s: {s['claims_per_s']} claims/s, {s['cpu_ms_per_run']} ms coordinator CPU per run, "
        f"{s['store_rows_per_s']} store rows/s, wall {s['wall_s']} s (ideal {s['ideal_wall_s']} s), "
        f"done {s['done']}, done twice {s['done_twice']}, a phone running two at once: "
        f"{s['phone_two_runs_at_once']}"
    )
    for t in report["takeover"]:
        print(f"takeover, {t['case']}: {t['phones_taken_over']} phones in {t['takeover_s']} s")
    w = report["wall"]
    print(
        f"sweep wall time, {w['runs']} runs on {w['phones']} virtual phones: one coordinator "
        f"{w['wall_one_coordinator_s']} s, two coordinators (2 phones each) {w['wall_two_coordinators_s']} s"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    print(f"saved {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--coordinator":
        name = sys.argv[7] if len(sys.argv) > 7 else None
        coordinator(
            sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]), Path(sys.argv[6]), name
        )
    else:
        main()
