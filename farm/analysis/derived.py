"""Derived metrics of a study (pure): the ratios, shares, crossovers and best levels its paper
argues with, computed per phone and cell from the tidy frame (farm.report.frame) or from samples.

- relative_to: per phone and cell, each level of a factor against a reference level (MobiRNN's
  GPU speedup over CPU): the ratio of medians over runs with a percentile-bootstrap CI, the
  statistics of farm.analysis.compare.
- share_of: per phone and cell, a part's share of a whole (Das et al.'s data movement vs compute),
  the median over runs of part / whole with a bootstrap CI.
- crossover: along an ordered factor, the level where a ratio crosses 1 (the background load
  where the GPU stops winning), by linear interpolation between the two levels around it, with a
  CI from bootstrap resamples of every level's runs.
- best_of: per phone and cell, the level of a factor with the lowest median (the best thread
  granularity g per layer and phone, Motamedi et al.'s device-specific tuning).

Runs are the replicates (one value per run); phones are never pooled here.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from farm.analysis.compare import DEFAULT_LEVEL, bootstrap_ratio_ci
from farm.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, ConfidenceInterval, bootstrap_median_ci

DEVICE = "device"
Cell = tuple[tuple[str, Hashable], ...]  # (factor, level) pairs, in the caller's factor order


@dataclass(frozen=True)
class Ratio:
    """`level` of `factor` against the reference level on one phone and cell: the ratio of
    medians (`speedup`: reference / level, else level / reference) with its bootstrap CI."""

    device: str
    cell: Cell
    factor: str
    level: Hashable
    reference: Hashable
    value: float
    ci: ConfidenceInterval
    n_level: int
    n_reference: int


@dataclass(frozen=True)
class Share:
    device: str
    cell: Cell
    value: float  # median over runs of part / whole
    ci: ConfidenceInterval
    runs: int


@dataclass(frozen=True)
class Crossover:
    """Where a ratio crosses 1 along an ordered factor, or None in `at` when it never does; the CI
    comes from the resamples that cross (`crossing_fraction` of them)."""

    at: float | None
    ci: ConfidenceInterval | None
    crossing_fraction: float
    falling: bool  # the ratio goes from above 1 to below 1 as the factor grows


@dataclass(frozen=True)
class Best:
    device: str
    cell: Cell
    factor: str
    level: Hashable
    median: float
    runner_up: Hashable | None  # the next best level, None when only one was measured
    runner_up_median: float | None


def _samples(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    return frame[frame["metric"] == metric]


def _cell(keys: Sequence[str], values: Sequence[Hashable]) -> Cell:
    return tuple(zip(keys, values, strict=True))


def _key(values: object) -> tuple[Hashable, ...]:
    return values if isinstance(values, tuple) else (values,)


def relative_to(
    frame: pd.DataFrame,
    metric: str,
    reference: tuple[str, Hashable],
    factors: Sequence[str],
    *,
    speedup: bool = False,
    level: float = DEFAULT_LEVEL,
) -> list[Ratio]:
    """Every level of reference[0] against reference[1], per phone and cell of the other
    `factors`, from the rows of `metric` in a tidy frame (one value per run)."""
    factor, ref_level = reference
    rows = _samples(frame, metric)
    others = [name for name in factors if name != factor]
    result = []
    for group, part in rows.groupby([DEVICE, *others], sort=True, dropna=False):
        keys = _key(group)
        ref = part.loc[part[factor] == ref_level, "value"].to_numpy(dtype=np.float64)
        if ref.size == 0:
            continue
        for lvl, values in part.groupby(factor, sort=True):
            if lvl == ref_level:
                continue
            other = values["value"].to_numpy(dtype=np.float64)
            a, b = (other, ref) if speedup else (ref, other)
            ci = bootstrap_ratio_ci(a, b, level=level)
            result.append(
                Ratio(
                    device=str(keys[0]),
                    cell=_cell(others, keys[1:]),
                    factor=factor,
                    level=lvl,
                    reference=ref_level,
                    value=float(np.median(b) / np.median(a)),
                    ci=ci,
                    n_level=int(other.size),
                    n_reference=int(ref.size),
                )
            )
    return result


def share_of(
    frame: pd.DataFrame,
    part: str | Sequence[str],
    whole: str | Sequence[str],
    factors: Sequence[str],
    *,
    level: float = DEFAULT_LEVEL,
) -> list[Share]:
    """Per phone and cell, the median over runs of part / whole (each run's own ratio); a list of
    metrics is their sum (host-to-device + device-to-host over those and the kernel time)."""
    parts = [part] if isinstance(part, str) else list(part)
    wholes = [whole] if isinstance(whole, str) else list(whole)
    names = list(dict.fromkeys([*parts, *wholes]))
    rows = frame[frame["metric"].isin(names)]
    if rows.empty:
        return []
    wide = rows.pivot_table(index=["run_id", DEVICE, *factors], columns="metric", values="value")
    if any(name not in wide.columns for name in names):
        return []
    wide = wide.dropna(subset=names)
    wide = wide.assign(_part=wide[parts].sum(axis=1), _whole=wide[wholes].sum(axis=1))
    wide = wide[wide["_whole"] != 0].reset_index()
    result = []
    for group, runs in wide.groupby([DEVICE, *factors], sort=True):
        keys = _key(group)
        shares = (runs["_part"] / runs["_whole"]).to_numpy(dtype=np.float64)
        result.append(
            Share(
                device=str(keys[0]),
                cell=_cell(factors, keys[1:]),
                value=float(np.median(shares)),
                ci=bootstrap_median_ci(shares, level=level),
                runs=int(shares.size),
            )
        )
    return result


def _crossing(x: NDArray[np.float64], ratios: NDArray[np.float64]) -> tuple[float | None, bool]:
    """The first x where the piecewise-linear ratio curve crosses 1, and whether it falls there."""
    for i in range(len(x) - 1):
        r0, r1 = ratios[i] - 1.0, ratios[i + 1] - 1.0
        if r0 == 0.0:
            return float(x[i]), r1 < 0
        if r0 * r1 < 0:
            return float(x[i] + (x[i + 1] - x[i]) * r0 / (r0 - r1)), r1 < 0
    if ratios[-1] == 1.0:
        return float(x[-1]), ratios[0] > 1.0
    return None, False


def crossover(
    x: Sequence[float],
    numerators: Sequence[ArrayLike],
    denominators: Sequence[ArrayLike],
    *,
    level: float = DEFAULT_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Crossover:
    """Where median(numerators[i]) / median(denominators[i]) crosses 1 as x grows (x ascending;
    runs per level as samples). For a GPU speedup over CPU: numerators are CPU latencies,
    denominators GPU latencies."""
    xs = np.asarray(x, dtype=np.float64)
    if xs.size < 2 or np.any(np.diff(xs) <= 0):
        raise ValueError("crossover needs at least two levels in ascending order")
    nums = [np.asarray(v, dtype=np.float64).ravel() for v in numerators]
    dens = [np.asarray(v, dtype=np.float64).ravel() for v in denominators]
    if len(nums) != xs.size or len(dens) != xs.size or any(v.size == 0 for v in (*nums, *dens)):
        raise ValueError("crossover needs samples on both sides at every level")
    ratios = np.array([np.median(n) / np.median(d) for n, d in zip(nums, dens, strict=True)])
    at, falling = _crossing(xs, ratios)
    rng = np.random.default_rng(seed)
    boot = np.empty((resamples, xs.size))
    for i, (n, d) in enumerate(zip(nums, dens, strict=True)):
        med_n = np.median(n[rng.integers(0, n.size, size=(resamples, n.size))], axis=1)
        med_d = np.median(d[rng.integers(0, d.size, size=(resamples, d.size))], axis=1)
        boot[:, i] = med_n / med_d
    crossings = [c for c in (_crossing(xs, row)[0] for row in boot) if c is not None]
    ci = None
    if crossings:
        tail = (1.0 - level) / 2.0 * 100.0
        low, high = np.percentile(crossings, [tail, 100.0 - tail])
        ci = ConfidenceInterval(float(low), float(high), level)
    return Crossover(at, ci, len(crossings) / resamples, falling)


@dataclass(frozen=True)
class CrossoverOf:
    """Where one compared level's ratio to the reference crosses 1 along a factor, on one phone
    and cell of the other factors (the GPU's speedup over CPU against background load)."""

    device: str
    cell: Cell
    factor: str
    level: Hashable
    reference: Hashable
    along: str
    found: Crossover
    first_ratio: float  # the ratio at the lowest level measured: which side of 1 it starts on
    levels: tuple[Hashable, ...]  # the levels of `along` both sides were measured at
    runs: int = 0  # the fewest runs at any of those levels on either side (1: the CI is no interval)


def crossovers(
    frame: pd.DataFrame,
    metric: str,
    reference: tuple[str, Hashable],
    along: str,
    factors: Sequence[str],
    *,
    speedup: bool = False,
    level: float = DEFAULT_LEVEL,
) -> list[CrossoverOf]:
    """Per phone, cell of `factors` (neither reference[0] nor `along`) and level of reference[0],
    where the ratio of medians of `metric` to the reference level (`speedup`: reference / level)
    crosses 1 along the numeric factor `along`, from a tidy frame's rows (one value per run).
    Levels of `along` measured on one side only are left out; fewer than two left: no entry."""
    factor, ref_level = reference
    rows = _samples(frame, metric)
    others = [name for name in factors if name not in (factor, along)]
    result = []
    for group, part in rows.groupby([DEVICE, *others], sort=True, dropna=False):
        keys = _key(group)
        ref = part[part[factor] == ref_level]
        for lvl, mine in part[part[factor] != ref_level].groupby(factor, sort=True):
            xs = sorted(set(ref[along]) & set(mine[along]))
            if len(xs) < 2:
                continue
            at_ref = [ref.loc[ref[along] == x, "value"].to_numpy(dtype=np.float64) for x in xs]
            at_lvl = [mine.loc[mine[along] == x, "value"].to_numpy(dtype=np.float64) for x in xs]
            nums, dens = (at_ref, at_lvl) if speedup else (at_lvl, at_ref)
            result.append(
                CrossoverOf(
                    device=str(keys[0]),
                    cell=_cell(others, keys[1:]),
                    factor=factor,
                    level=lvl,
                    reference=ref_level,
                    along=along,
                    found=crossover([float(x) for x in xs], nums, dens, level=level),
                    first_ratio=float(np.median(nums[0]) / np.median(dens[0])),
                    levels=tuple(xs),
                    runs=min(v.size for v in (*nums, *dens)),
                )
            )
    return result


def best_of(frame: pd.DataFrame, metric: str, factor: str, factors: Sequence[str]) -> list[Best]:
    """Per phone and cell of the other `factors`, the level of `factor` with the lowest median."""
    rows = _samples(frame, metric)
    others = [name for name in factors if name != factor]
    result = []
    for group, part in rows.groupby([DEVICE, *others], sort=True, dropna=False):
        keys = _key(group)
        medians = part.groupby(factor, sort=True)["value"].median().sort_values(kind="stable")
        levels = list(medians.index)
        result.append(
            Best(
                device=str(keys[0]),
                cell=_cell(others, keys[1:]),
                factor=factor,
                level=levels[0],
                median=float(medians.iloc[0]),
                runner_up=levels[1] if len(levels) > 1 else None,
                runner_up_median=float(medians.iloc[1]) if len(levels) > 1 else None,
            )
        )
    return result


def cell_text(cell: Cell, skip: Mapping[str, object] | None = None) -> str:
    """`hidden=128, gpu_load=0.5`: a cell for sentences and table rows."""
    return ", ".join(f"{name}={value}" for name, value in cell if not skip or name not in skip)
