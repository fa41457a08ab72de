"""Data-quality notes are typed values, said once by what they are about (kind, phone), not by
comparing sentences: an engine note every run of a phone repeats is one note of that phone;
the engine's own sentence on the background load is kept apart in env.json (`load_note`), so
the report states the load once, from the run's gpu_load_mean metric, in its own format."""

from __future__ import annotations

from pathlib import Path

from farm.report.notes import NoteKind
from farm.report.query import load_report_data
from farm.report.tables import quality_notes
from farm.store import Outcome, RunState, Store, ownership
from farm.store import runs as run_store
from farm.store.runs import Metric, PlannedRun

CHARGING = "charging could not be disabled: no writable charging node"


def test_a_phones_repeated_note_is_one_note_and_the_load_is_said_once(tmp_path: Path) -> None:
    runs = [PlannedRun(f"r{i}", f"c{i}", (("gpu_load", 0.9),), 0, "local/A", i) for i in range(3)]
    with Store.in_results(tmp_path).open() as store:
        run_store.save_experiment(store, "x", "{}", "digest", "x.yaml")
        run_store.insert_planned(store, "x", runs)
        execution = ownership.start_execution(store, "x", ["farm"], "0")
        for i, run in enumerate(runs):
            achieved = 0.60 + 0.01 * i  # each run's engine sentence differs in its numbers
            # env.json as farm.engine.collect writes it: the load's sentence under its own key
            load_note = f"background load not reached: target 0.9, achieved {achieved}"
            env = {"device_id": "local/A", "notes": [CHARGING], "load_note": load_note}
            attempt = run_store.claim(store, run.run_id, execution, "local/A", f"x/{run.run_id}")
            assert attempt is not None
            metrics = [
                Metric("gpu_load_mean", achieved, "fraction"),
                Metric("gpu_load_target", 0.9, "fraction"),
            ]
            metrics.append(Metric("gpu_load_reached", 0.0, "bool"))
            run_store.finish(
                store, run.run_id, attempt, Outcome.DONE, next_state=RunState.DONE, env=env, metrics=metrics
            )
        data = load_report_data(store, "x")
    engine = [n for n in data.notes if n.kind is NoteKind.RUN]
    assert [(n.device_id, n.text) for n in engine] == [("local/A", CHARGING)]
    lines = quality_notes(data)
    assert not any("background load not reached" in line for line in lines)
    (load,) = [line for line in lines if "background GPU load" in line]
    assert load.startswith("3 run(s) fell short") and "achieved 0.62" in load
