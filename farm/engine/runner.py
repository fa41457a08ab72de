"""`farm run` as a library call: load, select phones, plan, persist, lease, run, report.

The CLI (farm/cli/run.py) only parses options and renders; everything with an effect is here.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import farm
from farm import crashlog
from farm.device.session import DeviceSession
from farm.engine import planner
from farm.engine.ladder import Ladder
from farm.engine.lifecycle import probe_phone
from farm.engine.model import OnFinished
from farm.engine.planner import PhoneAbilities
from farm.engine.recovery import (
    backfill_metrics,
    recover_store,
    restore_charging_marker,
    restore_clocks_marker,
)
from farm.engine.scheduler import NoEligiblePhone, Sweep
from farm.errors import ConfigError, FarmError, StoreError
from farm.experiment import Experiment, load
from farm.fleet.endpoint import Endpoint
from farm.fleet.hosts import Fleet, open_fleet
from farm.fleet.inventory import Phone, PhoneState, discover, duplicate_serials
from farm.fleet.watch import PhoneWatch
from farm.store import RunState, Store, StoreLocation, events, outbox, ownership, results_dir
from farm.store import devices as device_store
from farm.store import runs as run_store
from farm.store.events import EventKind
from farm.store.runs import PlannedRun
from farm.telemetry.probe import Capabilities

STATUS_POLL_S = 0.25


@dataclass(frozen=True)
class RunOptions:
    file: Path
    variant: str | None = None
    selectors: tuple[str, ...] = ()
    dry_run: bool = False
    fresh: bool = False
    results: Path | StoreLocation = Path("results")  # a folder (SQLite inside) or a resolved store
    retry_failed: bool = False  # also requeue FAILED runs that were not lost (a fresh attempt budget)
    adb_port: int | None = None
    config: Path | None = None  # farm.yaml with lab hosts (default: found as farm.fleet.farm_yaml says)
    lost_wait_s: float | None = None  # default: the experiment's timeouts.lost_phone_wait_s
    live_telemetry: bool = False  # read each running phone's newest readings for a live view (~1 Hz)


@dataclass(frozen=True)
class RunSummary:
    experiment: str
    planned: int
    done: int
    failed: int
    pending: int
    phones: tuple[str, ...]
    elapsed_s: float
    plan_text: str | None = None
    problems: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 0 if self.failed == 0 and self.pending == 0 else 1


def matches_selector(phone: Phone, selector: str) -> bool:
    """A --devices selector: identity host/serial, serial, adb serial or model; globs allowed."""
    names = [phone.device_id, phone.serial, phone.adb_serial, phone.model or ""]
    return any(fnmatch.fnmatchcase(name, selector) for name in names if name)


def select_phones(
    experiment: Experiment,
    phones: Sequence[Phone],
    selectors: Sequence[str],
    tags_of: Callable[[str], frozenset[str]] = lambda _host: frozenset(),
    gpu_family_of: Callable[[Phone], str | None] = lambda _phone: None,
) -> list[Phone]:
    """Online phones the selectors and the spec's devices: pick (`tags_of(host)`: the host's tags;
    `gpu_family_of(phone)`: from the probe, asked only when the spec selects by GPU family).
    A selector naming a serial several phones report is refused: it would pick either."""
    shared = duplicate_serials(phones)
    for selector in selectors:
        if selector in shared:
            names = ", ".join(p.device_id for p in shared[selector])
            raise ConfigError(
                f"--devices {selector}: {len(shared[selector])} phones report this serial ({names})",
                hint="name one of them by the identity `farm devices` shows",
            )
    chosen = []
    for phone in phones:
        if phone.state is not PhoneState.ONLINE:
            continue
        if selectors and not any(matches_selector(phone, s) for s in selectors):
            continue
        family = gpu_family_of(phone) if experiment.devices.gpu_family is not None else None
        if not experiment.devices.matches(phone.device_id, phone.model, family, tags_of(phone.host)):
            continue
        chosen.append(phone)
    return chosen


def planned_rows(plan: planner.Plan) -> list[PlannedRun]:
    """Every planned run as the store takes it: the queued ones in order, then the skipped ones."""
    runs = [*plan.runs, *(run for run, _ in plan.skipped)]
    return [
        PlannedRun(run.run_id, run.cell_id, run.cell.factors, run.repetition, run.device, seq)
        for seq, run in enumerate(runs)
    ]


def spec_json(experiment: Experiment) -> tuple[str, str]:
    text = json.dumps(experiment.model_dump(mode="json"), sort_keys=True)
    return text, hashlib.sha256(text.encode()).hexdigest()


def check_plan_size(experiment: Experiment, source: object, growth_bytes: int, runs: int) -> None:
    """ConfigError, before anything is written, when storing the plan would add more than the
    experiment's limits.plan_store_mb (pure)."""
    limit = experiment.limits.plan_store_bytes
    if growth_bytes <= limit:
        return
    per_run = growth_bytes / max(runs, 1)
    raise ConfigError(
        f"{source}: the plan's {runs} runs would add {growth_bytes / 1e6:.1f} MB to the store "
        f"({per_run / 1e3:.1f} kB a run), over limits.plan_store_mb ({experiment.limits.plan_store_mb})",
        hint="shorten long factor levels (a large value belongs in an asset file) or raise the limit",
    )


