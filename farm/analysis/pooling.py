"""Which factors a figure or table pools (pure): the rule behind "a figure never averages over a
factor silently".

A view (figure or table) names some factors (x, color, facet; a table's rows). Every other factor
that takes more than one level among the rows that agree on all the named ones is pooled: its
levels are averaged into one point. The spec check makes that an error unless the view says
`pool: [factor]`; the report writes what a view pools into its caption.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Pooled:
    """A factor pooled by a view, with every level it takes among the view's rows."""

    factor: str
    levels: tuple[Hashable, ...]


def pooled_factors(
    rows: Sequence[Mapping[str, Hashable]], named: Collection[str], factors: Sequence[str]
) -> list[Pooled]:
    """The factors of `factors` (in that order) not in `named` that take more than one level within
    some group of `rows` agreeing on every named factor."""
    keys = [name for name in factors if name in named]
    others = [name for name in factors if name not in named]
    seen: dict[str, dict[tuple[Hashable, ...], set[Hashable]]] = {name: {} for name in others}
    levels: dict[str, dict[Hashable, None]] = {name: {} for name in others}
    for row in rows:
        group = tuple(row.get(name) for name in keys)
        for name in others:
            value = row.get(name)
            seen[name].setdefault(group, set()).add(value)
            levels[name][value] = None
    return [
        Pooled(name, tuple(levels[name]))
        for name in others
        if any(len(values) > 1 for values in seen[name].values())
    ]


def pooled_phrase(pooled: Sequence[Pooled], phones: int = 1) -> str:
    """What a view pools, for its caption ("" when nothing): `pools backend (3 levels: cpu, cpu-mt,
    gpu) and 2 phones`."""
    parts = [
        f"{p.factor} ({len(p.levels)} levels: {', '.join(str(level) for level in p.levels)})" for p in pooled
    ]
    if phones > 1:
        parts.append(f"{phones} phones")
    if not parts:
        return ""
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"each point pools {joined}"
