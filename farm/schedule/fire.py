"""One firing of a schedule: re-run its experiment as a new nightly, record the outcome, flag
regressions against the previous nightlies. What `farm schedule run` and the daemon both call.

The nightly runs through farm.engine.runner.run_experiment like `farm run`, so it takes phones
through the same leases (an ad-hoc `farm run` on other phones goes on beside it) and restores
phones the same way when stopped. max_runtime_s is enforced by interrupting the main thread
(SIGINT to itself): the runner then stops the runs in flight and restores the phones, exactly as
for Ctrl-C; the runs left over stay PENDING in that night's experiment.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from farm.analysis.regression import Finding, RegressionPolicy, detect, regressions
from farm.engine.model import OnFinished
from farm.engine.runner import RunOptions, RunSummary, run_experiment
from farm.engine.scheduler import NoEligiblePhone
from farm.errors import ConfigError, FarmError
from farm.schedule import firings
from farm.schedule.history import load_points
from farm.schedule.model import Outcome, Schedule, Trigger
from farm.schedule.nightly import NightlyName, nightly_name, rename_spec
from farm.spec import load
from farm.store import RunState, Store
from farm.store import runs as run_store

PHONE_RETRY_S = 60.0  # while every eligible phone is leased (an ad-hoc `farm run`) or absent
DEFAULT_PHONE_WAIT_S = 3600.0  # how long a nightly without max_runtime_s waits for phones
SPECS_DIR = "schedules"  # results/schedules/<schedule>/<nightly name>.yaml: the spec each night ran
REGRESSION_EVENT = "regression"


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


@dataclass(frozen=True)
class FireContext:
    results: Path
    adb_port: int | None = None
    config: Path | None = None
    policy: RegressionPolicy = field(default_factory=RegressionPolicy)
    on_finished: OnFinished | None = None
    log: Callable[[str], None] = lambda _line: None
    wait: Callable[[float], bool] = field(default=lambda seconds: _sleep(seconds))  # True: stop now


@dataclass(frozen=True)
class FireResult:
    schedule: str
    slot: datetime
    outcome: Outcome
    experiment: str | None  # the nightly's stored name
    summary: RunSummary | None = None
    regressions: tuple[Finding, ...] = ()
    message: str = ""
    error_exit_code: int = 2  # of the FarmError behind an ERROR outcome

    @property
    def exit_code(self) -> int:
        """As `farm run`: 0 every run done, 1 not all done, 130 interrupted, the error's code."""
        return {Outcome.OK: 0, Outcome.INTERRUPTED: 130, Outcome.ERROR: self.error_exit_code}.get(
            self.outcome, 1
        )


