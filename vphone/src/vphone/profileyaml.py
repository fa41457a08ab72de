"""Reading a profile's YAML with line marks, bounded (a profile may be a file someone sent).

farm has its own reader for experiment files; the simulator imports nothing from farm, and its
profiles need less: no anchors or aliases (a profile is flat facts, each with its source), no
tags beyond plain data (SafeLoader's), a size and a nesting cap. Every refusal names FILE:LINE.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent

from vphone.errors import ConfigError

MAX_PROFILE_BYTES = 256 * 1024
MAX_NESTING = 16
# Explicit tags a plain-data file may carry (`!!str 0123`); any other is refused where it is written.
PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")
)


class _ProfileLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and anchors and counts nesting as it composes."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.name = source
        self.nesting = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        line = f"{self.name}:{event.start_mark.line + 1}"
        if isinstance(event, AliasEvent) or (isinstance(event, NodeEvent) and event.anchor):
            raise ConfigError("profiles use no anchors or aliases; write the value out", location=line)
        tag = getattr(event, "tag", None)
        if tag is not None and tag not in PLAIN_TAGS and tag != "!":
            raise ConfigError(f"the tag {tag} is not allowed in a profile", location=line)
        opens = isinstance(event, CollectionStartEvent)
        if opens:
            self.nesting += 1
            if self.nesting > MAX_NESTING:
                raise ConfigError(f"nested deeper than {MAX_NESTING} levels", location=line)
        try:
            return super().compose_node(parent, index)
        finally:
            if opens:
                self.nesting -= 1


def read_profile_text(path: Path) -> str:
    """The profile's text; ConfigError for a missing, unreadable, non-UTF-8 or oversized file."""
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_PROFILE_BYTES // 1024} KiB; is this a profile?")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such profile file", hint="check the path") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None


def compose_profile(text: str, source: str) -> yaml.Node | None:
    """The node tree of one profile document (None when empty), or ConfigError at FILE:LINE."""
    if len(text) > MAX_PROFILE_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_PROFILE_BYTES // 1024} KiB; is this a profile?")
    loader = _ProfileLoader(text, source)
    try:
        return loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1 if mark else 1}"
        raise ConfigError(f"invalid YAML: {error.problem or error.context}", location=where) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"invalid YAML: {' '.join(str(error).split())}", location=f"{source}:1") from None
    finally:
        loader.dispose()


def scalar_value(node: yaml.Node) -> Any:
    """The plain value of a scalar node (SafeLoader's resolution: int, float, bool, str, None)."""
    loader = _ProfileLoader("", node.start_mark.name)
    try:
        return loader.construct_object(node, deep=True)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        raise ConfigError(
            f"invalid value: {error.problem}",
            location=f"{node.start_mark.name}:{mark.line + 1 if mark else 1}",
        ) from None
    finally:
        loader.dispose()
