"""Every event kind is emitted somewhere in farm, so no view can listen for an event nothing sends.

Kinds are an enum (farm.store.events.EventKind): a listener can name only a member. This test
reads farm's source and collects the kinds passed to the one writer (`events.emit`, a sweep's
`event` method that forwards to it, or a PlannedEvent the engine's rules decide and the sweep
records); a member nobody emits fails here (the live view and the
report once waited for a "charging" event that nothing sent).
"""

from __future__ import annotations

import ast
from pathlib import Path

import farm
from farm.store import events
from farm.store.db import Store
from farm.store.events import EventKind

FARM = Path(farm.__file__).resolve().parent


def _kinds_named_in(node: ast.AST) -> set[str]:
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "EventKind"
    }


def emitted_kinds(root: Path) -> set[str]:
    """Names of EventKind members that reach an emit/event call's kind argument in `root`'s source."""
    found: set[str] = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == "PlannedEvent" and node.args:
                found |= _kinds_named_in(node.args[0])  # the engine's decided events, recorded as given
                continue
            if not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr == "emit" and len(node.args) >= 2:
                found |= _kinds_named_in(node.args[1])
            elif node.func.attr == "event" and node.args:
                kind = node.args[0]
                if isinstance(kind, ast.Name):  # a local chosen just before: `kind = A if ... else B`
                    found |= _assigned_kinds(tree, kind.id)
                found |= _kinds_named_in(kind)
    return found


def _assigned_kinds(tree: ast.AST, name: str) -> set[str]:
    return {
        kind
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
        for kind in _kinds_named_in(n.value)
    }


def test_every_event_kind_is_emitted_somewhere() -> None:
    never = sorted({k.name for k in EventKind} - emitted_kinds(FARM))
    assert never == [], f"event kinds nothing emits (remove them or emit them): {never}"


def test_the_check_catches_a_kind_nobody_sends(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f(store):\n    events.emit(store, EventKind.NOTE, 'x')\n")
    assert emitted_kinds(tmp_path) == {"NOTE"}


def test_events_round_trip_typed_and_filtered_by_kind(tmp_path: Path) -> None:
    with Store(tmp_path / "farm.db") as store:
        events.emit(store, EventKind.THROTTLE, "hot", experiment="e", device_id="local/A")
        events.emit(store, EventKind.NOTE, "fyi", experiment="e")
        events.emit(store, EventKind.QUALITY, "elsewhere", experiment="other")
        got = events.recent(store, "e")
        assert [(e.kind, e.message) for e in got] == [(EventKind.THROTTLE, "hot"), (EventKind.NOTE, "fyi")]
        assert isinstance(got[0].kind, EventKind)
        only = events.recent(store, None, kinds=[EventKind.QUALITY])
        assert [e.message for e in only] == ["elsewhere"]
        assert events.messages(store, "e", [EventKind.THROTTLE]) == [("local/A", "hot")]
