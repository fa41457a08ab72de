"""Placeholders in an external program's args and env values (pure).

    --num_threads={threads}            a sweep factor's level in this cell
    --iters={iters}                    a measurement value (iters, warmup, seed, min_seconds, max_seconds)
    --graph={asset:models/x.tflite}    where that listed asset lies on the phone
    {{literal braces}}                 doubled braces are one literal brace

`fields(text)` finds the placeholders (TemplateError for a lone brace or an empty or odd name),
`render(text, values)` fills them in. The spec checks which names may appear; this module only
reads the syntax.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

ASSET_PREFIX = "asset:"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class TemplateError(ValueError):
    """The text is not a valid template; the message says where and what to write instead."""


@dataclass(frozen=True)
class Field:
    """One placeholder: a factor or measurement name, or (asset set) a listed asset's path."""

    name: str
    asset: str | None = None

    @property
    def key(self) -> str:
        """What `render` looks the value up by: the name, or `asset:PATH`."""
        return ASSET_PREFIX + self.asset if self.asset is not None else self.name


def _split(text: str) -> list[str | Field]:
    pieces: list[str | Field] = []
    literal = ""
    at = 0
    while at < len(text):
        char = text[at]
        if text.startswith("{{", at) or text.startswith("}}", at):
            literal += char
            at += 2
            continue
        if char == "}":
            raise TemplateError(f"lone }} at character {at + 1} of {text!r}; write }}}} for a literal brace")
        if char != "{":
            literal += char
            at += 1
            continue
        end = text.find("}", at)
        opened = text.find("{", at + 1)
        if end < 0 or 0 <= opened < end:
            raise TemplateError(f"lone {{ at character {at + 1} of {text!r}; write {{{{ for a literal brace")
        pieces += [literal, _field(text[at + 1 : end], text)]
        literal = ""
        at = end + 1
    pieces.append(literal)
    return [piece for piece in pieces if piece != ""]


def _field(inner: str, text: str) -> Field:
    if inner.startswith(ASSET_PREFIX):
        path = inner[len(ASSET_PREFIX) :].strip()
        if not path:
            raise TemplateError(f"{{asset:}} in {text!r} names no asset; write {{asset:PATH}}")
        return Field(inner, asset=path)
    if not _NAME.match(inner):
        raise TemplateError(
            f"{{{inner}}} in {text!r} is not a placeholder: write {{factor}}, {{iters}} or {{asset:PATH}}"
        )
    return Field(inner)


def fields(text: str) -> tuple[Field, ...]:
    """The placeholders of `text`, in order; TemplateError when its braces do not parse."""
    return tuple(piece for piece in _split(text) if isinstance(piece, Field))


def render(text: str, values: Mapping[str, str]) -> str:
    """`text` with each placeholder replaced by `values[field.key]` (KeyError when one is missing)."""
    return "".join(piece if isinstance(piece, str) else values[piece.key] for piece in _split(text))
