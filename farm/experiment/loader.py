"""YAML text -> node tree that remembers where every key and item came from.

Experiment files are parsed in two steps so every error can name its line: `compose()` builds
PyYAML's node tree (each node carries its start mark), `to_python()` turns that tree into plain
dicts / lists / scalars for pydantic, and `line_of()` maps a key path from a pydantic error back
to the line of the node it names.

The YAML itself is read by farm.safe_yaml (bounded size, nesting and aliases; YAML 1.2 booleans,
so `on:` in `retries.on` stays the string "on"). Duplicate keys are an error here instead of
PyYAML's silent last-one-wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from farm import safe_yaml
from farm.errors import ConfigError

PathPart = str | int
MERGE_TAG = "tag:yaml.org,2002:merge"
STR_TAG = "tag:yaml.org,2002:str"


def compose(text: str, filename: str) -> MappingNode:
    """Parse `text` into a node tree whose root is a mapping; ConfigError with the parser's line.

    The bounds on size, nesting and aliases are farm.safe_yaml's (see there).
    """
    root = safe_yaml.compose(text, filename)
    if root is None:
        raise ConfigError(
            "the file is empty; an experiment needs at least name and benchmark", location=f"{filename}:1"
        )
    if not isinstance(root, MappingNode):
        raise ConfigError(
            f"expected a mapping of keys (name:, benchmark:, ...), got {_kind(root)}",
            location=f"{filename}:{root.start_mark.line + 1}",
        )
    _reject_duplicate_keys(root, (), filename)
    return root


def to_python(node: Node) -> Any:
    """Plain Python value of a node (dicts, lists, str, int, float, bool, None)."""
    return safe_yaml.construct(node)


def line_of(root: Node, path: Sequence[PathPart]) -> int:
    """1-based line of the deepest node `path` reaches (keys of mappings, indexes of sequences).

    For the last part of a mapping path the KEY's line is used, so an unknown key points at itself.
    Parts that do not exist (a missing key, a union tag in a pydantic loc) stop the walk there.
    """
    node = root
    line = root.start_mark.line + 1
    for part in path:
        if isinstance(node, MappingNode):
            entry = _find_key(node, part)
            if entry is None:
                break
            key_node, node = entry
            line = key_node.start_mark.line + 1
        elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def format_path(path: Sequence[PathPart]) -> str:
    """`("sweep", "hidden", 1)` -> `sweep.hidden[1]`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def find(root: Node, path: Sequence[PathPart]) -> Node | None:
    """The node at `path`, or None when some part of it does not exist."""
    node: Node = root
    for part in path:
        if isinstance(node, MappingNode):
            entry = _find_key(node, part)
            if entry is None:
                return None
            node = entry[1]
        elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
        else:
            return None
    return node


def overlay(base: MappingNode, override: MappingNode) -> MappingNode:
    """`base` with `override` merged in: mappings merge key by key, anything else is replaced.

    Works on nodes so a value keeps the line it was written on (in the variant or in the base).
    """
    entries: list[tuple[Node, Node]] = list(base.value)
    for key_node, value_node in override.value:
        for index, (base_key, base_value) in enumerate(entries):
            if _same_key(base_key, key_node):
                if isinstance(base_value, MappingNode) and isinstance(value_node, MappingNode):
                    entries[index] = (base_key, overlay(base_value, value_node))
                else:  # replaced: point at the override's key
                    entries[index] = (key_node, value_node)
                break
        else:
            entries.append((key_node, value_node))
    return MappingNode(base.tag, entries, base.start_mark, base.end_mark, base.flow_style)


def without_key(node: MappingNode, key: str) -> MappingNode:
    """A copy of a mapping node without `key`."""
    entries = [(k, v) for k, v in node.value if not (isinstance(k, ScalarNode) and k.value == key)]
    return MappingNode(node.tag, entries, node.start_mark, node.end_mark, node.flow_style)


def _find_key(node: MappingNode, part: PathPart) -> tuple[Node, Node] | None:
    for key_node, value_node in node.value:
        if isinstance(key_node, ScalarNode) and key_node.value == str(part):
            return key_node, value_node
    return None


def _same_key(a: Node, b: Node) -> bool:
    return isinstance(a, ScalarNode) and isinstance(b, ScalarNode) and a.value == b.value


def _reject_duplicate_keys(node: Node, path: tuple[PathPart, ...], filename: str) -> None:
    """Every mapping key is a plain string, and appears once (PyYAML would keep the last)."""
    if isinstance(node, MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode) or key_node.tag != STR_TAG:
                shown = key_node.value if isinstance(key_node, ScalarNode) else _kind(key_node)
                raise ConfigError(
                    f"{format_path(path)}: keys must be names like hidden or measurement, got {shown}",
                    location=f"{filename}:{line}",
                )
            if key_node.value in seen:
                raise ConfigError(
                    f"{format_path((*path, key_node.value))}: duplicate key (first set on line "
                    f"{seen[key_node.value]}); keep one",
                    location=f"{filename}:{line}",
                )
            seen[key_node.value] = line
            _reject_duplicate_keys(value_node, (*path, key_node.value), filename)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            _reject_duplicate_keys(item, (*path, index), filename)


def _kind(node: Node) -> str:
    if isinstance(node, SequenceNode):
        return "a list"
    if isinstance(node, ScalarNode):
        return f'the scalar "{node.value}"'
    return "a mapping"
