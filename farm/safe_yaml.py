"""The one YAML reader for farm's input files: experiments, farm.yaml and virtual-phone profiles.

    text = read_text(path, "experiment file")   # ConfigError past MAX_FILE_BYTES
    node = compose(text, str(path))             # node tree with line marks, or None when empty
    value = construct(node)                     # plain dicts / lists / scalars

A YAML file is code-shaped data a user may have been sent, so reading one is bounded in every
dimension a file can blow up in, and every refusal is one ConfigError naming FILE:LINE:
- size: at most MAX_FILE_BYTES (a hand-written config is a few KB);
- nesting: at most MAX_DEPTH levels (5,000 `[` would otherwise exhaust Python's recursion);
- aliases: kept, because anchors and merge keys (`<<: *defaults`) are a real convenience for
  sharing settings, and every mark stays where it was written, so errors keep their lines. But
  an alias inside the node it names (`&a [32, *a]`) is refused, since it makes an infinite value,
  and the expanded size (each alias counted with its whole value) is capped at MAX_VALUES, so a
  "billion laughs" file (9 anchors of 9 aliases each, 9**9 values from 400 bytes) is refused at
  the alias that crosses the cap, before anything walks the expanded tree;
- integers: at most MAX_INT_CHARS characters (Python refuses to read 5,000 digits, unmarked);
- tags: only plain-data ones (`!!str`, `!!int`, ...); `!!python/...` and custom tags are refused
  as they are read, wherever they are, with the error naming the file (not `<unicode string>`).

Scalars follow YAML 1.2 where 1.1 surprises people: only `true` / `false` are booleans (so `on:`
stays the string "on"), and `1e-3` is a float.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import Node

from farm.errors import ConfigError

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_INT_CHARS = 100  # 2**63 has 19 digits; a seed or a count is never longer
_YAML_TAG_PREFIX = "tag:yaml.org,2002:"
# Explicit tags a plain-data file may carry (`!!str 0123`); anything else is refused as it is read.
_PLAIN_TAGS = frozenset(
    _YAML_TAG_PREFIX + name for name in ("str", "int", "float", "bool", "null", "seq", "map")
)


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 scalars and the bounds of the module docstring."""

    def __init__(self, text: str, filename: str) -> None:
        super().__init__(text)
        self.name = filename  # every mark (and so every error) names the file
        self._depth = 0
        self._values = 0  # nodes composed so far, each alias counted with its whole value
        self._open_anchors: set[str] = set()  # anchors of the nodes being composed
        self._anchor_values: dict[str, int] = {}  # expanded size of each finished anchored node

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()
        mark = cast("yaml.error.Mark | None", event.start_mark)  # the pure-Python parser's marks
        if isinstance(event, AliasEvent):
            anchor = str(event.anchor)
            if anchor in self._open_anchors:
                raise ComposerError(
                    None,
                    None,
                    f"recursive alias *{anchor}: it is inside the value &{anchor} names",
                    mark,
                )
            node = super().compose_node(parent, index)
            self._count(self._anchor_values.get(anchor, 1), mark, f"alias *{anchor}")
            return node
        tag = getattr(event, "tag", None)
        if tag not in (None, "!") and tag not in _PLAIN_TAGS:
            shown = str(tag).replace(_YAML_TAG_PREFIX, "!!")
            raise ComposerError(
                None,
                None,
                f"the tag {shown} is not allowed: farm reads plain YAML (no !!python or other tags)",
                mark,
            )
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
        anchor = event.anchor
        if anchor is not None:
            self._open_anchors.add(anchor)
        before = self._values
        self._count(1, mark, None)
        node = super().compose_node(parent, index)
        if anchor is not None:
            self._open_anchors.discard(anchor)
            self._anchor_values[anchor] = self._values - before
        self._depth -= 1
        return node

    def _count(self, values: int, mark: yaml.error.Mark | None, alias: str | None) -> None:
        self._values += values
        if self._values <= MAX_VALUES:
            return
        if alias is None:
            problem = f"more than {MAX_VALUES:,} values in one file"
        else:
            problem = (
                f"{alias} stands for {values:,} values and takes the file past {MAX_VALUES:,} "
                "(each use of an alias counts its whole value)"
            )
        raise ComposerError(None, None, problem, mark)


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    # Python refuses to turn more than 4300 digits into an int (a ValueError with no mark): the
    # bound comes first, with the line.
    text = str(node.value)
    if len(text) > MAX_INT_CHARS:
        raise ConstructorError(
            None,
            None,
            f"an integer of {len(text):,} characters: farm reads at most {MAX_INT_CHARS}",
            node.start_mark,
        )
    value: int = yaml.SafeLoader.construct_yaml_int(loader, node)
    return value


