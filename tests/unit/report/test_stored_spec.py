"""The report reads the stored spec back as an Experiment (validated again), and says so when a
spec stored by another farm version does not validate."""

from __future__ import annotations

import json
from pathlib import Path

from farm.engine.runner import spec_json
from farm.experiment import load_text
from farm.report.notes import NoteKind
from farm.report.query import load_report_data
from farm.store import Store
from farm.store import runs as run_store
from farm.store.runs import PlannedRun

SPEC = """
name: asked
description: what the report shows
benchmark: {program: lstm, params: {seq_len: 4}}
sweep: {hidden: [8, 16]}
report:
  figures:
    - {x: hidden, y: latency_ms, kind: bar}
"""


def _store_with(tmp_path: Path, text: str) -> Store:
    store = Store.in_results(tmp_path).open()
    run_store.save_experiment(store, "asked", text, "digest", "asked.yaml")
    run_store.insert_planned(store, "asked", [PlannedRun("r0", "c0", (("hidden", 8),), 0, "local/A", 0)])
    return store


def test_the_stored_spec_is_an_experiment_again(tmp_path: Path) -> None:
    experiment = load_text(SPEC)
    text, _digest = spec_json(experiment)
    with _store_with(tmp_path, text) as store:
        data = load_report_data(store, "asked")
    assert data.spec == experiment
    assert data.benchmark == "lstm" and data.description == "what the report shows"
    assert data.factor_names == ("hidden",)
    assert [(f.x, f.y, f.kind.value) for f in data.figures] == [("hidden", "latency_ms", "bar")]
    assert not any(note.kind is NoteKind.SPEC for note in data.notes)


def test_a_spec_this_farm_cannot_read_is_a_note_not_a_crash(tmp_path: Path) -> None:
    experiment = load_text(SPEC)
    document = json.loads(spec_json(experiment)[0])
    document["benchmark"]["program"] = "a_program_of_a_newer_farm"
    with _store_with(tmp_path, json.dumps(document)) as store:
        data = load_report_data(store, "asked")
    assert data.spec is None and data.benchmark is None and data.figures == ()
    assert data.factor_names == ("hidden",)  # from the runs
    (note,) = [note for note in data.notes if note.kind is NoteKind.SPEC]
    assert "does not validate" in note.text and "a_program_of_a_newer_farm" in note.text