def _restore_left_charging(store: Store, endpoints: Sequence[Endpoint], phones: Sequence[Phone]) -> None:
    """Phones a dead farm process left with charging off (or clocks changed) get them back now,
    used or not."""
    marked = {m.device_id for m in device_store.charging_markers(store)} | device_store.clocks_marked(store)
    by_host = {endpoint.host: endpoint for endpoint in endpoints}
    for phone in phones:
        if phone.device_id in marked and phone.state is PhoneState.ONLINE and phone.host in by_host:
            session = DeviceSession(by_host[phone.host].device(phone.adb_serial), phone.device_id)
            try:
                restore_charging_marker(store, session, phone.device_id)
                restore_clocks_marker(store, session, phone.device_id)
            except FarmError:
                continue  # recovery tries again when the phone is used


def _prober(endpoints: Sequence[Endpoint]) -> Callable[[Phone], Capabilities | None]:
    """A phone's capabilities from farm-probe (deployed on first use), once per phone, or None
    if it cannot tell."""
    by_host = {endpoint.host: endpoint for endpoint in endpoints}
    seen: dict[str, Capabilities | None] = {}

    def probe(phone: Phone) -> Capabilities | None:
        if phone.device_id in seen:
            return seen[phone.device_id]
        endpoint = by_host.get(phone.host)
        caps = None
        if endpoint is not None:
            try:
                caps = probe_phone(DeviceSession(endpoint.device(phone.adb_serial), phone.device_id), phone)
            except FarmError:
                caps = None
        seen[phone.device_id] = caps
        return caps

    return probe


def _abilities(
    phones: Sequence[Phone], probe: Callable[[Phone], Capabilities | None]
) -> dict[str, PhoneAbilities]:
    """What the planner may skip by: the phones farm-probe answered for."""
    found = {}
    for phone in phones:
        caps = probe(phone)
        if caps is not None:
            found[phone.device_id] = PhoneAbilities(opencl=caps.has_opencl, root=caps.root.available)
    return found


class RunInterrupted(FarmError):
    """The sweep was cancelled (its cancel event was set: Ctrl-C, SIGTERM, a nightly's deadline).
    The runs in flight were stopped and are PENDING again, the phones restored."""

    exit_code = 130

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message)


def _requeue_failed(store: Store, experiment: str, *, retry_failed: bool) -> None:
    """A resume retries runs FAILED because their phone was lost (fresh attempt budget); with
    --retry-failed every FAILED run. DONE runs are never redone."""
    requeued = run_store.requeue_failed(store, experiment, lost_only=not retry_failed)
    if requeued:
        why = "failed" if retry_failed else "lost (phone gone)"
        events.emit(
            store,
            EventKind.RETRY,
            f"{len(requeued)} {why} run(s) requeued with a fresh attempt budget",
            experiment=experiment,
        )


def _plan_joining(
    store: Store,
    experiment: Experiment,
    planned: Collection[str],
    joining: Sequence[Phone],
    abilities: Mapping[str, PhoneAbilities],
) -> list[str]:
    """Runs for phones that join a running sweep (pinned runs are per phone; spread ones are
    shared and already stored). Idempotent like the first plan. A joining phone gets the same
    plan-time skips as one present at the start (`abilities`: farm-probe's answers), stored
    SKIPPED with the reason, never tried. Returns the new phones' run ids, skipped ones too."""
    if experiment.devices.spread:
        return []
    new = {p.device_id for p in joining}
    plan = planner.plan(
        experiment,
        [*[d for d in planned if d not in new], *sorted(new)],
        abilities={d: a for d, a in abilities.items() if d in new},
    )
    rows = [row for row in planned_rows(plan) if row.device_id in new]
    run_store.insert_planned(store, experiment.qualified_name, rows)
    run_store.skip_planned(store, {run.run_id: why for run, why in plan.skipped if run.device in new})
    return [row.run_id for row in rows]


