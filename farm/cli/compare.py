"""`farm compare`: is B faster than A, per phone and cell, and how sure (farm.analysis.ab)."""

from __future__ import annotations

import click

from farm.analysis.ab import (
    CellResult,
    compare_pairs,
    level_text,
    pair_experiments,
    pair_levels,
    phones_left_out,
)
from farm.analysis.compare import DEFAULT_ALPHA, min_p_value
from farm.cli.json_output import echo_json
from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.report.query import load_report_data
from farm.safe_text import terminal
from farm.store.db import Store
from farm.store.results import StoredResult

_ROW = "{:<26} {:<24} {:>7} {:>10} {:>10} {:>22} {:>8} {:>8}  {}"


def parse_by(value: str) -> tuple[str, str, str]:
    """`FACTOR=A,B` -> (factor, level A, level B); ConfigError naming the option otherwise."""
    factor, sep, levels = value.partition("=")
    parts = [p.strip() for p in levels.split(",")]
    if not sep or not factor.strip() or len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ConfigError(f"--by {value!r}: expected FACTOR=LEVEL_A,LEVEL_B, e.g. --by backend=cpu,gpu")
    return factor.strip(), parts[0], parts[1]


def _levels_seen(runs: list[StoredResult], factor: str) -> list[str]:
    return sorted({level_text(r.factors[factor]) for r in runs if factor in r.factors})


@click.command("compare")
@click.argument("experiment_a")
@click.argument("experiment_b", required=False)
@click.option(
    "--by", "by", default=None, metavar="FACTOR=A,B", help="Compare two levels of one factor of EXPERIMENT_A."
)
@click.option("--metric", default="latency_median_ms", show_default=True, help="The per-run metric compared.")
@click.option(
    "--alpha",
    type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
    default=DEFAULT_ALPHA,
    show_default=True,
    help="Significance level after Holm's correction across cells.",
)
@click.option("--include-invalid", is_flag=True, help="Also use runs whose validity flags failed.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (every cell).")
@results_option
def compare(
    experiment_a: str,
    experiment_b: str | None,
    by: str | None,
    metric: str,
    alpha: float,
    include_invalid: bool,
    as_json: bool,
    results: str | None,
) -> None:
    """Compare B with A per phone and cell: two experiments (EXPERIMENT_A EXPERIMENT_B), or two
    levels of one factor of one experiment (EXPERIMENT_A --by FACTOR=A,B).

    \b
    For each phone and cell: the ratio of the medians B/A of the per-run metric with a bootstrap
    95% CI, the Mann-Whitney U p-value, Holm-corrected across all cells, and a verdict: faster,
    slower, or "no detectable difference" (the CI spans 1 or the corrected p is not below
    --alpha). Runs are the replicates: 5 runs a side are needed to reach p < 0.01.

    \b
    Examples:
      farm compare pinned_max pinned_min
      farm compare lstm_gpu_load --by backend=cpu,gpu --json
    """
    if (experiment_b is None) == (by is None):
        raise ConfigError("name two experiments, or one experiment and --by FACTOR=A,B (not both)")
    location = store_location(results)
    with Store(location, read_only=True) as store:
        runs_a = list(load_report_data(store, experiment_a).runs)
        runs_b = list(load_report_data(store, experiment_b).runs) if experiment_b else []
    if by is not None:
        factor, level_a, level_b = parse_by(by)
        seen = _levels_seen(runs_a, factor)
        if not seen:
            known = sorted({name for r in runs_a for name in r.factors})
            raise ConfigError(
                f"{experiment_a} has no factor {factor!r}", hint=f"its factors: {', '.join(known) or 'none'}"
            )
        missing = [level for level in (level_a, level_b) if level not in seen]
        if missing:
            raise ConfigError(
                f"{experiment_a}: {factor} has no level {missing[0]!r}", hint=f"its levels: {', '.join(seen)}"
            )
        pairs, invalid = pair_levels(
            runs_a, factor, level_a, level_b, metric, include_invalid=include_invalid
        )
        side_a, side_b = f"{experiment_a} {factor}={level_a}", f"{experiment_a} {factor}={level_b}"
    else:
        assert experiment_b is not None
        pairs, invalid = pair_experiments(runs_a, runs_b, metric, include_invalid=include_invalid)
        side_a, side_b = experiment_a, experiment_b
    if not pairs:
        raise ConfigError(
            f"nothing to compare: no phone has DONE{'' if include_invalid else ' valid'} runs with {metric} "
            f"on both sides ({side_a} vs {side_b})",
            hint="check the metric name and that both sides ran on the same phones"
            + (
                ""
                if include_invalid or not invalid
                else f"; {invalid} invalid run(s) left out (--include-invalid)"
            ),
        )
    # a phone whose runs failed stays in the output, with why
    cells = compare_pairs(pairs, alpha=alpha) + phones_left_out([*runs_a, *runs_b], pairs)
    if as_json:
        echo_json(
            {
                "a": side_a,
                "b": side_b,
                "metric": metric,
                "alpha": alpha,
                "include_invalid": include_invalid,
                "invalid_left_out": invalid,
                "cells": [_as_dict(c) for c in cells],
            }
        )
        return
    _print(side_a, side_b, metric, cells, invalid, include_invalid)


def _as_dict(cell: CellResult) -> dict[str, object]:
    c = cell.comparison
    base: dict[str, object] = {"device": cell.device_id, "cell": dict(cell.cell), "note": cell.note}
    if c is None:
        return {**base, "verdict": None}
    return {
        **base,
        "n_a": c.n_a,
        "n_b": c.n_b,
        "median_a": c.median_a,
        "median_b": c.median_b,
        "ratio": c.ratio,
        "ratio_ci": [c.ratio_ci.low, c.ratio_ci.high],
        "ci_level": c.ratio_ci.level,
        "p_value": c.p_value,
        "p_holm": c.p_adjusted,
        "min_p_value": min_p_value(c.n_a, c.n_b),
        "verdict": c.verdict.value,
    }


def _print(
    side_a: str, side_b: str, metric: str, cells: list[CellResult], invalid: int, included: bool
) -> None:
    click.echo(terminal(f"A = {side_a}   B = {side_b}   metric {metric} (per phone, never pooled)"))
    click.echo(
        _ROW.format(
            "phone", "cell", "n A/B", "median A", "median B", "ratio B/A [95% CI]", "p", "p Holm", "verdict"
        )
    )
    for cell in cells:
        label = " ".join(f"{k}={v}" for k, v in cell.cell) or "-"
        c = cell.comparison
        if c is None:
            click.echo(terminal(_ROW.format(cell.device_id, label, "", "", "", "", "", "", cell.note or "")))
            continue
        ratio = f"{c.ratio:.3f} [{c.ratio_ci.low:.3f}, {c.ratio_ci.high:.3f}]"
        click.echo(
            terminal(
                _ROW.format(
                    cell.device_id,
                    label,
                    f"{c.n_a}/{c.n_b}",
                    f"{c.median_a:.4g}",
                    f"{c.median_b:.4g}",
                    ratio,
                    f"{c.p_value:.3g}",
                    f"{c.p_adjusted:.3g}",
                    c.verdict.value + (f" ({cell.note})" if cell.note else ""),
                )
            )
        )
    if invalid and not included:
        click.echo(f"{invalid} invalid run(s) left out (--include-invalid to use them)")
