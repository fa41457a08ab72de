"""Data-quality notes as typed values: what a note is about (its kind, the phone, the cell) and
its sentence, so that one thing said many times (an engine note every run of a phone repeats,
an event two coordinators of a sweep both stored) is rendered once, by what it is about, not by
comparing sentences; and the engine's own sentence on the background load is never one of them
(env.json keeps it apart, under `load_note`): the report states the load from the run's
gpu_load_mean metric, in one format (farm.report.tables).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class NoteKind(enum.Enum):
    SPEC = "spec"  # the stored spec does not validate with this farm
    PHONE = "phone"  # a quality event the engine stored for a phone (charging left on, ...)
    RUN = "run"  # what the engine noted while it ran a run (its env.json's notes)
    ARTIFACTS = "artifacts"  # run folders this machine cannot read (another coordinator's disk)
    REPORT = "report"  # what the report found in the runs' metrics (throttling, load, power)


@dataclass(frozen=True)
class QualityNote:
    kind: NoteKind
    text: str
    device_id: str | None = None  # the phone it is about; None: the experiment

    @property
    def key(self) -> tuple[NoteKind, str | None, str]:
        """What it is about: a phone's engine note is the same whichever run or cell repeats it."""
        return (self.kind, self.device_id, self.text)

    def line(self) -> str:
        return f"{self.device_id}: {self.text}" if self.device_id else self.text


def unique(notes: Iterable[QualityNote]) -> tuple[QualityNote, ...]:
    """Each note once (by `key`), in the order first seen."""
    seen: dict[tuple[NoteKind, str | None, str], QualityNote] = {}
    for note in notes:
        seen.setdefault(note.key, note)
    return tuple(seen.values())


def run_notes(device_id: str, env: Mapping[str, object]) -> list[QualityNote]:
    """The engine's notes of one attempt (env.json), its load note left out (see the module)."""
    notes = env.get("notes")
    if not isinstance(notes, list):
        return []
    return [QualityNote(NoteKind.RUN, str(n), device_id) for n in notes if n]
