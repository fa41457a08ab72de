"""Per-cell aggregation of per-run metrics across repetitions and phones (pure).

A cell's value is the median over its runs, with a seeded bootstrap 95% CI of that median. A cell
with a single run has no spread across runs; it borrows the run's own interval when one is given
(e.g. the bootstrap CI of its iteration latencies), else the interval collapses to the value.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from farm.analysis import stats


@dataclass(frozen=True)
class Observation:
    """One run's value of a metric, with the group it belongs to and its own CI if it has one."""

    key: tuple[Hashable, ...]
    value: float
    own_ci: tuple[float, float] | None = None


@dataclass(frozen=True)
class GroupStat:
    key: tuple[Hashable, ...]
    count: int
    median: float
    ci_low: float
    ci_high: float
    values: tuple[float, ...] = ()


def _sort_key(key: tuple[Hashable, ...]) -> tuple[tuple[int, float, str], ...]:
    """Numbers in numeric order before strings; None last."""
    parts = []
    for part in key:
        if isinstance(part, bool) or part is None:
            parts.append((2, 0.0, str(part)))
        elif isinstance(part, int | float):
            parts.append((0, float(part), ""))
        else:
            parts.append((1, 0.0, str(part)))
    return tuple(parts)


def aggregate(observations: Iterable[Observation]) -> list[GroupStat]:
    """Median and CI per key, keys sorted (numbers numerically)."""
    groups: dict[tuple[Hashable, ...], list[Observation]] = {}
    for observation in observations:
        groups.setdefault(observation.key, []).append(observation)
    result = []
    for key in sorted(groups, key=_sort_key):
        members = groups[key]
        values = [m.value for m in members]
        if len(members) == 1 and members[0].own_ci is not None:
            low, high = members[0].own_ci
        else:
            ci = stats.bootstrap_median_ci(values)
            low, high = ci.low, ci.high
        result.append(GroupStat(key, len(values), stats.median(values), low, high, tuple(values)))
    return result
