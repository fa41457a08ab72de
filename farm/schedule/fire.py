"""One firing of a schedule: re-run its experiment as a new nightly, record the outcome, flag
regressions against the previous nightlies. What `farm schedule run` and the daemon both call.

The nightly runs through farm.engine.runner.run_experiment like `farm run`, so it takes phones
through the same leases (an ad-hoc `farm run` on other phones goes on beside it) and restores
phones the same way when stopped. Stopping is one cancel event per firing, set by the caller's
stop event (the daemon's SIGTERM, Ctrl-C) or by max_runtime_s (Deadline): the runner then stops
the runs in flight and restores the phones; the runs left over stay PENDING in that night's
experiment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from farm import crashlog
from farm.analysis.regression import Finding, RegressionPolicy, detect, regressions
from farm.engine.model import OnFinished
from farm.engine.runner import RunInterrupted, RunOptions, RunSummary, run_experiment
from farm.engine.scheduler import NoEligiblePhone
from farm.errors import ConfigError, FarmError
from farm.experiment import load
from farm.schedule import firings
from farm.schedule.history import load_points, record_regressions
from farm.schedule.model import Schedule
from farm.schedule.nightly import NightlyName, nightly_name, rename_spec
from farm.store import Store, StoreLocation, results_dir
from farm.store import firings as firing_store
from farm.store.firings import FiringOutcome, Trigger

PHONE_RETRY_S = 60.0  # while every eligible phone is leased (an ad-hoc `farm run`) or absent
DEFAULT_PHONE_WAIT_S = 3600.0  # how long a nightly without max_runtime_s waits for phones
SPECS_DIR = "schedules"  # results/schedules/<schedule>/<nightly name>.yaml: the spec each night ran
DEADLINE_POLL_S = 0.25  # how soon a set stop event or a passed deadline cancels the nightly
_TAKEN = "slot already handled (another `farm schedule` on this store?)"


@dataclass(frozen=True)
class FireContext:
    results: Path | StoreLocation  # the store; nightly specs and run folders go to its local folder
    adb_port: int | None = None
    config: Path | None = None
    policy: RegressionPolicy = field(default_factory=RegressionPolicy)
    on_finished: OnFinished | None = None
    log: Callable[[str], None] = lambda _line: None
    # Set by the caller to stop now (the daemon's SIGTERM, Ctrl-C): the nightly is interrupted.
    stop: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class FireResult:
    schedule: str
    slot: datetime
    outcome: FiringOutcome
    experiment: str | None  # the nightly's stored name
    summary: RunSummary | None = None
    regressions: tuple[Finding, ...] = ()
    message: str = ""
    error_exit_code: int = 2  # of the FarmError behind an ERROR outcome

    @property
    def exit_code(self) -> int:
        """As `farm run`: 0 every run done, 1 not all done, 130 interrupted, the error's code."""
        return {
            FiringOutcome.OK: 0,
            FiringOutcome.INTERRUPTED: 130,
            FiringOutcome.ERROR: self.error_exit_code,
        }.get(self.outcome, 1)


def _free_name(store: Store, base_name: str, slot: datetime, variant: str | None) -> NightlyName:
    taken = firing_store.experiment_names(store)
    seq = 0
    while (nightly := nightly_name(base_name, slot, variant, seq)).qualified_name in taken:
        seq += 1
    return nightly


def write_nightly_spec(schedule: Schedule, nightly: NightlyName, results: Path) -> Path:
    try:
        text = schedule.experiment.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"schedule {schedule.name}: {schedule.experiment}: no such experiment file",
            location=schedule.location,
        ) from None
    folder = results / SPECS_DIR / schedule.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{nightly.name}.yaml"
    path.write_text(rename_spec(text, str(schedule.experiment), nightly.name), encoding="utf-8")
    return path


