"""Results kept in the run folder while the store was away are stored at the next start, once."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from farm.store import Metric, Outcome, RunState, Store, outbox
from farm.store import runs as rq


def _claimed(store: Store, run_id: str = "r0") -> int:
    rq.insert_planned(store, "exp", [rq.PlannedRun(run_id, "c", (), 0, None, 0)])
    attempt = rq.claim(store, run_id, 1, "local/A", f"exp/{run_id}")
    assert attempt is not None
    return attempt


def _result(attempt: int, run_id: str = "r0") -> outbox.PendingResult:
    return outbox.PendingResult(
        run_id,
        attempt,
        Outcome.DONE,
        RunState.DONE,
        exit_code=0,
        load_target=0.5,
        load_achieved=0.49,
        env={"charging": {"disabled": True}},
        metrics=(Metric("latency_median_ms", 12.5, "ms"), Metric("energy_mj", math.nan, "mJ")),
    )


def _unmeasured_as_none(result: outbox.PendingResult) -> outbox.PendingResult:
    """NaN != NaN: compare an unmeasured value as None."""
    return replace(result, metrics=tuple(m if m.measured else replace(m, value=None) for m in result.metrics))


def test_a_kept_result_round_trips_as_json() -> None:
    result = _result(3)
    assert _unmeasured_as_none(outbox.PendingResult.from_json(result.to_json())) == _unmeasured_as_none(
        result
    )


def test_replay_stores_a_kept_result_once_and_removes_the_file(store: Store, tmp_path: Path) -> None:
    attempt = _claimed(store)
    path = outbox.keep(tmp_path / "exp" / "r0", _result(attempt))
    assert outbox.replay(store, tmp_path, "exp") == ["r0"]
    run = rq.get_run(store, "r0")
    assert run is not None and run.state is RunState.DONE
    stored = {m.name: m for m in rq.get_metrics(store, "r0")}
    assert stored["latency_median_ms"].value == 12.5 and not stored["energy_mj"].measured  # NaN on both
    assert not path.exists()
    assert outbox.replay(store, tmp_path, "exp") == []


def test_a_result_for_a_run_reset_meanwhile_is_not_applied_but_kept_aside(
    store: Store, tmp_path: Path
) -> None:
    attempt = _claimed(store)
    folder = tmp_path / "exp" / "r0"
    outbox.keep(folder, _result(attempt))
    rq.reset_orphans(store, "exp", live_execution_ids=[])  # another farm reset it first
    rq.claim(store, "r0", 2, "local/B", "exp/r0")  # and it runs again elsewhere
    assert outbox.replay(store, tmp_path, "exp") == []
    run = rq.get_run(store, "r0")
    assert run is not None and run.state is RunState.RUNNING and rq.get_metrics(store, "r0") == []
    assert (folder / outbox.STALE_NAME).is_file() and not (folder / outbox.PENDING_NAME).exists()
