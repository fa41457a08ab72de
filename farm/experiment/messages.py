"""pydantic validation errors -> `key.path: what is wrong` with the line of the YAML node (pure).

pydantic locs can contain parts that are not in the file (union member tags such as `int` or
`literal['auto']`, a shorthand's normalised key); those are dropped by walking the node tree.
Several errors at one place (the members of a union) merge into one "expected A or B" message;
when a deeper place also failed, the deeper, more specific message wins.
"""

from __future__ import annotations

import re
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from farm.errors import ConfigError
from farm.experiment.checks import suggest
from farm.experiment.loader import PathPart, format_path, line_of
from farm.experiment.programs import number_text, show
from farm.experiment.sections import NAME_PATTERN, SLUG_PATTERN

# error type -> (singular, plural) of what was expected
_TYPE_WORDS: dict[str, tuple[str, str]] = {
    "bool_type": ("true or false", "booleans"),
    "bool_parsing": ("true or false", "booleans"),
    "int_type": ("an integer", "integers"),
    "int_parsing": ("an integer", "integers"),
    "int_from_float": ("an integer", "integers"),
    "float_type": ("a number", "numbers"),
    "float_parsing": ("a number", "numbers"),
    "finite_number": ("a finite number", "finite numbers"),
    "string_type": ("a string", "strings"),
    "list_type": ("a list", "lists"),
    "tuple_type": ("a list", "lists"),
    "dict_type": ("a mapping", "mappings"),
    "model_type": ("a mapping", "mappings"),
    "model_attributes_type": ("a mapping", "mappings"),
}
_PATTERNS = {
    SLUG_PATTERN: 'a lowercase name of letters, digits, "-" and "_"',
    NAME_PATTERN: "a snake_case name (lowercase letters, digits and _)",
}
_BOUNDS = {"ge": "at least", "gt": "greater than", "le": "at most", "lt": "less than"}


@dataclass(frozen=True)
class Problem:
    """One located mistake: `line` in the file, `path` as shown, `message`."""

    line: int
    path: str
    message: str


# A file with more mistakes than this lists these and says how to see the rest.
LISTED_PROBLEMS = 10


def problems_error(problems: Sequence[Problem], filename: str, suffix: str = "") -> ConfigError:
    """One ConfigError for all of a file's problems (sorted by line): the first on the first line
    (`FILE:LINE: key.path: what`, `suffix` after it), each further one on a line of its own in the
    same form, at most LISTED_PROBLEMS in all, then how many are left and how to see them."""
    first, rest = problems[0], problems[1:LISTED_PROBLEMS]
    unlisted = len(problems) - 1 - len(rest)
    message = f"{first.path}: {first.message}{suffix}"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problems:)"
        message += "".join(f"\n{filename}:{p.line}: {p.path}: {p.message}" for p in rest)
    if unlisted:
        message += f"\n... and {unlisted} more: fix these and load the file again to see them"
    return ConfigError(message, location=f"{filename}:{first.line}")


def from_validation_error(error: ValidationError, root: MappingNode, model: type[BaseModel]) -> list[Problem]:
    """Located problems of a pydantic error, sorted by line."""
    groups: dict[tuple[PathPart, ...], list[dict[str, Any]]] = {}
    for item in error.errors(include_url=False):
        loc = _clean_loc(item["loc"], root, item["type"])
        groups.setdefault(loc, []).append(dict(item))
    # A union fails once per member; keep the most specific place that failed.
    deepest = [loc for loc in groups if not any(o[: len(loc)] == loc and o != loc for o in groups)]
    problems = [_describe(loc, groups[loc], root, model) for loc in deepest]
    return sorted(problems, key=lambda p: p.line)


def at_path(path: Sequence[PathPart], message: str, root: MappingNode) -> Problem:
    """A problem found by the cross-field checks, located by its key path."""
    shown: Sequence[PathPart] = path
    if path and isinstance(path[-1], int) and message.startswith("expected a list"):
        shown = path[:-1]
    return Problem(line_of(root, path), format_path(shown), message)


def _clean_loc(loc: Sequence[PathPart], root: MappingNode, kind: str) -> tuple[PathPart, ...]:
    cleaned: list[PathPart] = []
    node: Node | None = root
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(node, MappingNode):
            child = _child(node, part)
            if child is not None or (last and kind in ("missing", "extra_forbidden")):
                cleaned.append(part)
                node = child
        elif isinstance(node, SequenceNode) and isinstance(part, int):
            cleaned.append(part)
            node = node.value[part] if 0 <= part < len(node.value) else None
        # anything else is a union tag or a normalised key that is not in the file
    return tuple(cleaned)