def _free_name(store: Store, base_name: str, slot: datetime, variant: str | None) -> NightlyName:
    taken = firings.experiment_names(store)
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
    """Interrupts the main thread once `seconds` have passed, unless disarmed first."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.fired = False
        self._lock = threading.Lock()
        self._armed = False
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Deadline:
        if self.seconds is not None and threading.current_thread() is threading.main_thread():
            self._armed = True
            self._timer = threading.Timer(self.seconds, self._expire, args=(threading.main_thread().ident,))
            self._timer.daemon = True
            self._timer.start()
        return self

    def _expire(self, main_ident: int | None) -> None:
        with self._lock:
            if not self._armed or main_ident is None:
                return
            self.fired = True
            signal.pthread_kill(main_ident, signal.SIGINT)

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._armed = False
        if self._timer is not None:
            self._timer.cancel()


def fire(schedule: Schedule, slot: datetime, trigger: Trigger, context: FireContext) -> FireResult:
    """Run `schedule` for `slot` now; never raises FarmError (the outcome says what happened)."""
    with Store.in_results(context.results) as store:
        firing_id = firings.claim(store, schedule.name, slot, trigger)
        if firing_id is None:
            message = "slot already handled (another `farm schedule` on this store?)"
            return FireResult(schedule.name, slot, Outcome.SKIPPED, None, message=message)
        nightly: NightlyName | None = None
        try:
            base = load(schedule.experiment, schedule.variant)
            nightly = _free_name(store, base.name, slot, schedule.variant)
            firings.attach_experiment(store, firing_id, nightly.qualified_name, nightly.base_qualified_name)
            spec = write_nightly_spec(schedule, nightly, context.results)
        except FarmError as error:
            firings.finish(store, firing_id, Outcome.ERROR, message=str(error))
            return FireResult(
                schedule.name, slot, Outcome.ERROR, None, message=str(error), error_exit_code=error.exit_code
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
        deadline = Deadline(schedule.max_runtime_s)
        try:
            with deadline:
                summary = run_when_phones_free(
                    lambda: run_experiment(options, on_finished=context.on_finished),
                    context,
                    schedule.max_runtime_s or DEFAULT_PHONE_WAIT_S,
                )
            outcome = Outcome.OK if summary.exit_code == 0 else Outcome.INCOMPLETE
            message = "; ".join(summary.problems)
        except KeyboardInterrupt:
            outcome = Outcome.TIMEOUT if deadline.fired else Outcome.INTERRUPTED
            message = (
                f"stopped after max_runtime_s={schedule.max_runtime_s:g}" if deadline.fired else "interrupted"
            )
        except FarmError as error:
            outcome, message, error_exit_code = Outcome.ERROR, str(error), error.exit_code
        except Exception as error:  # a bug: the slot must not stay "running" forever
            firings.finish(store, firing_id, Outcome.ERROR, message=f"internal error: {error!r}")
            raise
        flagged = _flag_regressions(store, nightly, context.policy) if outcome is not Outcome.ERROR else []
        counts = _counts(store, nightly.qualified_name)
        firings.finish(store, firing_id, outcome, regressions=len(flagged), message=message or None, **counts)
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
    run: Callable[[], RunSummary], context: FireContext, wait_limit_s: float, retry_s: float = PHONE_RETRY_S
) -> RunSummary:
    """`run()`, tried again every `retry_s` while no phone is free (NoEligiblePhone), up to
    `wait_limit_s`: a nightly waits out an ad-hoc sweep holding every phone instead of failing.
    A stop request while waiting raises KeyboardInterrupt, as Ctrl-C during a run does."""
    waited_s = 0.0
    while True:
        try:
            return run()
        except NoEligiblePhone as error:
            if waited_s + retry_s > wait_limit_s:
                raise
            context.log(f"no free phone yet ({error}); trying again in {retry_s:g} s")
            if context.wait(retry_s):
                raise KeyboardInterrupt from None
            waited_s += retry_s


def _counts(store: Store, experiment: str) -> dict[str, int]:
    states = run_store.count_states(store, experiment)
    done = states[RunState.DONE]
    failed = states[RunState.FAILED] + states[RunState.SKIPPED]
    return {"done": done, "failed": failed, "pending": sum(states.values()) - done - failed}


def _flag_regressions(store: Store, nightly: NightlyName, policy: RegressionPolicy) -> list[Finding]:
    """Regressions of this nightly against the ones before it, each recorded as an event."""
    points = load_points(store, nightly.base_qualified_name, policy.metrics)
    flagged = [f for f in regressions(detect(points, policy)) if f.new_series == nightly.qualified_name]
    for finding in flagged:
        run_store.add_event(
            store,
            REGRESSION_EVENT,
            describe(finding),
            experiment=nightly.qualified_name,
            device_id=None if finding.device == "*" else finding.device,
            data=finding.as_dict(),
        )
    return flagged


def describe(finding: Finding) -> str:
    cell = " ".join(f"{k}={v}" for k, v in sorted(finding.factors.items())) or finding.cell_id
    change = f"{finding.change_pct:+.1f}%" if finding.change_pct is not None else "n/a"
    return (
        f"{finding.metric} {finding.verdict.value} on {finding.device} [{cell}]: "
        f"{finding.baseline:.4g} -> {finding.new_value:.4g} ({change}, threshold {finding.threshold:.3g})"
    )
