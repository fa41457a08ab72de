"""`farm run FILE`: plan an experiment, run it on every eligible phone in parallel, store it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from farm.cli.json_output import echo_json
from farm.cli.options import results_option, store_location
from farm.cli.signals import cancel_on_signals
from farm.engine.model import RunResult
from farm.engine.runner import RunOptions, RunSummary, run_experiment
from farm.engine.scheduler import Sweep
from farm.live.from_engine import progress_line, snapshot_of
from farm.safe_text import terminal
from farm.store import Outcome, RunState, results_dir
from farm.store.runs import StoredRun

if TYPE_CHECKING:
    from farm.live.view import LiveView


@click.command("run")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--variant", help="Use a named variant of the file (its variants: section).")
@click.option(
    "--devices",
    "selectors",
    multiple=True,
    metavar="SEL",
    help="Only these phones: host/serial, serial, adb serial or model; globs allowed. "
    "Repeat it or separate with commas.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan (runs per phone, estimated time) and stop.")
@click.option(
    "--resume/--fresh",
    default=True,
    help="Continue the stored runs of this experiment (default) or forget them and start over.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Also retry runs that FAILED (benchmark error, timeouts used up) with a fresh attempt budget; "
    "a resume always retries runs FAILED because their phone was lost.",
)
@click.option("--no-live", is_flag=True, help="Plain progress lines instead of the live view.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary at the end.")
@results_option
@click.option(
    "--adb-port", type=int, default=None, help="adb server port (default $ANDROID_ADB_SERVER_PORT or 5037)."
)
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="farm config with lab hosts (default ./farm.yaml, then ~/.config/farm/farm.yaml).",
)
def run(
    file: Path,
    variant: str | None,
    selectors: tuple[str, ...],
    dry_run: bool,
    resume: bool,
    retry_failed: bool,
    no_live: bool,
    as_json: bool,
    results: str | None,
    adb_port: int | None,
    config: Path | None,
) -> None:
    """Run an experiment on every eligible phone, in parallel, and store the results.

    \b
    Example:
      farm run experiments/smoke.yaml --dry-run      # what would run where
      farm run experiments/smoke.yaml                # run (or resume) it
      farm run experiments/lstm_gpu_load.yaml --variant quick --devices 'local/*'

    Running the same file again resumes: DONE runs are kept, the rest is run (runs FAILED because
    their phone went away too; --retry-failed retries every FAILED run). Exit codes: 0 all
    runs done, 1 some failed or could not run, 2 bad input, 3 no eligible phone.
    """
    live = not no_live and not as_json and sys.stdout.isatty()
    options = RunOptions(
        file=file,
        variant=variant,
        selectors=tuple(part.strip() for value in selectors for part in value.split(",") if part.strip()),
        dry_run=dry_run,
        fresh=not resume,
        retry_failed=retry_failed,
        results=store_location(results, config),
        adb_port=adb_port,
        config=config,
        live_telemetry=live,
    )
    started = time.time()
    finished = {"n": 0}
    view: dict[str, LiveView] = {}

    def on_started(sweep: Sweep) -> None:
        if live:
            view["live"] = _start_live_view(sweep, started)
        elif not as_json:
            click.echo(
                terminal(
                    f"farm: running {sweep.key} on {len(sweep.phones)} phone(s): "
                    + ", ".join(p.device_id for p in sweep.phones)
                )
            )

    def on_finished(device_id: str, stored: StoredRun, result: RunResult, state: RunState) -> None:
        finished["n"] += 1
        if not live and not as_json:
            cell = " ".join(f"{k}={v}" for k, v in sorted(stored.factors.items()))
            if state is RunState.PENDING and result.outcome is Outcome.INTERRUPTED:
                # Ctrl-C: the run goes back to the queue, not retried now; the end line says how to resume
                outcome = "interrupted, back in the queue"
            else:
                outcome = str(state) if state is not RunState.PENDING else f"{result.outcome}, retrying"
                if result.error and state is not RunState.DONE:
                    outcome += f" ({result.error})"
            click.echo(progress_line(finished["n"], device_id, stored.run_id, cell, outcome))

    def tick(sweep: Sweep) -> None:
        if "live" in view:
            view["live"].update(snapshot_of(sweep, started_at=started))

    try:
        with cancel_on_signals() as cancel:
            summary = run_experiment(
                options, cancel=cancel, on_started=on_started, on_finished=on_finished, tick=tick
            )
    finally:
        if "live" in view:
            view["live"].stop()
    if summary.plan_text is not None:
        if as_json:
            echo_json({**summary_json(summary), "plan": summary.plan_text})
        else:
            click.echo(summary.plan_text)
        return
    if as_json:
        echo_json(summary_json(summary))
    else:
        for problem in summary.problems:
            click.echo(terminal(f"farm: {problem}"), err=True)
        if summary.pending:
            click.echo(
                f"farm: {summary.pending} run(s) could not run now (their phone is not connected or "
                "was lost); run the same command again to continue them",
                err=True,
            )
        click.echo(
            f"farm: {summary.experiment}: {summary.done} done, {summary.failed} failed, "
            f"{summary.pending} not run, of {summary.planned} planned ({summary.elapsed_s:.1f} s); "
            f"run folders in {results_dir(options.results)}/{summary.experiment}/"
        )
    sys.exit(summary.exit_code)


def summary_json(summary: RunSummary) -> dict[str, object]:
    """`farm run --json`'s document."""
    return {
        "experiment": summary.experiment,
        "planned": summary.planned,
        "done": summary.done,
        "failed": summary.failed,
        "pending": summary.pending,
        "phones": list(summary.phones),
        "elapsed_s": round(summary.elapsed_s, 3),
        "exit_code": summary.exit_code,
        "problems": list(summary.problems),
    }


def _start_live_view(sweep: Sweep, started: float) -> LiveView:
    from farm.live.view import start_live  # rich's layout code: imported only when the view is on

    return start_live(snapshot_of(sweep, started_at=started))
