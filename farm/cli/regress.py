"""`farm regress EXPERIMENT`: did the latest nightly of EXPERIMENT get worse than the ones before?"""

from __future__ import annotations

import sys

import click

from farm.analysis.regression import (
    DEFAULT_METRICS,
    DEFAULT_NOISE_K,
    DEFAULT_THRESHOLD_PCT,
    DEFAULT_WINDOW,
    MIN_HISTORY_POINTS,
    Finding,
    RegressionPolicy,
    Verdict,
    detect,
)
from farm.cli.json_output import echo_json
from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.safe_text import terminal
from farm.schedule.history import comparable_nightlies, load_points, record_regressions
from farm.store import Store

_ROW = "  {:<12} {:<22} {:<26} {:>11} {:>11} {:>8}  {}"


@click.command("regress")
@click.argument("experiment")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (every judged cell).")
@click.option(
    "--threshold-pct",
    type=click.FloatRange(min=0),
    default=DEFAULT_THRESHOLD_PCT,
    show_default=True,
    help="Smallest change, in percent of the history's median, that counts.",
)
@click.option(
    "--noise-k",
    type=click.FloatRange(min=0),
    default=DEFAULT_NOISE_K,
    show_default=True,
    help="A change must also exceed this many robust standard deviations (MAD) of the history.",
)
@click.option(
    "--window",
    type=click.IntRange(min=MIN_HISTORY_POINTS),
    default=DEFAULT_WINDOW,
    show_default=True,
    help="How many earlier nightlies form the history.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help=f"Metric to check (repeatable; default {', '.join(DEFAULT_METRICS)}).",
)
@click.option("--all", "show_all", is_flag=True, help="List every judged cell, not only regressions.")
@results_option
def regress(
    experiment: str,
    as_json: bool,
    threshold_pct: float,
    noise_k: float,
    window: int,
    metrics: tuple[str, ...],
    show_all: bool,
    results: str | None,
) -> None:
    """Compare the newest nightly of EXPERIMENT (its name, or name.variant) with the previous
    nightlies, per cell, phone and metric, and list the cells that got worse.

    \b
    Example:
      farm regress smoke                       # after `farm schedule run` nights
      farm regress lstm_gpu_load.quick --threshold-pct 10 --json

    A cell is flagged when its change from the history's median exceeds both --threshold-pct and
    --noise-k robust standard deviations of the history, in the bad direction (latency or energy
    up). At least 5 earlier nightlies are needed. Exit codes: 0 none, 1 regressions, 2 bad input.
    """
    location = store_location(results)
    policy = RegressionPolicy(
        metrics=metrics or DEFAULT_METRICS, threshold_pct=threshold_pct, noise_k=noise_k, window=window
    )
    with Store(location, read_only=True) as store:
        nights, changed = comparable_nightlies(store, experiment)
        if not nights:
            raise ConfigError(
                f"no nightlies of {experiment!r} in {store.label}",
                hint="name the experiment as in its file (name or name.variant); see `farm schedule list`",
            )
        findings = detect(load_points(store, experiment, policy.metrics, nights), policy)
        flagged = [f for f in findings if f.verdict is Verdict.REGRESSION]
        newest = nights[-1][0]
    if flagged:
        # Kept on the newest nightly, where `farm report NEWEST` lists them with the schedule's own;
        # the store is known to exist by now, so opening it for writing creates nothing.
        with Store(location) as store:
            record_regressions(store, newest, flagged)
    if as_json:
        document = {
            "experiment": experiment,
            "nightlies": [name for name, _ in nights],
            "left_out_changed_settings": changed,
            "policy": {
                "metrics": list(policy.metrics),
                "threshold_pct": policy.threshold_pct,
                "noise_k": policy.noise_k,
                "window": policy.window,
                "min_history": policy.min_history,
            },
            "regressions": [f.to_json() for f in flagged],
            "recorded_on": newest,
            "findings": [f.to_json() for f in findings],
        }
        echo_json(document)
    else:
        _print(experiment, [name for name, _ in nights], findings, flagged, show_all)
        if changed:
            click.echo(
                f"  {len(changed)} earlier nightlies left out: measured with other settings (file edited)"
            )
        if flagged:
            click.echo(f"  recorded on {newest}: `farm report {newest}` lists them")
    sys.exit(1 if flagged else 0)


def _print(
    experiment: str, nights: list[str], findings: list[Finding], flagged: list[Finding], show_all: bool
) -> None:
    newest = nights[-1]
    short = sum(1 for f in findings if f.verdict is Verdict.INSUFFICIENT_HISTORY)
    click.echo(f"{experiment}: {len(nights)} nightlies; newest {newest}")
    shown = findings if show_all else flagged
    if shown:
        header = ("verdict", "phone", "metric", "old median", "new", "change")
        click.echo(_ROW.format(*header, "cell"))
    for f in shown:
        cell = " ".join(f"{k}={v}" for k, v in sorted(f.factors.items())) or f.cell_id
        old = f"{f.baseline:.4g}" if f.baseline is not None else "-"
        change = f"{f.change_pct:+.1f}%" if f.change_pct is not None else "-"
        click.echo(
            terminal(
                _ROW.format(f.verdict.value, f.device, f.metric, old, f"{f.new_value:.4g}", change, cell)
            )
        )
    if short:
        click.echo(f"  {short} cell metric(s) not judged: fewer than {MIN_HISTORY_POINTS} earlier nightlies")
    click.echo(f"{len(flagged)} regression(s) of {len(findings)} cell metric(s) checked")
