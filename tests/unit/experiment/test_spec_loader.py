"""YAML node layer: line lookup, YAML 1.2 scalars, duplicate keys, variant overlay."""

from __future__ import annotations

import pytest

from farm.errors import ConfigError
from farm.experiment.loader import compose, find, format_path, line_of, overlay, to_python

TEXT = """\
name: x
sweep:
  hidden:
    - 32
    - 64
  backend: [cpu, gpu]
retries:
  on: [timeout]
"""


def test_line_of_points_at_keys_and_items() -> None:
    root = compose(TEXT, "f.yaml")
    assert line_of(root, ("name",)) == 1
    assert line_of(root, ("sweep", "hidden")) == 3
    assert line_of(root, ("sweep", "hidden", 1)) == 5
    assert line_of(root, ("sweep", "backend", 1)) == 6


def test_line_of_stops_at_the_deepest_existing_node() -> None:
    root = compose(TEXT, "f.yaml")
    assert line_of(root, ("sweep", "layers")) == 2  # missing key: its parent's line
    assert line_of(root, ("sweep", "hidden", 9)) == 3  # index out of range
    assert line_of(root, ("sweep", "hidden", "int", 0)) == 3  # a union tag ends the walk


def test_only_true_and_false_are_booleans() -> None:
    data = to_python(compose("on: yes\nno: off\nflag: true\nsci: 1e-3\n", "f.yaml"))
    assert data == {"on": "yes", "no": "off", "flag": True, "sci": 0.001}


def test_duplicate_keys_are_rejected_with_both_lines() -> None:
    with pytest.raises(ConfigError, match=r"f.yaml:4: a.b: duplicate key \(first set on line 2\)"):
        compose("a:\n  b: 1\n  c: 2\n  b: 3\n", "f.yaml")


def test_duplicate_keys_inside_list_items_name_the_index() -> None:
    with pytest.raises(ConfigError, match=r"f.yaml:3: exclude\[0\].x: duplicate key"):
        compose("exclude:\n  - x: 1\n    x: 2\n", "f.yaml")


def test_overlay_merges_mappings_and_replaces_lists_keeping_lines() -> None:
    base = compose("a:\n  x: 1\n  y: [1, 2]\nb: 2\n", "f.yaml")
    over = compose("a:\n  y: [3]\n  z: 4\n", "f.yaml")
    merged = overlay(base, over)
    assert to_python(merged) == {"a": {"x": 1, "y": [3], "z": 4}, "b": 2}
    node = find(merged, ("a", "y"))
    assert node is not None and node.start_mark.line + 1 == 2  # line in the override text


def test_format_path() -> None:
    assert format_path(("sweep", "hidden", 1)) == "sweep.hidden[1]"
    assert format_path(("zip", 0, 1)) == "zip[0][1]"
    assert format_path(()) == "(top level)"


def test_anchors_and_merge_keys_work() -> None:
    data = to_python(compose("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n", "f.yaml"))
    assert data["other"] == {"x": 1, "y": 2}