def _refuse_fresh_while_shared(store: Store, key: str) -> None:
    """--fresh forgets every run of the experiment: not while another coordinator works on it."""
    others = [e for e in ownership.live_executions(store) if e.experiment == key]
    if others:
        who = ", ".join(f"{e.hostname} pid {e.pid}" for e in others)
        raise ConfigError(
            f"--fresh: another farm process runs {key} now ({who})",
            hint="wait for it to finish, or run without --fresh to share the sweep with it",
        )


# -- run_experiment's steps, in the order it takes them ------------------------------------------


def _recover(store: Store, artifacts: Path, key: str) -> None:
    """Results kept while the store was away go in first, then runs left RUNNING by a dead farm
    are reset (recover_store)."""
    outbox.replay(store, artifacts, key)
    recover_store(store, key)


def _discover(store: Store, fleet: Fleet, key: str) -> list[Phone]:
    """The phones the fleet sees, less those other experiments' coordinators hold (those another
    coordinator of this same experiment holds are shared with it, taken over if it dies)."""
    elsewhere = {lease.device_id for lease in ownership.leases(store) if lease.experiment != key}
    return discover(fleet.endpoints, leased=lambda device_id: device_id in elsewhere)


def _require_enough(
    experiment: Experiment, file: Path, phones: Sequence[Phone], eligible: Sequence[Phone]
) -> None:
    need = max(1, experiment.devices.min_count)
    if len(eligible) < need:
        seen = ", ".join(f"{p.device_id} ({p.state})" for p in phones) or "none"
        raise NoEligiblePhone(
            f"{file}: {len(eligible)} eligible phone(s), need {need} (seen: {seen})",
            hint="check `farm devices`, --devices and the experiment's devices: section",
        )


def _repair(
    store: Store,
    endpoints: Sequence[Endpoint],
    phones: Sequence[Phone],
    artifacts: Path,
    experiment: Experiment,
) -> None:
    """What an interrupted earlier sweep left: charging still off, DONE runs without metrics."""
    _restore_left_charging(store, endpoints, phones)
    backfill_metrics(store, artifacts, experiment.qualified_name, output=experiment.benchmark.output)


def _plan(
    experiment: Experiment,
    file: Path,
    eligible: Sequence[Phone],
    probe: Callable[[Phone], Capabilities | None],
) -> tuple[planner.Plan, str, str, list[PlannedRun]]:
    """The plan for the eligible phones, its spec text and digest and its store rows; refused in
    one line when it would grow the store past the experiment's limit."""
    plan = planner.plan(experiment, [p.device_id for p in eligible], abilities=_abilities(eligible, probe))
    text, digest = spec_json(experiment)
    rows = planned_rows(plan)
    check_plan_size(experiment, file, run_store.plan_bytes(text, rows), len(rows))
    return plan, text, digest, rows


def _store_plan(
    store: Store,
    key: str,
    options: RunOptions,
    plan: planner.Plan,
    rows: list[PlannedRun],
    spec: tuple[str, str],
) -> None:
    """The plan into the store (idempotent: coordinators of one experiment share it): a fresh
    start forgets earlier runs first; skipped runs are stored as such; failed ones are requeued
    as --retry-failed says."""
    if options.fresh:
        _refuse_fresh_while_shared(store, key)
        run_store.forget_experiment_runs(store, key)
    text, digest = spec
    run_store.save_experiment(store, key, text, digest, str(options.file))
    run_store.insert_planned(store, key, rows)
    run_store.skip_planned(store, {run.run_id: reason for run, reason in plan.skipped})
    _requeue_failed(store, key, retry_failed=options.retry_failed)


