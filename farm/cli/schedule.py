"""`farm schedule list|run|daemon`: nightly re-runs of experiments, from the schedules: section of
farm.yaml (farm.schedule.config)."""

from __future__ import annotations

import sys
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from farm.analysis.regression import RegressionPolicy, describe
from farm.cli.json_output import echo_json
from farm.cli.options import results_option, store_location
from farm.cli.signals import cancel_on_signals
from farm.engine.model import RunResult
from farm.live.from_engine import progress_line
from farm.safe_text import terminal
from farm.schedule.config import find_schedule, load_schedules
from farm.schedule.cron import next_slot
from farm.schedule.daemon import SystemClock, run_daemon
from farm.schedule.fire import FireContext, FireResult, fire
from farm.schedule.model import Schedule
from farm.store import RunState, Store
from farm.store import firings as firing_store
from farm.store.firings import FiringOutcome, Trigger
from farm.store.runs import StoredRun

_COMMON = [
    click.option(
        "--config",
        type=click.Path(path_type=Path),
        default=None,
        help="farm config with schedules: (default ./farm.yaml, then ~/.config/farm/farm.yaml).",
    ),
    results_option,
]
_RUNNING = [
    click.option(
        "--adb-port",
        type=int,
        default=None,
        help="adb server port (default $ANDROID_ADB_SERVER_PORT or 5037).",
    ),
    click.option(
        "--threshold-pct",
        type=click.FloatRange(min=0),
        default=RegressionPolicy().threshold_pct,
        show_default=True,
        help="Smallest change (percent of the history's median) flagged as a regression.",
    ),
]


def _options(options: list[Any]) -> Any:
    def wrap(function: Any) -> Any:
        for option in reversed(options):
            function = option(function)
        return function

    return wrap


@click.group("schedule")
def schedule() -> None:
    """Nightly sweeps: re-run chosen experiments on a cron schedule and flag regressions.

    \b
    In farm.yaml:
      schedules:
        - name: lstm-nightly
          experiment: experiments/lstm_gpu_load.yaml
          variant: quick
          cron: "0 2 * * *"          # 02:00 every day (timezone: UTC unless set)
          catch_up: run_once         # after downtime: one run for the missed nights (or skip)
          max_runtime_s: 7200
    \b
    Example:
      farm schedule list                 # next fire time and last outcome of each
      farm schedule run lstm-nightly     # run it now, as the daemon would
      farm schedule daemon               # run every schedule at its time (SIGTERM stops it)
      farm regress lstm_gpu_load.quick   # did the latest night get slower?

    \b
    Each night is stored as its own experiment, a separate point in the
    history `farm regress` compares:  <name>--<YYYYMMDD-HHMMSS>[.variant]
    """


def _context(
    results: str | None, adb_port: int | None, config: Path | None, threshold_pct: float
) -> FireContext:
    return FireContext(
        results=store_location(results, config),
        adb_port=adb_port,
        config=config,
        policy=RegressionPolicy(threshold_pct=threshold_pct),
    )


def _describe_schedule(schedule: Schedule, store: Store | None, now: datetime) -> dict[str, Any]:
    last = firing_store.last_firing(store, schedule.name, ran_only=True) if store is not None else None
    return {
        "name": schedule.name,
        "experiment": str(schedule.experiment),
        "variant": schedule.variant,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "devices": list(schedule.devices),
        "catch_up": schedule.catch_up.value,
        "max_runtime_s": schedule.max_runtime_s,
        "next_fire": next_slot(schedule, now).isoformat(),
        "last": None
        if last is None
        else {
            "slot": last.slot_at.isoformat(),
            "trigger": last.trigger.value,
            "experiment": last.experiment,
            "outcome": last.outcome.value,
            "done": last.done,
            "failed": last.failed,
            "pending": last.pending,
            "regressions": last.regressions,
            "started_at": datetime.fromtimestamp(last.started_at, UTC).isoformat(),
            "message": last.message,
        },
    }


