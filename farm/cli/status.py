"""`farm status [EXPERIMENT]`: what the store says, from any terminal, also while a sweep runs:
runs per state and phone, failures, events, and which coordinator (host, pid, execution) holds
which phone now."""

from __future__ import annotations

import time
from typing import Any

import click

from farm.cli.json_output import echo_json
from farm.cli.options import results_option, store_location
from farm.errors import ConfigError
from farm.safe_text import terminal
from farm.store import RunState, Store, ownership, views
from farm.store import events as store_events
from farm.store import runs as run_store


def experiment_status(store: Store, name: str, events: int) -> dict[str, Any]:
    counts = run_store.count_states(store, name)
    per_phone: dict[str, dict[str, int]] = {}
    for run in run_store.list_runs(store, name):
        phone = run.ran_on or run.device_id or "*"
        per_phone.setdefault(phone, {s.value: 0 for s in RunState})[run.state.value] += 1
    failed = [
        {"run_id": r.run_id, "phone": r.ran_on, "reason": r.reason, "attempts": r.attempts}
        for r in run_store.list_runs(store, name, [RunState.FAILED])
    ]
    return {
        "experiment": name,
        "total": sum(counts.values()),
        "states": {state.value: n for state, n in counts.items()},
        "phones": per_phone,
        "failed": failed,
        "events": [
            {"ts": e.ts, "kind": e.kind, "message": e.message, "phone": e.device_id, "run_id": e.run_id}
            for e in store_events.recent(store, name, events)
        ],
    }


@click.command("status")
@click.argument("experiment", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--watch", is_flag=True, help="Keep showing the live view until every run has finished.")
@click.option("--events", default=10, show_default=True, help="How many recent events to show.")
@results_option
def status(experiment: str | None, as_json: bool, watch: bool, events: int, results: str | None) -> None:
    """Progress of experiments in the store: runs per state and per phone, failures, recent events.
    Works from another terminal while `farm run` goes on.

    \b
    Example:
      farm status                # every experiment, one line each
      farm status smoke --json   # one experiment in detail
      farm status smoke --watch  # the live view, from the store
    """
    with Store(store_location(results), read_only=True) as store:
        names = views.experiment_names(store)
        if experiment is not None and experiment not in names:
            known = ", ".join(names) or "none"
            raise ConfigError(f"no experiment {experiment!r} in {store.label} (known: {known})")
        if watch:
            _watch(store, experiment or (names[0] if names else ""))
            return
        running = ownership.live_executions(store)
        leases = ownership.leases(store)
        now = store.now()
        chosen = [experiment] if experiment else names
        data = [experiment_status(store, name, events if experiment else 0) for name in chosen]
    if as_json:
        echo_json(
            {
                "experiments": data,
                "running_executions": [_execution_json(e) for e in running],
                "leases": [_lease_json(lease, now) for lease in leases],
            }
        )
        return
    for item in data:
        states = item["states"]
        click.echo(
            f"{item['experiment']}: {states['DONE']} done, {states['FAILED']} failed, "
            f"{states['RUNNING']} running, {states['PENDING']} pending, of {item['total']}"
        )
        if experiment:
            for phone, per in sorted(item["phones"].items()):
                counts = ", ".join(f"{n} {s.lower()}" for s, n in per.items() if n)
                click.echo(terminal(f"  {phone}: {counts}"))
            for fail in item["failed"]:
                click.echo(terminal(f"  FAILED {fail['run_id']} on {fail['phone']}: {fail['reason']}"))
            for event in item["events"]:
                stamp = time.strftime("%H:%M:%S", time.localtime(event["ts"]))
                line = f"  {stamp} {event['kind']:<9} {event['phone'] or '':<24} {event['message']}"
                click.echo(terminal(line))
    if running:
        click.echo(f"{len(running)} farm process(es) running; {len(leases)} phone(s) leased")
    shown = [lease for lease in leases if experiment is None or lease.experiment == experiment]
    for lease in shown:
        click.echo(terminal(f"  {lease.device_id}: held by {_holder(lease, now)}"))


def _holder(lease: ownership.Lease, now: float) -> str:
    """Who holds a phone, as `farm status` says it: the coordinator and what it runs."""
    age_s = max(0.0, now - lease.heartbeat_at)
    what = f", running {lease.experiment}" if lease.experiment else ""
    return (
        f"{lease.hostname} pid {lease.pid} (execution {lease.execution_id}{what}; "
        f"heartbeat {age_s:.0f} s ago)"
    )


def _lease_json(lease: ownership.Lease, now: float) -> dict[str, Any]:
    return {
        "phone": lease.device_id,
        "execution": lease.execution_id,
        "host": lease.hostname,
        "pid": lease.pid,
        "experiment": lease.experiment,
        "acquired_at": lease.acquired_at,
        "heartbeat_age_s": round(max(0.0, now - lease.heartbeat_at), 3),
    }


def _execution_json(execution: ownership.Execution) -> dict[str, Any]:
    return {
        "id": execution.id,
        "host": execution.hostname,
        "pid": execution.pid,
        "experiment": execution.experiment,
    }


def _watch(store: Store, name: str) -> None:
    from farm.live.from_store import snapshot_from_store
    from farm.live.view import watch

    try:
        watch(lambda: snapshot_from_store(store, name))
    except KeyboardInterrupt:
        return