def run_experiment(
    options: RunOptions,
    *,
    cancel: threading.Event | None = None,
    on_started: Callable[[Sweep], None] | None = None,
    on_finished: OnFinished | None = None,
    tick: Callable[[Sweep], None] | None = None,
) -> RunSummary:
    """Run (or resume) the experiment of `options` on every eligible phone; returns the summary.

    Setting `cancel` stops the sweep the clean way (runs in flight interrupted and requeued,
    charging back on, leases released) and raises RunInterrupted. This function installs no
    signal handlers: the CLI wires Ctrl-C and SIGTERM to the event (farm.cli.signals)."""
    cancel = cancel if cancel is not None else threading.Event()
    started = time.monotonic()
    experiment = load(options.file, options.variant)
    key = experiment.qualified_name
    fleet = open_fleet(options.config, options.adb_port)  # the local adb server + lab hosts' tunnels
    artifacts = results_dir(options.results)  # run folders: local, whatever the database
    crashlog.use(artifacts)  # a bug's stack goes beside the run folders it concerns
    with fleet, Store.in_results(options.results) as store:
        _recover(store, artifacts, key)
        phones = _discover(store, fleet, key)
        probe = _prober(fleet.endpoints)

        def family_of(phone: Phone) -> str | None:
            caps = probe(phone)
            return caps.gpu.family.value if caps is not None else None

        eligible = select_phones(experiment, phones, options.selectors, fleet.tags_of, family_of)
        _require_enough(experiment, options.file, phones, eligible)
        _repair(store, fleet.endpoints, phones, artifacts, experiment)
        plan, text, digest, rows = _plan(experiment, options.file, eligible, probe)
        if options.dry_run:
            return RunSummary(
                key,
                len(plan.runs) + len(plan.skipped),
                0,
                0,
                len(plan.runs),
                tuple(p.device_id for p in eligible),
                time.monotonic() - started,
                planner.render_plan(plan),
            )
        if cancel.is_set():
            raise RunInterrupted()
        _store_plan(store, key, options, plan, rows, (text, digest))
        execution_id = ownership.start_execution(store, key, sys.argv, farm.__version__, results=artifacts)
        watch = PhoneWatch(phones)

        def candidates() -> list[Phone]:
            fleet.refresh()  # lab hosts that came back
            found = watch.refresh(fleet.endpoints)
            return select_phones(experiment, found, options.selectors, fleet.tags_of, family_of)

        sweep = Sweep(
            experiment,
            key,
            eligible,
            fleet.endpoints[0],
            store,
            artifacts,
            execution_id,
            cancel,
            on_finished=on_finished,
            lost_wait_s=options.lost_wait_s or experiment.timeouts.lost_phone_wait_s,
            endpoints=fleet.by_host,
            live_telemetry=options.live_telemetry,
            candidates=candidates,
            plan_phones=lambda joining: _plan_joining(
                store, experiment, sweep.planned, joining, _abilities(joining, probe)
            ),
            ladder=Ladder(
                reboot_allowed=experiment.retries.reboot,
                power_cycle=fleet.power_cycle,
                has_power_cycle=fleet.has_power_cycle,
            ),
        )
        try:
            sweep.start()
            if on_started is not None:
                on_started(sweep)
            while sweep.alive():
                sweep.join(STATUS_POLL_S)
                if tick is not None:
                    tick(sweep)
        except KeyboardInterrupt:
            # A caller without signal handlers (the CLI has them): stop the same clean way.
            cancel.set()
            sweep.join()  # workers stop their runs and restore the phones
            raise
        finally:
            sweep.close()
            # A broken store cannot take these (each try would wait on it): the leases then
            # expire by their stale heartbeat, and the next start resets the runs left RUNNING.
            if sweep.store_error is None:
                with contextlib.suppress(StoreError):
                    status = "interrupted" if cancel.is_set() else "finished"
                    ownership.finish_execution(store, execution_id, status)
        if sweep.store_error is not None:
            raise sweep.store_error  # the sweep stopped cleanly because of it: say so, one line
        planned_ids = {r.run_id for r in (*plan.runs, *(run for run, _ in plan.skipped))}
        planned_ids |= set(sweep.planned_run_ids)
        states = {r.run_id: r.state for r in run_store.list_runs(store, key)}
        done = sum(1 for rid in planned_ids if states.get(rid) is RunState.DONE)
        if cancel.is_set():
            # how far it got and how to go on: DONE runs are kept, a rerun does the rest
            raise RunInterrupted(
                f"interrupted: {done}/{len(planned_ids)} runs done; run the same command again to resume"
            )
        failed = sum(1 for rid in planned_ids if states.get(rid) in (RunState.FAILED, RunState.SKIPPED))
        return RunSummary(
            key,
            len(planned_ids),
            done,
            failed,
            len(planned_ids) - done - failed,
            tuple(p.device_id for p in sweep.phones),
            time.monotonic() - started,
            problems=tuple(sweep.problems),
        )