_Loader.add_constructor(_YAML_TAG_PREFIX + "int", _construct_int)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in ("tag:yaml.org,2002:bool",)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_text(path: Path, what: str) -> str:
    """The text of a config file; `what` names the kind of file in errors ("experiment file")."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                f"{path}: {_size(size)} is too large for {_article(what)} {what} "
                f"(farm reads at most {_size(MAX_FILE_BYTES)})",
                hint="is this the right file?",
            )
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}", hint="check the path") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {error.start})", hint="is this the right file?"
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None


def compose(text: str, filename: str) -> Node | None:
    """Parse `text` into a node tree with line marks (None for an empty file), within the bounds.

    Raises ConfigError `FILE:LINE: invalid YAML: ...` for anything the bounds or the parser refuse.
    """
    if len(text) > MAX_FILE_BYTES:
        raise ConfigError(
            f"{filename}: more than {_size(MAX_FILE_BYTES)} of text; farm reads at most that much",
            hint="is this the right file?",
        )
    loader: _Loader | None = None
    try:
        loader = _Loader(text, filename)  # the reader refuses control characters right here
        node: Node | None = loader.get_single_node()
        return node
    except yaml.MarkedYAMLError as error:
        raise _marked_error(error, filename) from None
    except yaml.reader.ReaderError as error:  # a control character or bad encoding
        line = text.count("\n", 0, max(error.position, 0)) + 1
        raise ConfigError(
            f"invalid YAML: {error.reason} (character {error.character!r})", location=f"{filename}:{line}"
        ) from None
    except yaml.YAMLError as error:
        message = " ".join(str(error).split())
        raise ConfigError(f"invalid YAML: {message}", location=f"{filename}:1") from None
    except RecursionError:  # the depth bound should make this unreachable; never a traceback
        raise ConfigError(
            f"invalid YAML: nested too deeply (at most {MAX_DEPTH} levels)", location=f"{filename}:1"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def construct(node: Node) -> Any:
    """Plain Python value of a node from `compose` (dicts, lists, str, int, float, bool, None)."""
    filename = node.start_mark.name
    loader = _Loader("", filename)
    try:
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        raise _marked_error(error, filename) from None
    except RecursionError:
        raise ConfigError(
            f"invalid YAML: nested too deeply (at most {MAX_DEPTH} levels)",
            location=f"{filename}:{node.start_mark.line + 1}",
        ) from None
    finally:
        loader.dispose()


def _marked_error(error: yaml.MarkedYAMLError, filename: str) -> ConfigError:
    mark = error.problem_mark or error.context_mark
    line = mark.line + 1 if mark is not None else 1
    problem = error.problem or error.context or "not valid YAML"
    if error.context == "expected a single document in the stream":
        return ConfigError(
            "invalid YAML: a second document (---) starts here; the file holds one",
            location=f"{filename}:{line}",
        )
    context = error.context_mark
    if error.problem and error.context and context is not None and context.line + 1 != line:
        problem += f" ({error.context} started on line {context.line + 1})"
    return ConfigError(f"invalid YAML: {problem}", location=f"{filename}:{line}")


def _size(n_bytes: int) -> str:
    mib = n_bytes / 1024 / 1024
    return f"{mib:.3g} MiB" if mib >= 1 else f"{n_bytes / 1024:.0f} KiB"


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