class Deadline:
    """Sets `cancel` once `seconds` have passed (then `fired` is True) or as soon as `stop` is
    set, whichever comes first, while the `with` block runs; never after it."""

    def __init__(self, seconds: float | None, stop: threading.Event, cancel: threading.Event) -> None:
        self.seconds = seconds
        self.stop = stop
        self.cancel = cancel
        self.fired = False
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Deadline:
        self._thread = threading.Thread(target=self._watch, name="nightly-deadline", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        expires = None if self.seconds is None else time.monotonic() + self.seconds
        while not self._ended.wait(DEADLINE_POLL_S):
            if expires is not None and time.monotonic() >= expires:
                self.fired = True
            if self.fired or self.stop.is_set():
                self.cancel.set()
                return

    def __exit__(self, *exc: object) -> None:
        self._ended.set()
        if self._thread is not None:
            self._thread.join()


def fire(schedule: Schedule, slot: datetime, trigger: Trigger, context: FireContext) -> FireResult:
    """Run `schedule` for `slot` now; never raises FarmError (the outcome says what happened)."""
    with Store.in_results(context.results) as store:
        for left in firings.recover_abandoned(store):
            context.log(firings.abandoned_line(left))
        try:
            base = load(schedule.experiment, schedule.variant)
            nightly = _free_name(store, base.name, slot, schedule.variant)
        except FarmError as error:
            return _refused(store, schedule, slot, trigger, error)
        # The slot is owned by this process (an execution with a heartbeat) from before it is
        # claimed until it is finished: a kill -9 leaves it to firings.recover_abandoned.
        with firings.owned(store, nightly.qualified_name):
            return _fire_owned(schedule, slot, trigger, context, store, nightly)


def _refused(
    store: Store, schedule: Schedule, slot: datetime, trigger: Trigger, error: FarmError
) -> FireResult:
    """A night that cannot start (bad file, name too long): an error of its slot, if it is ours."""
    firing_id = firing_store.claim(store, schedule.name, slot, trigger)
    if firing_id is None:
        return FireResult(schedule.name, slot, FiringOutcome.SKIPPED, None, message=_TAKEN)
    firing_store.finish(store, firing_id, FiringOutcome.ERROR, message=str(error))
    return FireResult(
        schedule.name, slot, FiringOutcome.ERROR, None, message=str(error), error_exit_code=error.exit_code
    )


def _fire_owned(
    schedule: Schedule,
    slot: datetime,
    trigger: Trigger,
    context: FireContext,
    store: Store,
    nightly: NightlyName,
) -> FireResult:
    firing_id = firing_store.claim(
        store, schedule.name, slot, trigger, nightly.qualified_name, nightly.base_qualified_name
    )
    if firing_id is None:
        return FireResult(schedule.name, slot, FiringOutcome.SKIPPED, None, message=_TAKEN)
    try:
        spec = write_nightly_spec(schedule, nightly, results_dir(context.results))
    except FarmError as error:
        firing_store.finish(store, firing_id, FiringOutcome.ERROR, message=str(error))
        return FireResult(
            schedule.name,
            slot,
            FiringOutcome.ERROR,
            None,
            message=str(error),
            error_exit_code=error.exit_code,
        )
    options = RunOptions(
        file=spec,
        variant=schedule.variant,
        selectors=schedule.devices,
        results=context.results,
        adb_port=context.adb_port,
        config=context.config,
    )
    summary: RunSummary | None = None
    error_exit_code = 2
    cancel = threading.Event()
    deadline = Deadline(schedule.max_runtime_s, context.stop, cancel)
    try:
        with deadline:
            summary = run_when_phones_free(
                lambda: run_experiment(options, cancel=cancel, on_finished=context.on_finished),
                cancel.wait,
                context.log,
                schedule.max_runtime_s or DEFAULT_PHONE_WAIT_S,
            )
        outcome = FiringOutcome.OK if summary.exit_code == 0 else FiringOutcome.INCOMPLETE
        message = "; ".join(summary.problems)
    except (RunInterrupted, KeyboardInterrupt):
        outcome = FiringOutcome.TIMEOUT if deadline.fired else FiringOutcome.INTERRUPTED
        message = (
            f"stopped after max_runtime_s={schedule.max_runtime_s:g}" if deadline.fired else "interrupted"
        )
    except FarmError as error:
        outcome, message, error_exit_code = FiringOutcome.ERROR, str(error), error.exit_code
    except Exception as error:  # a bug: the slot must not stay "running" forever
        stack_at = crashlog.record(error, f"schedule {schedule.name} firing {firing_id}")
        message = f"internal error: {error!r} (stack in {stack_at})"
        firing_store.finish(store, firing_id, FiringOutcome.ERROR, message=message)
        raise
    flagged = _flag_regressions(store, nightly, context.policy) if outcome is not FiringOutcome.ERROR else []
    counts = firings.run_counts(store, nightly.qualified_name)
    firing_store.finish(
        store, firing_id, outcome, regressions=len(flagged), message=message or None, **counts
    )
    return FireResult(
        schedule.name,
        slot,
        outcome,
        nightly.qualified_name,
        summary,
        tuple(flagged),
        message,
        error_exit_code,
    )


def run_when_phones_free(
    run: Callable[[], RunSummary],
    wait: Callable[[float], bool],
    log: Callable[[str], None],
    wait_limit_s: float,
    retry_s: float = PHONE_RETRY_S,
) -> RunSummary:
    """`run()`, tried again every `retry_s` while no phone is free (NoEligiblePhone), up to
    `wait_limit_s`: a nightly waits out an ad-hoc sweep holding every phone instead of failing.
    `wait(seconds)` returns True when the nightly is cancelled meanwhile: RunInterrupted, as when
    it is cancelled during a run."""
    waited_s = 0.0
    while True:
        try:
            return run()
        except NoEligiblePhone as error:
            if waited_s + retry_s > wait_limit_s:
                raise
            log(f"no free phone yet ({error}); trying again in {retry_s:g} s")
            if wait(retry_s):
                raise RunInterrupted() from None
            waited_s += retry_s


def _flag_regressions(store: Store, nightly: NightlyName, policy: RegressionPolicy) -> list[Finding]:
    """Regressions of this nightly against the ones before it, each recorded as an event."""
    points = load_points(store, nightly.base_qualified_name, policy.metrics)
    flagged = [f for f in regressions(detect(points, policy)) if f.new_series == nightly.qualified_name]
    record_regressions(store, nightly.qualified_name, flagged)
    return flagged
