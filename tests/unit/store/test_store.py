"""The store on both backends (SQLite file, PostgreSQL server): idempotent results, run state
transitions, leases."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from farm.store import Metric, Outcome, RunState, Store, ownership
from farm.store import devices as devs
from farm.store import events as store_events
from farm.store import runs as rq
from farm.store.events import EventKind


def _planned(n: int, device: str = "local/A") -> list[rq.PlannedRun]:
    return [
        rq.PlannedRun(f"r{i}", f"c{i % 2}", (("hidden", 32 * (i + 1)), ("backend", "gpu")), 0, device, i)
        for i in range(n)
    ]


def test_planned_runs_are_inserted_once_and_keep_their_state(store: Store) -> None:
    assert rq.insert_planned(store, "exp", _planned(3)) == 3
    attempt = rq.claim(store, "r0", 1, "local/A", "exp/r0")
    assert attempt == 1
    assert rq.finish(store, "r0", 1, Outcome.DONE, next_state=RunState.DONE)
    assert rq.insert_planned(store, "exp", _planned(3)) == 0
    counts = rq.count_states(store, "exp")
    assert counts[RunState.DONE] == 1 and counts[RunState.PENDING] == 2


def test_claim_only_pending(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(1))
    assert rq.claim(store, "r0", 1, "local/A", "d") == 1
    assert rq.claim(store, "r0", 2, "local/A", "d") is None


def test_metrics_insert_is_idempotent(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(1))
    metrics = [Metric("latency_median_ms", 1.5, "ms"), Metric("power_mean_mw", 900.0, "mW")]
    rq.put_metrics(store, "r0", metrics)
    rq.put_metrics(store, "r0", [Metric("latency_median_ms", 1.25, "ms")])
    got = {m.name: m.value for m in rq.get_metrics(store, "r0")}
    assert got == {"latency_median_ms": 1.25, "power_mean_mw": 900.0}
    assert len(store.query("SELECT * FROM metrics")) == 2


def test_finish_after_reset_stores_nothing(store: Store) -> None:
    """A zombie worker finishing a run that a restarted farm reset must not store a result."""
    rq.insert_planned(store, "exp", _planned(1))
    attempt = rq.claim(store, "r0", 7, "local/A", "d")
    assert attempt is not None
    assert rq.reset_orphans(store, "exp", live_execution_ids=[]) == ["r0"]
    ok = rq.finish(
        store, "r0", attempt, Outcome.DONE, next_state=RunState.DONE, metrics=[Metric("x", 1.0, "")]
    )
    assert not ok
    assert rq.get_metrics(store, "r0") == []
    run = rq.get_run(store, "r0")
    assert run is not None and run.state is RunState.PENDING and run.attempts == 0


def test_retry_requeues_and_counts_attempts(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(1))
    a1 = rq.claim(store, "r0", 1, "local/A", "d")
    assert a1 == 1
    rq.finish(store, "r0", a1, Outcome.TIMEOUT, next_state=RunState.PENDING, error="timeout")
    a2 = rq.claim(store, "r0", 1, "local/A", "d")
    assert a2 == 2
    rq.finish(store, "r0", a2, Outcome.INTERRUPTED, next_state=RunState.PENDING)
    run = rq.get_run(store, "r0")
    assert run is not None and run.attempts == 1  # an interruption is not a try
    outcomes = [r["outcome"] for r in store.query("SELECT outcome FROM attempts ORDER BY attempt")]
    assert outcomes == ["timeout", "interrupted"]
    # The interrupted attempt keeps its row: the next try gets a new number.
    assert rq.claim(store, "r0", 1, "local/A", "d") == 3
    run = rq.get_run(store, "r0")
    assert run is not None and run.attempts == 2


def test_forget_experiment_runs(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(2))
    rq.insert_planned(store, "other", [rq.PlannedRun("o0", "c", (), 0, None, 0)])
    rq.put_metrics(store, "r0", [Metric("x", 1.0, "")])
    store_events.emit(store, EventKind.FAULT, "old", experiment="exp")
    store_events.emit(store, EventKind.FAULT, "kept", experiment="other")
    assert rq.forget_experiment_runs(store, "exp") == 2
    assert store_events.recent(store, "exp") == [] and len(store_events.recent(store, "other")) == 1
    assert store.query("SELECT COUNT(*) FROM metrics")[0][0] == 0
    assert [r.run_id for r in rq.list_runs(store, "other")] == ["o0"]


def test_lease_excludes_a_live_execution_and_passes_from_a_dead_one(store: Store) -> None:
    mine = ownership.start_execution(store, "exp", ["farm"], "0")
    assert ownership.acquire_lease(store, "local/A", mine)
    # A second (live) execution of this process cannot take it.
    other = ownership.start_execution(store, "exp", ["farm"], "0")
    assert not ownership.acquire_lease(store, "local/A", other)
    # An execution whose pid is gone is dead: its lease can be taken over.
    dead_pid = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    store.execute("UPDATE executions SET pid = ? WHERE id = ?", (int(dead_pid), mine))
    assert ownership.acquire_lease(store, "local/A", other)
    assert ownership.leased_devices(store) == {"local/A": other}
    assert mine in ownership.mark_dead_executions(store)
    assert os.getpid() == store.query("SELECT pid FROM leases")[0][0]


def test_charging_marker_round_trip(store: Store) -> None:
    devs.mark_charging_disabled(store, "local/A", "/sys/class/power_supply/battery/input_suspend", "0")
    assert devs.charging_markers(store) == [
        devs.ChargingMarker("local/A", "/sys/class/power_supply/battery/input_suspend", "0")
    ]
    devs.clear_charging_disabled(store, "local/A")
    assert devs.charging_markers(store) == []


def test_events_are_listed_oldest_first(store: Store) -> None:
    for i in range(5):
        store_events.emit(store, EventKind.FAULT, f"m{i}", experiment="exp", device_id="local/A")
    assert [e.message for e in store_events.recent(store, "exp", limit=3)] == ["m2", "m3", "m4"]


def test_claim_next_takes_planned_order_and_only_runs_this_phone_may_run(store: Store) -> None:
    planned = [
        rq.PlannedRun("b0", "c", (), 0, "local/B", 0),
        rq.PlannedRun("a1", "c", (), 0, "local/A", 1),
        rq.PlannedRun("any2", "c", (), 0, None, 2),
    ]
    rq.insert_planned(store, "exp", planned)
    taken = []
    while (claimed := rq.claim_next(store, "exp", 1, "local/A", "exp/")) is not None:
        run, attempt = claimed
        assert attempt == 1 and run.state is RunState.PENDING  # as it was before the claim
        taken.append(run.run_id)
    assert taken == ["a1", "any2"]  # local/B's run is left for local/B
    stored = rq.get_run(store, "a1")
    assert stored is not None and stored.state is RunState.RUNNING and stored.artifacts_dir == "exp/a1"
    assert stored.ran_on == "local/A"


def test_requeue_failed_retries_lost_runs_with_a_fresh_budget_and_never_done_ones(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(4))
    endings = {
        "r0": (Outcome.DONE, RunState.DONE),
        "r1": (Outcome.LOST, RunState.FAILED),
        "r2": (Outcome.FAILED, RunState.FAILED),
        "r3": (Outcome.TIMEOUT, RunState.FAILED),
    }
    for run_id, (outcome, state) in endings.items():
        attempt = rq.claim(store, run_id, 1, "local/A", "d")
        assert attempt is not None
        rq.finish(store, run_id, attempt, outcome, next_state=state, error=str(outcome))
    assert rq.requeue_failed(store, "exp") == ["r1"]
    r1 = rq.get_run(store, "r1")
    assert r1 is not None and r1.state is RunState.PENDING and r1.attempts == 0 and r1.reason is None
    assert rq.requeue_failed(store, "exp") == []  # nothing lost is left
    assert rq.requeue_failed(store, "exp", lost_only=False) == ["r2", "r3"]
    states = {r.run_id: r.state for r in rq.list_runs(store, "exp")}
    assert states == {
        "r0": RunState.DONE,
        "r1": RunState.PENDING,
        "r2": RunState.PENDING,
        "r3": RunState.PENDING,
    }
    # The next try gets a new attempt number (history kept).
    assert rq.claim(store, "r1", 1, "local/A", "d") == 2


def test_reset_orphans_leaves_a_run_a_live_execution_claimed_again(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(2))
    rq.claim(store, "r0", 5, "local/A", "d")  # held by dead execution 5
    rq.claim(store, "r1", 6, "local/A", "d")  # held by live execution 6
    assert rq.reset_orphans(store, "exp", live_execution_ids=[6]) == ["r0"]
    states = {r.run_id: r.state for r in rq.list_runs(store, "exp")}
    assert states == {"r0": RunState.PENDING, "r1": RunState.RUNNING}


def test_heartbeat_reports_the_leases_still_held(store: Store) -> None:
    mine = ownership.start_execution(store, "exp", ["farm"], "0")
    other = ownership.start_execution(store, "exp", ["farm"], "0")
    assert ownership.acquire_lease(store, "local/A", mine)
    assert ownership.acquire_lease(store, "local/B", mine)
    assert ownership.heartbeat(store, mine) == {"local/A", "local/B"}
    # `mine` stalls past the stale limit (its pid lives on: only the heartbeat tells): B is taken.
    store.execute(
        "UPDATE executions SET heartbeat_at = heartbeat_at - ? WHERE id = ?",
        (ownership.HEARTBEAT_STALE_S + 1, mine),
    )
    store.execute(
        "UPDATE leases SET heartbeat_at = heartbeat_at - ? WHERE execution_id = ?",
        (ownership.HEARTBEAT_STALE_S + 1, mine),
    )
    assert ownership.acquire_lease(store, "local/B", other)
    assert ownership.heartbeat(store, mine) == {"local/A"}
    assert ownership.leased_devices(store) == {"local/A": mine, "local/B": other}


def test_lease_of_a_fresh_execution_is_not_expired(store: Store) -> None:
    holder = ownership.start_execution(store, "exp", ["farm"], "0")
    assert ownership.acquire_lease(store, "local/A", holder)
    store.execute(
        "UPDATE executions SET heartbeat_at = heartbeat_at - ? WHERE id = ?",
        (ownership.HEARTBEAT_STALE_S - 5, holder),
    )
    other = ownership.start_execution(store, "exp", ["farm"], "0")
    assert not ownership.acquire_lease(store, "local/A", other)
    assert [lease.execution_id for lease in ownership.leases(store)] == [holder]


def test_finished_execution_frees_its_leases(store: Store) -> None:
    holder = ownership.start_execution(store, "exp", ["farm"], "0")
    assert ownership.acquire_lease(store, "local/A", holder)
    ownership.finish_execution(store, holder, "finished")
    assert ownership.leased_devices(store) == {}
    assert ownership.acquire_lease(store, "local/A", ownership.start_execution(store, "exp", ["f"], "0"))


def test_artifact_locations_name_the_machine_and_folder_of_the_last_attempt(
    store: Store, tmp_path: Path
) -> None:
    from farm.store.artifacts import artifact_locations, unreadable_here

    rq.insert_planned(store, "exp", _planned(2))
    here = tmp_path / "here"
    execution = ownership.start_execution(store, "exp", ["farm"], "0", results=here)
    for run_id in ("r0", "r1"):
        attempt = rq.claim(store, run_id, execution, "local/A", f"exp/{run_id}")
        assert attempt is not None
        rq.finish(store, run_id, attempt, Outcome.DONE, next_state=RunState.DONE)
    # r1 was written by another coordinator, on another machine.
    store.execute(
        "UPDATE executions SET hostname = 'lab-b', results_dir = '/srv/farm' WHERE id = ?", (execution,)
    )
    (here / "exp" / "r0").mkdir(parents=True)
    locations = artifact_locations(store, "exp")
    assert [(loc.run_id, loc.hostname, loc.relative) for loc in locations] == [
        ("r0", "lab-b", "exp/r0"),
        ("r1", "lab-b", "exp/r1"),
    ]
    missing = unreadable_here(locations, here)
    assert [loc.run_id for loc in missing] == ["r1"]
    assert missing[0].where == "lab-b:/srv/farm/exp/r1"


def test_claim_next_on_lease_claims_only_while_this_execution_holds_the_phone(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(2))
    mine = ownership.start_execution(store, "exp", ["farm"], "0")
    other = ownership.start_execution(store, "exp", ["farm"], "0")
    assert rq.claim_next(store, "exp", mine, "local/A", "exp/", on_lease=True) is None  # no lease yet
    assert ownership.acquire_lease(store, "local/A", other)
    assert rq.claim_next(store, "exp", mine, "local/A", "exp/", on_lease=True) is None  # another's
    ownership.release_lease(store, "local/A", other)
    assert ownership.acquire_lease(store, "local/A", mine)
    claimed = rq.claim_next(store, "exp", mine, "local/A", "exp/", on_lease=True)
    assert claimed is not None
    run, attempt = claimed
    assert (run.run_id, run.state, run.attempts, attempt) == ("r0", RunState.PENDING, 0, 1)
    stored = rq.get_run(store, "r0")
    assert stored is not None and stored.state is RunState.RUNNING and stored.ran_on == "local/A"
    assert stored.artifacts_dir == "exp/r0" and stored.attempts == 1
    opened = store.query("SELECT attempt, execution_id FROM attempts WHERE run_id = 'r0'")
    assert [(r["attempt"], r["execution_id"]) for r in opened] == [(1, mine)]
    assert rq.has_pending(store, "exp", "local/A") and not rq.has_pending(store, "exp", "local/B")


def test_a_stalled_execution_judged_dead_loses_its_runs_and_may_lease_again(store: Store) -> None:
    rq.insert_planned(store, "exp", _planned(1))
    stalled = ownership.start_execution(store, "exp", ["farm"], "0")
    assert ownership.acquire_lease(store, "local/A", stalled)
    claimed = rq.claim_next(store, "exp", stalled, "local/A", "exp/", on_lease=True)
    assert claimed is not None
    store.execute(
        "UPDATE executions SET heartbeat_at = heartbeat_at - ? WHERE id = ?",
        (ownership.HEARTBEAT_STALE_S + 1, stalled),
    )
    assert rq.has_orphans(store, "exp") is False  # still marked running: not yet judged
    assert ownership.mark_dead_executions(store) == [stalled]
    assert rq.has_orphans(store, "exp")
    assert rq.reset_orphans(store, "exp") == ["r0"]
    # It wakes up: its heartbeat says it holds nothing, and its late result is refused.
    assert ownership.heartbeat(store, stalled) == frozenset()
    assert [e.id for e in ownership.live_executions(store)] == [stalled]
    assert not rq.finish(store, "r0", claimed[1], Outcome.DONE, next_state=RunState.DONE)
    assert ownership.acquire_lease(store, "local/A", stalled)


def test_quarantine_is_shown_until_a_sweep_uses_the_phone_again(store: Store) -> None:
    devs.quarantine(store, "lab1/ZY22", "stopped answering; tried reconnect", 7)
    marks = devs.quarantines(store)
    assert list(marks) == ["lab1/ZY22"]
    assert (marks["lab1/ZY22"].reason, marks["lab1/ZY22"].execution_id) == (
        "stopped answering; tried reconnect",
        7,
    )
    devs.clear_quarantine(store, "lab1/ZY22")
    assert devs.quarantines(store) == {}


def test_leases_name_the_experiment_their_coordinator_runs(store: Store) -> None:
    holder = ownership.start_execution(store, "nightly", ["farm"], "0")
    assert ownership.acquire_lease(store, "local/A", holder)
    assert [(lease.device_id, lease.experiment) for lease in ownership.leases(store)] == [
        ("local/A", "nightly")
    ]
