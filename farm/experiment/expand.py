"""Sweep expansion: factors x levels -> cells (pure).

A cell is one point of the sweep: one level for every swept factor. Cells are the cross product
of the factors, where each `zip` group counts as one factor whose levels are taken element-wise,
minus the cells an `exclude` rule matches (a rule matches when every factor it names has the
given level, or one of the given levels when a list is written).

Cells are ordered as the file lists factors (first factor slowest), so `grouped` runs follow the
file. `Cell.cell_id` hashes only the factor names and values, so it stays the same when the file
lists factors, levels or keys in another order.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

Scalar = bool | int | float | str
Assignment = tuple[tuple[str, Scalar], ...]


def same_level(a: Scalar, b: Scalar) -> bool:
    """Equality that keeps true and 1 apart (Python's == does not)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def level_key(*levels: Scalar) -> tuple[object, ...]:
    """A hashable key under which levels are equal exactly when `same_level` says so."""
    return tuple(item for level in levels for item in (isinstance(level, bool), level))


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def short_hash(text: str, length: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@dataclass(frozen=True)
class Cell:
    """One point of the sweep. `factors` is sorted by factor name."""

    factors: Assignment

    @classmethod
    def of(cls, assignment: Mapping[str, Scalar] | Iterable[tuple[str, Scalar]]) -> Cell:
        items = assignment.items() if isinstance(assignment, Mapping) else assignment
        return cls(tuple(sorted(items, key=lambda item: item[0])))

    @cached_property
    def encoded(self) -> str:
        """Canonical JSON of the factors, `[["backend","gpu"],["hidden",64]]`: what ids hash."""
        return canonical_json([[name, value] for name, value in self.factors])

    @cached_property
    def cell_id(self) -> str:
        """Stable hash of the factor values; the same cell always has the same id."""
        return short_hash(self.encoded, 12)

    def as_dict(self) -> dict[str, Scalar]:
        return dict(self.factors)

    def get(self, name: str, default: Scalar | None = None) -> Scalar | None:
        for factor, value in self.factors:
            if factor == name:
                return value
        return default

    def label(self, order: Sequence[str] = ()) -> str:
        """`backend=gpu hidden=64`, factors in `order` first (e.g. the file's order)."""
        rank = {name: index for index, name in enumerate(order)}
        items = sorted(self.factors, key=lambda item: (rank.get(item[0], len(rank)), item[0]))
        return " ".join(f"{name}={value}" for name, value in items) or "(single cell)"


def rule_matches(rule: Mapping[str, Scalar | Sequence[Scalar]], cell: Mapping[str, Scalar]) -> bool:
    """Whether an exclude rule (partial assignment; a list means any of) matches a cell."""
    for name, wanted in rule.items():
        if name not in cell:
            return False
        options = wanted if isinstance(wanted, list | tuple) else (wanted,)
        if not any(same_level(cell[name], option) for option in options):
            return False
    return True


def cross_product_size(
    sweep: Mapping[str, Sequence[Scalar]], zip_groups: Sequence[Sequence[str]] = ()
) -> int:
    """How many cells `cells_of` makes before exclude rules, without making them."""
    zipped = {name for group in zip_groups for name in group}
    size = math.prod(len(levels) for name, levels in sweep.items() if name not in zipped)
    for group in zip_groups:
        size *= min((len(sweep[name]) for name in group if name in sweep), default=1)
    return size


def cells_of(
    sweep: Mapping[str, Sequence[Scalar]],
    zip_groups: Sequence[Sequence[str]] = (),
    exclude: Sequence[Mapping[str, Scalar | Sequence[Scalar]]] = (),
) -> list[Cell]:
    """All cells of a sweep, in file order. Inputs must be valid (the spec checks them)."""
    group_of = {name: tuple(group) for group in zip_groups for name in group}
    dimensions: list[list[Assignment]] = []
    placed: set[str] = set()
    for name in sweep:
        if name in placed:
            continue
        group = group_of.get(name, (name,))
        placed.update(group)
        columns = [sweep[member] for member in group]
        dimensions.append([tuple(zip(group, row, strict=True)) for row in zip(*columns, strict=True)])
    cells = []
    for combination in itertools.product(*dimensions):
        assignment = {name: value for part in combination for name, value in part}
        if not any(rule_matches(rule, assignment) for rule in exclude):
            cells.append(Cell.of(assignment))
    return cells