@schedule.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_options(_COMMON)
def list_(as_json: bool, config: Path | None, results: str | None) -> None:
    """Each schedule with its next fire time and its last execution's outcome.

    \b
    Example:
      farm schedule list --json | jq '.[].next_fire'
    """
    schedules = load_schedules(config)
    now = datetime.now(UTC)
    location = store_location(results, config)
    if location.url is not None or location.sqlite_path.exists():
        with Store(location, read_only=True) as store:
            rows = [_describe_schedule(s, store, now) for s in schedules]
    else:
        rows = [_describe_schedule(s, None, now) for s in schedules]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("farm: no schedules (add a schedules: section to farm.yaml; see `farm schedule --help`)")
        return
    for row in rows:
        variant = f" --variant {row['variant']}" if row["variant"] else ""
        click.echo(f"{row['name']}: {row['experiment']}{variant}  cron '{row['cron']}' ({row['timezone']})")
        click.echo(f"  next     {row['next_fire']}")
        last = row["last"]
        if last is None:
            click.echo("  last     never ran")
        elif last["outcome"] == FiringOutcome.ERROR.value:
            click.echo(terminal(f"  last     {last['started_at']} error: {last['message']}"))
        else:
            counts = f"{last['done'] or 0} done, {last['failed'] or 0} failed, {last['pending'] or 0} not run"
            click.echo(
                f"  last     {last['started_at']} {last['outcome']} ({counts}; "
                f"{last['regressions'] or 0} regression(s)) as {last['experiment'] or '-'}"
            )


def _print_result(result: FireResult, schedule: Schedule) -> None:
    if result.outcome is FiringOutcome.ERROR:
        click.echo(
            terminal(f"farm: {schedule.location}: schedule {schedule.name} not run: {result.message}"),
            err=True,
        )
        return
    for finding in result.regressions:
        click.echo(f"farm: REGRESSION {describe(finding)}")
    summary = result.summary
    counts = f": {summary.done} done, {summary.failed} failed, {summary.pending} not run" if summary else ""
    message = f" ({result.message})" if result.message else ""
    click.echo(
        f"farm: schedule {result.schedule}: {result.outcome}{counts}; stored as {result.experiment or '-'}; "
        f"{len(result.regressions)} regression(s){message}"
    )


@schedule.command("run")
@click.argument("name")
@_options(_COMMON + _RUNNING)
def run_now(
    name: str, config: Path | None, results: str | None, adb_port: int | None, threshold_pct: float
) -> None:
    """Run schedule NAME now, as the daemon would: a new nightly of its experiment, recorded, with
    regressions flagged against the nightlies before it.

    \b
    Example:
      farm schedule run lstm-nightly

    Exit codes as `farm run`: 0 all runs done, 1 some failed, 2 bad input, 3 no eligible phone.
    """
    chosen = find_schedule(load_schedules(config), name)
    finished = {"n": 0}

    def on_finished(device_id: str, stored: StoredRun, result: RunResult, state: RunState) -> None:
        finished["n"] += 1
        cell = " ".join(f"{k}={v}" for k, v in sorted(stored.factors.items()))
        click.echo(progress_line(finished["n"], device_id, stored.run_id, cell, str(state)))

    context = replace(
        _context(results, adb_port, config, threshold_pct),
        on_finished=on_finished,
        log=lambda line: click.echo(terminal(f"farm: {line}"), err=True),
    )
    slot = datetime.now(UTC).replace(microsecond=0)
    with cancel_on_signals(context.stop):
        result = fire(chosen, slot, Trigger.MANUAL, context)
    _print_result(result, chosen)
    sys.exit(result.exit_code)


@schedule.command("daemon")
@click.option("--once", is_flag=True, help="Run what is due now (on time or catch-up), then exit.")
@_options(_COMMON + _RUNNING)
def daemon(
    once: bool, config: Path | None, results: str | None, adb_port: int | None, threshold_pct: float
) -> None:
    """Run every schedule at its cron time until stopped (SIGTERM or Ctrl-C stop it cleanly: a
    nightly in progress is interrupted like `farm run`, its phones restored).

    \b
    Example:
      farm schedule daemon                     # in a tmux/systemd service
      farm schedule daemon --once              # from a system timer, just after the slot

    farm.yaml is re-read every minute; an ad-hoc `farm run` can go on beside it (phones are
    leased, so the two never share one).
    """
    load_schedules(config)  # a broken config is an error now, not a log line later
    stop = threading.Event()

    def log(line: str) -> None:
        click.echo(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} {line}")

    context = replace(_context(results, adb_port, config, threshold_pct), log=log, stop=stop)
    # SIGTERM and Ctrl-C set `stop`: the daemon ends after the nightly in progress is interrupted
    # (its phones restored); max_runtime_s cancels only that nightly (farm.schedule.fire.Deadline).
    with cancel_on_signals(stop):
        fired = run_daemon(
            lambda: load_schedules(config),
            lambda s, slot, trigger: fire(s, slot, trigger, context),
            context.results,
            stop=stop,
            clock=SystemClock(stop),
            once=once,
            log=log,
        )
    log("stopped" if stop.is_set() or not once else f"done: {len(fired)} schedule(s) fired")
    if once and any(r.exit_code != 0 for r in fired):
        sys.exit(1)
