"""Which runs `farm compare` sets against each other (pure): per phone and per cell, side A and
side B, from stored results; then the statistics of farm.analysis.compare, Holm across all cells.

Two ways to form the sides:
- two experiments (`pair_experiments`): runs with the same factor values on the same phone;
- two levels of one factor of one experiment (`pair_levels`): runs on the same phone whose other
  factors agree, A with factor=level_a, B with factor=level_b.

Phones are never pooled: a cell is (phone, the factors both sides share). Only DONE runs with the
metric count, and by default only valid ones (farm.analysis.validity).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from farm.analysis.compare import DEFAULT_ALPHA, Comparison, adjust_holm, compare_samples, min_p_value
from farm.analysis.validity import usable
from farm.store.results import StoredResult
from farm.store.runs import RunState

MIN_RUNS_PER_SIDE = 2
CellKey = tuple[tuple[str, str], ...]  # (factor, level as text), sorted


@dataclass(frozen=True)
class Pair:
    device_id: str
    cell: CellKey
    a: tuple[float, ...]
    b: tuple[float, ...]


@dataclass(frozen=True)
class CellResult:
    """One phone's cell: the comparison, or why there is none (too few runs on a side)."""

    device_id: str
    cell: CellKey
    comparison: Comparison | None
    note: str | None = None


def level_text(value: object) -> str:
    """A factor level as the command line writes it (true/false, 0.5, 64, cpu)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _usable(
    runs: Iterable[StoredResult], metric: str, include_invalid: bool, leave_out: str | None = None
) -> tuple[dict[tuple[str, CellKey, str | None], list[float]], int]:
    """Values by (phone, cell without `leave_out`, the level of `leave_out`)."""
    values: dict[tuple[str, CellKey, str | None], list[float]] = {}
    invalid = 0
    for run in runs:
        value = run.metrics.get(metric)
        if run.state is not RunState.DONE or value is None or not run.device_id:
            continue
        if not include_invalid and not usable(run.metrics, metric):
            invalid += 1
            continue
        cell = tuple(sorted((k, level_text(v)) for k, v in run.factors.items() if k != leave_out))
        level = level_text(run.factors.get(leave_out)) if leave_out is not None else None
        values.setdefault((run.device_id, cell, level), []).append(value)
    return values, invalid


def pair_experiments(
    a_runs: Sequence[StoredResult],
    b_runs: Sequence[StoredResult],
    metric: str,
    *,
    include_invalid: bool = False,
) -> tuple[list[Pair], int]:
    """Pairs of two experiments' runs with equal factors on one phone; and how many invalid runs
    were left out."""
    a, invalid_a = _usable(a_runs, metric, include_invalid)
    b, invalid_b = _usable(b_runs, metric, include_invalid)
    pairs = [
        Pair(key[0], key[1], tuple(a[key]), tuple(b[key])) for key in sorted(a.keys() & b.keys(), key=str)
    ]
    return pairs, invalid_a + invalid_b


def pair_levels(
    runs: Sequence[StoredResult],
    factor: str,
    level_a: str,
    level_b: str,
    metric: str,
    *,
    include_invalid: bool = False,
) -> tuple[list[Pair], int]:
    """Pairs of one experiment's runs at factor=level_a (A) and factor=level_b (B), on one phone
    with the other factors equal; and how many invalid runs were left out."""
    values, invalid = _usable(runs, metric, include_invalid, leave_out=factor)
    pairs = []
    for device_id, cell in sorted({(d, c) for d, c, _ in values}, key=str):
        a, b = values.get((device_id, cell, level_a)), values.get((device_id, cell, level_b))
        if a and b:
            pairs.append(Pair(device_id, cell, tuple(a), tuple(b)))
    return pairs, invalid


def compare_pairs(pairs: Sequence[Pair], *, alpha: float = DEFAULT_ALPHA, seed: int = 0) -> list[CellResult]:
    """Every pair compared; Holm's adjustment over the pairs that had enough runs."""
    compared: list[tuple[int, Comparison]] = []
    results: list[CellResult] = []
    for i, pair in enumerate(pairs):
        if min(len(pair.a), len(pair.b)) < MIN_RUNS_PER_SIDE:
            note = (
                f"too few runs to compare ({len(pair.a)} vs {len(pair.b)}; needs {MIN_RUNS_PER_SIDE} a side)"
            )
            results.append(CellResult(pair.device_id, pair.cell, None, note))
            continue
        compared.append((i, compare_samples(pair.a, pair.b, alpha=alpha, seed=seed + i)))
        results.append(CellResult(pair.device_id, pair.cell, None))
    adjusted = adjust_holm([c for _, c in compared], alpha=alpha)
    for (i, _), comparison in zip(compared, adjusted, strict=True):
        results[i] = CellResult(pairs[i].device_id, pairs[i].cell, comparison, _too_few(comparison, alpha))
    return results


def _too_few(comparison: Comparison, alpha: float) -> str | None:
    """Why "no detectable difference" says nothing when the runs could never reach alpha."""
    smallest = min_p_value(comparison.n_a, comparison.n_b)
    if smallest < alpha:
        return None
    return (
        f"too few runs to reach alpha {alpha:g}: {comparison.n_a} vs {comparison.n_b} runs give no p below "
        f"{smallest:.2g}, whatever the difference"
    )


def phones_left_out(runs: Sequence[StoredResult], pairs: Sequence[Pair]) -> list[CellResult]:
    """The phones that ran (or were meant to run) part of the comparison but have no pair, each
    with why: their runs failed (with the last reason), are not done, or are invalid."""
    compared = {pair.device_id for pair in pairs}
    by_phone: dict[str, list[StoredResult]] = {}
    for run in runs:
        if run.device_id and run.device_id not in compared:
            by_phone.setdefault(run.device_id, []).append(run)
    left = []
    for device_id, mine in sorted(by_phone.items()):
        counts: dict[RunState, int] = {}
        for run in mine:
            counts[run.state] = counts.get(run.state, 0) + 1
        states = ", ".join(f"{n} {state.value.lower()}" for state, n in sorted(counts.items()))
        failed = [run for run in mine if run.state is RunState.FAILED and run.reason]
        why = f"; last failure: {failed[-1].reason}" if failed else ""
        left.append(
            CellResult(device_id, (), None, f"not compared: no valid runs on both sides ({states}){why}")
        )
    return left