def _child(node: MappingNode, part: PathPart) -> Node | None:
    for key, value in node.value:
        if isinstance(key, ScalarNode) and key.value == str(part):
            return value
    return None


def _describe(
    loc: tuple[PathPart, ...], items: list[dict[str, Any]], root: MappingNode, model: type[BaseModel]
) -> Problem:
    line = line_of(root, loc)
    first = items[0]
    kind = first["type"]
    value = first.get("input")
    in_list = bool(loc) and isinstance(loc[-1], int)
    if kind == "missing":
        return Problem(line, format_path(loc), "is required but missing")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1]) or []
        hint = suggest(str(loc[-1]), allowed) or (f" (allowed here: {', '.join(allowed)})" if allowed else "")
        return Problem(line, format_path(loc), f"unknown key{hint}")
    choices = [(w, w) for w in (_choice_words(item) for item in items) if w]
    words = choices + [_TYPE_WORDS[item["type"]] for item in items if item["type"] in _TYPE_WORDS]
    if choices and len(words) == len(choices):
        in_list = False  # "retries.on[1]: expected one of ..." reads better than a plural
    if words:
        shown = loc[:-1] if in_list else loc
        expected = _join([plural for _, plural in words]) if in_list else _join([s for s, _ in words])
        prefix = "expected a list of " if in_list else "expected "
        hint = suggest(value, _options(items)) if isinstance(value, str) else ""
        return Problem(line, format_path(shown), f"{prefix}{expected}, got {show(value)}{hint}")
    return Problem(line, format_path(loc), _other_message(first))


def _options(items: list[dict[str, Any]]) -> list[str]:
    """The allowed values named by enum / literal errors."""
    found: list[str] = []
    for item in items:
        if item["type"] in ("enum", "literal_error"):
            found += re.findall(r"'([^']*)'", str(item.get("ctx", {}).get("expected", "")))
    return found


def _choice_words(item: dict[str, Any]) -> str | None:
    if item["type"] not in ("enum", "literal_error"):
        return None
    options = _options([item])
    return (
        f"one of {', '.join(options)}" if len(options) > 1 else (options[0] if options else "a valid choice")
    )


def _join(words: Sequence[str]) -> str:
    unique = list(dict.fromkeys(words))
    for wide, narrow in (("a number", "an integer"), ("numbers", "integers")):
        if wide in unique and narrow in unique:
            unique.remove(narrow)
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " or " + unique[-1]


def _other_message(item: dict[str, Any]) -> str:
    kind, ctx, value = item["type"], item.get("ctx") or {}, item.get("input")
    for bound, words in _BOUNDS.items():
        if bound in ctx and kind.endswith(("than", "than_equal")):
            return f"must be {words} {number_text(ctx[bound])}, got {show(value)}"
    if kind == "string_pattern_mismatch":
        return f"expected {_PATTERNS.get(ctx.get('pattern', ''), 'a valid name')}, got {show(value)}"
    if kind in ("too_short", "string_too_short"):
        minimum = ctx.get("min_length", 1)
        return "must not be empty" if minimum <= 1 else f"needs at least {minimum} items"
    if kind in ("too_long", "string_too_long"):
        return f"is too long (at most {ctx.get('max_length')})"
    message = str(item.get("msg", "is not valid"))
    return message.removeprefix("Value error, ")


def _allowed_keys(model: type[BaseModel], path: Sequence[PathPart]) -> list[str] | None:
    """The keys the model accepts at `path` (for did-you-mean), or None when it is not a model."""
    annotation: Any = model
    for part in path:
        annotation = _strip(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        else:
            args = get_args(annotation)
            if not args:
                return None
            annotation = args[-1] if get_origin(annotation) is dict else args[0]
    annotation = _strip(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [name for name, field in annotation.model_fields.items() if not _hidden(field)]
    return None


def _strip(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            members = [a for a in get_args(annotation) if a is not type(None)]
            models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
            annotation = models[0] if models else members[0]
        else:
            return annotation


def _hidden(field: Any) -> bool:
    return field.description == "set by the loader"
