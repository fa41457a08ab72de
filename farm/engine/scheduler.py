"""The scheduler: runs -> phones. One worker thread per leased phone, one run at a time per phone,
all phones in parallel; retries decided from how an attempt ended.

Pinned runs (the default) are taken by the worker of their phone in planned order; spread runs
(`devices.spread: true`) by whichever phone is free (an atomic PENDING -> RUNNING claim in the
store). A phone that drops off is waited for (bounded); its run goes back to PENDING and is
retried when the phone is back (or by another phone when spread). Everything a worker does goes
through the store first, so a killed farm resumes where it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent import futures
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from farm.analysis.latest import Readings
from farm.device.session import DeviceSession
from farm.engine.baseline import measure_idle_baseline
from farm.engine.clocks import ClocksRefused, apply_clocks, restore_clocks
from farm.engine.collect import calibration_of, compute_metrics, env_document
from farm.engine.conditions import read_temperature_c
from farm.engine.lifecycle import execute_run, prepare_phone
from farm.engine.measurement import measurement_metrics
from farm.engine.model import (
    Gates,
    IdleBaseline,
    JsonObject,
    OnFinished,
    Phase,
    PhaseUpdate,
    PreparedPhone,
    RunJob,
    RunResult,
)
from farm.engine.onphone import TRACE, RunDir
from farm.engine.recovery import recover_phone
from farm.engine.thermal import throttle_decision
from farm.engine.watch import TraceWatcher
from farm.errors import DeviceTransientError, FarmError, StoreError
from farm.fleet.endpoint import Endpoint
from farm.fleet.inventory import Phone
from farm.spec.model import Experiment
from farm.spec.sections import RetryOn
from farm.store import Outcome, RunState, Store, outbox, ownership, run_artifacts_dir
from farm.store import runs as run_store
from farm.store.runs import StoredRun

LOST_PHONE_WAIT_S = 120.0
LOST_WAIT_SLICE_S = 5.0


class NoEligiblePhone(FarmError):
    """No phone can run the experiment (none connected, none selected, or all leased)."""

    exit_code = 3


def gates_of(experiment: Experiment) -> Gates:
    return Gates(
        max_temp_c=experiment.conditions.cooldown.max_temp_c,
        cooldown_timeout_s=experiment.conditions.cooldown.timeout_s,
        min_battery_pct=float(experiment.conditions.min_battery_pct),
        disable_charging=experiment.telemetry.disable_charging,
        settle_s=experiment.gpu_load.settle_s,
        tolerance=experiment.gpu_load.tolerance,
        intensity=experiment.gpu_load.intensity,
        rate_hz=experiment.telemetry.rate_hz,
        run_timeout_s=experiment.timeouts.run_timeout_s,
        idle_baseline_s=experiment.telemetry.idle_baseline_s,
        within_c_of_idle=experiment.conditions.cooldown.within_c_of_idle,
    )


def retry_decision(
    outcome: Outcome, attempts: int, max_attempts: int, retry_on: Collection[RetryOn]
) -> RunState:
    """Where a run goes after an attempt (pure): DONE, FAILED, or PENDING for another try."""
    if outcome is Outcome.DONE:
        return RunState.DONE
    if outcome is Outcome.INTERRUPTED:
        return RunState.PENDING
    if outcome is Outcome.FAILED:
        return RunState.FAILED
    kind = RetryOn.TIMEOUT if outcome is Outcome.TIMEOUT else RetryOn.LOST
    return RunState.PENDING if kind in retry_on and attempts < max_attempts else RunState.FAILED


@dataclass
class PhoneStatus:
    """What the live view shows of one phone; updated by its worker."""

    device_id: str
    state: Phase = Phase.IDLE
    cell: str | None = None
    run_started: float | None = None
    temperature_c: float | None = None
    battery_pct: float | None = None
    gpu_load_achieved: float | None = None
    live: Readings | None = None  # the running sampler's newest readings (farm.engine.watch)

    def show_readings(self, readings: Readings) -> None:
        self.live = readings

    def apply(self, update: PhaseUpdate) -> None:
        """An attempt's step: its phase, and whatever it read on the phone."""
        self.state = update.phase
        if update.battery_pct is not None:
            self.battery_pct = update.battery_pct
        if update.temperature_c is not None:
            self.temperature_c = update.temperature_c
        if update.gpu_load_achieved is not None:
            self.gpu_load_achieved = update.gpu_load_achieved


@dataclass
class SweepReport:
    done: int = 0
    failed: int = 0
    pending: int = 0
    finished_here: list[str] = field(default_factory=list)


class Sweep:
    """One `farm run` execution over the leased phones."""

    def __init__(
        self,
        experiment: Experiment,
        experiment_key: str,
        phones: Sequence[Phone],
        endpoint: Endpoint,
        store: Store,
        results: Path,
        execution_id: int,
        cancel: threading.Event,
        on_finished: OnFinished | None = None,
        lost_wait_s: float = LOST_PHONE_WAIT_S,
        endpoints: Mapping[str, Endpoint] | None = None,
        live_telemetry: bool = False,
    ) -> None:
        self.experiment = experiment
        self.key = experiment_key
        self.phones = list(phones)
        self.endpoint = endpoint
        self.endpoints = dict(endpoints or {})  # by host, for phones of several adb servers
        self.store = store
        self.results = results
        self.execution_id = execution_id
        self.cancel = cancel
        self.on_finished = on_finished
        self.lost_wait_s = lost_wait_s
        self.live_telemetry = live_telemetry  # poll each running phone's trace for the live view
        self.gates = gates_of(experiment)
        self.status = {p.device_id: PhoneStatus(p.device_id) for p in phones}
        self._cells = {cell.cell_id: cell for cell in experiment.cells()}
        self._threads: list[threading.Thread] = []
        self._done = {p.device_id: threading.Event() for p in phones}
        self.problems: list[str] = []  # phones that could not be used, and why (for the summary)
        self.store_error: StoreError | None = None  # the first store failure; it stopped the sweep
        self._metrics_pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics")
        self._pending_metrics: list[futures.Future[None]] = []
        self.baselines: dict[str, IdleBaseline] = {}  # device_id -> this session's idle power

    # -- running --------------------------------------------------------------------------------

    def start(self) -> None:
        for phone in self.phones:
            thread = threading.Thread(
                target=self._worker, args=(phone,), name=f"phone-{phone.device_id}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def alive(self) -> bool:
        workers = not all(done.is_set() for done in self._done.values())
        return workers or not all(f.done() for f in self._pending_metrics)

    def join(self, timeout_s: float | None = None) -> None:
        """Wait for the workers. Events, not Thread.join: a join interrupted by Ctrl-C can return
        at once when called again (CPython), and we must wait for the phones to be restored."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for done in self._done.values():
            done.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        futures.wait(list(self._pending_metrics), timeout=remaining)

    def _event(
        self,
        kind: str,
        message: str,
        *,
        run_id: str | None = None,
        device_id: str | None = None,
        data: JsonObject | None = None,
    ) -> None:
        run_store.add_event(
            self.store, kind, message, experiment=self.key, run_id=run_id, device_id=device_id, data=data
        )

    def _next_run(self, device_id: str) -> StoredRun | None:
        for run in run_store.list_runs(self.store, self.key, [RunState.PENDING]):
            if run.device_id in (device_id, None):
                return run
        return None

    def _endpoint_of(self, phone: Phone) -> Endpoint:
        return self.endpoints.get(phone.host, self.endpoint)

    def _session(self, phone: Phone) -> DeviceSession:
        return DeviceSession(
            self._endpoint_of(phone).device(phone.adb_serial),
            phone.device_id,
            default_timeout_s=self.experiment.timeouts.device_call_timeout_s,
        )

    def _worker(self, phone: Phone) -> None:
        try:
            self._work(phone)
        finally:
            self._done[phone.device_id].set()

    def _work(self, phone: Phone) -> None:
        status = self.status[phone.device_id]
        prepared: PreparedPhone | None = None
        try:
            while not self.cancel.is_set():
                run = self._next_run(phone.device_id)
                if run is None:
                    break
                if prepared is None:
                    status.state = Phase.PREPARING
                    session = self._session(phone)
                    recover_phone(self.store, session, phone.device_id)
                    prepared = prepare_phone(session, phone, self.experiment.benchmark.program, self.store)
                    prepared = self._with_clocks(prepared)
                    prepared = self._with_baseline(prepared, status)
                self._attempt(prepared, run, status)
                if status.state is Phase.LOST:
                    if not self._wait_for_phone(phone, status):
                        return
                    prepared = None  # re-probe and re-check the deployment on a phone that came back
        except StoreError as error:
            self._store_failed(phone, status, error)
        except DeviceTransientError as error:
            self._event("fault", f"phone lost while preparing: {error}", device_id=phone.device_id)
            status.state = Phase.LOST
            if self._wait_for_phone(phone, status):
                self._work(phone)
        except ClocksRefused as error:
            status.state = Phase.FAILED
            self._event("error", f"phone skipped: {error}", device_id=phone.device_id)
            self.problems.append(str(error))  # it names the phone
            self._skip_bound_runs(phone, str(error))
        except FarmError as error:
            status.state = Phase.FAILED
            self._event("error", f"phone unusable: {error}", device_id=phone.device_id)
            self.problems.append(f"{phone.device_id}: {error}")
        finally:
            if prepared is not None:
                self._restore_clocks(prepared)
            if status.state not in (Phase.LOST, Phase.FAILED):
                status.state = Phase.IDLE
            status.cell = None

    def _with_clocks(self, prepared: PreparedPhone) -> PreparedPhone:
        """The experiment's clock control for this sweep (engine.clocks); ClocksRefused (a
        FarmError) makes the phone unusable for the sweep when the control is required."""
        applied = apply_clocks(
            prepared.session,
            self.store,
            prepared.phone.device_id,
            self.experiment.conditions.clocks,
            prepared.caps,
        )
        message = f"clocks: {applied.mode.value} (asked {applied.requested.value})"
        self._event("clocks", "; ".join([message, *applied.notes]), device_id=prepared.phone.device_id)
        # The idle temperature the relative cooldown gate counts from: read before any run.
        idle_c = read_temperature_c(prepared) if self.gates.within_c_of_idle is not None else None
        return dataclasses.replace(prepared, clocks=applied, idle_temperature_c=idle_c)

    def _skip_bound_runs(self, phone: Phone, reason: str) -> None:
        """The runs only this phone may take are SKIPPED with the reason (another try would be
        refused the same way); runs any phone may take stay for the others."""
        for run in run_store.list_runs(self.store, self.key, [RunState.PENDING]):
            if run.device_id != phone.device_id:
                continue
            artifacts = run_artifacts_dir(self.results, self.key, run.run_id)
            relative = str(artifacts.relative_to(self.results))
            attempt = run_store.claim(self.store, run.run_id, self.execution_id, phone.device_id, relative)
            if attempt is not None:
                run_store.finish(
                    self.store, run.run_id, attempt, Outcome.FAILED, next_state=RunState.SKIPPED, error=reason
                )

    def _restore_clocks(self, prepared: PreparedPhone) -> None:
        """Clocks back as they were; a failure stays marked in the store for recovery."""
        if prepared.clocks is None or prepared.clocks.restore is None:
            return
        try:
            restore_clocks(prepared.session, self.store, prepared.phone.device_id, prepared.clocks.restore)
        except FarmError as error:
            self._event("warning", f"clocks not restored yet: {error}", device_id=prepared.phone.device_id)

    def _store_failed(self, phone: Phone, status: PhoneStatus, error: StoreError) -> None:
        """The store failed (full, read-only, server gone): stop the whole sweep the clean way
        (the other phones interrupt their runs and are restored); nothing more is written here.
        A finished attempt was kept in its run folder (farm.store.outbox) for the next start."""
        status.state = Phase.FAILED
        if self.store_error is None:
            self.store_error = error
        self.problems.append(f"{phone.device_id}: {error}")
        self.cancel.set()

    def _with_baseline(self, prepared: PreparedPhone, status: PhoneStatus) -> PreparedPhone:
        """The phone's idle baseline, measured before its first run of this `farm run` (a phone
        that comes back after a drop keeps the one it had)."""
        device_id = prepared.phone.device_id
        baseline = self.baselines.get(device_id)
        if baseline is None:
            status.state = Phase.BASELINE
            artifacts = self.results / self.key / "idle" / device_id.replace("/", "_")
            baseline = measure_idle_baseline(prepared, self.gates, self.store, self.cancel, artifacts)
            self.baselines[device_id] = baseline
            if baseline.power_mw is not None:
                message = f"idle power {baseline.power_mw:.1f} mW ({baseline.readings} gauge readings)"
            else:
                message = baseline.note or "no idle baseline"
            kind = "baseline" if baseline.power_mw is not None or baseline.note is None else "quality"
            self._event(kind, message, device_id=device_id, data=baseline.to_json())
        return dataclasses.replace(prepared, idle_baseline=baseline)

    def _wait_for_phone(self, phone: Phone, status: PhoneStatus) -> bool:
        """Wait (bounded) for a lost phone; stop waiting early when nothing is left for it (its
        runs were taken by equivalent phones) or the sweep is cancelled."""
        status.state = Phase.OFFLINE

        # Wait in slices so that waiting stops early when it is pointless: the sweep is cancelled
        # or no run is left for this phone (equivalent phones took them).
        endpoint = self._endpoint_of(phone)
        deadline = time.monotonic() + self.lost_wait_s
        while True:
            if self.cancel.is_set() or self._next_run(phone.device_id) is None:
                status.state = Phase.LOST
                return False
            try:
                endpoint.wait_online(
                    phone.adb_serial, phone.device_id, min(LOST_WAIT_SLICE_S, self.lost_wait_s)
                )
                break
            except FarmError as error:
                if time.monotonic() >= deadline:
                    self._event("fault", f"phone did not come back: {error}", device_id=phone.device_id)
                    status.state = Phase.LOST
                    return False
        self._event("recovered", "phone is back", device_id=phone.device_id)
        status.state = Phase.IDLE
        return True

    def _attempt(self, prepared: PreparedPhone, run: StoredRun, status: PhoneStatus) -> None:
        device_id = prepared.phone.device_id
        artifacts = run_artifacts_dir(self.results, self.key, run.run_id)
        attempt = run_store.claim(
            self.store, run.run_id, self.execution_id, device_id, str(artifacts.relative_to(self.results))
        )
        if attempt is None:
            return  # another phone took it (spread) or it was reset
        cell = self._cells.get(run.cell_id)
        if cell is None:
            run_store.finish(
                self.store,
                run.run_id,
                attempt,
                Outcome.FAILED,
                next_state=RunState.SKIPPED,
                error="cell no longer in the experiment file",
            )
            return
        job = RunJob(
            run_id=run.run_id,
            experiment_key=self.key,
            program_args=self.experiment.program_args(cell),
            program=self.experiment.benchmark.program,
            gpu_load=self.experiment.gpu_load_of(cell),
            artifacts=artifacts,
        )
        status.cell = cell.label(self.experiment.factor_names)
        status.run_started = time.time()

        try:
            with self._watcher(prepared, run.run_id, status) as watcher:

                def on_phase(update: PhaseUpdate) -> None:
                    status.apply(update)
                    if watcher is not None:
                        watcher.follow(update.phase)

                result = execute_run(prepared, job, self.gates, self.store, self.cancel, on_phase)
        except StoreError:
            raise  # not the run's fault: the sweep stops, the run is requeued at the next start
        except Exception as error:  # a bug in farm: record it on the run rather than leave it RUNNING
            result = RunResult(Outcome.FAILED, error=f"internal error: {type(error).__name__}: {error}")
        status.gpu_load_achieved = result.load_achieved
        status.live = None
        attempts_after = run.attempts + 1
        next_state = retry_decision(
            result.outcome,
            attempts_after,
            self.experiment.retries.max_attempts,
            self.experiment.retries.on,
        )
        next_state, throttled = throttle_decision(
            next_state,
            result.outcome,
            result.throttle,
            self.experiment.conditions.on_throttle,
            attempts=attempts_after,
            max_attempts=self.experiment.retries.max_attempts,
        )
        if throttled is not None:
            self._event("throttle", throttled, run_id=run.run_id, device_id=device_id)
            if next_state is RunState.FAILED:
                result.outcome, result.error = Outcome.FAILED, throttled
        ended = outbox.PendingResult(
            run.run_id,
            attempt,
            result.outcome,
            next_state,
            error=result.error,
            exit_code=result.exit_code,
            load_target=job.gpu_load,
            load_achieved=result.load_achieved,
            env=env_document(prepared, job, result),
            metrics=tuple(result.metrics),
        )
        stored = outbox.finish_or_keep(self.store, artifacts, ended)  # kept on disk if the store fails
        if stored and next_state is RunState.DONE:
            # Metrics are computed off the phone's critical path; a crash before they are stored
            # leaves a DONE run without metrics, which the next start fills in (recovery).
            self._pending_metrics.append(
                self._metrics_pool.submit(
                    self._store_metrics, run.run_id, artifacts, job.gpu_load, prepared, result
                )
            )
        if result.outcome is Outcome.LOST:
            status.state = Phase.LOST
            self._event(
                "fault", f"phone lost during run: {result.error}", run_id=run.run_id, device_id=device_id
            )
        elif result.outcome is Outcome.TIMEOUT:
            self._event("timeout", result.error or "timeout", run_id=run.run_id, device_id=device_id)
        elif result.outcome is Outcome.FAILED:
            self._event("failed", result.error or "failed", run_id=run.run_id, device_id=device_id)
        if next_state is RunState.PENDING and result.outcome is not Outcome.INTERRUPTED:
            self._event(
                "retry",
                f"attempt {attempts_after} ended {result.outcome}; will retry",
                run_id=run.run_id,
                device_id=device_id,
            )
        for note in result.notes:
            self._event("note", note, run_id=run.run_id, device_id=device_id)
        if stored and self.on_finished is not None:
            self.on_finished(device_id, run, result, next_state)
        status.run_started = None

    def _watcher(
        self, prepared: PreparedPhone, run_id: str, status: PhoneStatus
    ) -> AbstractContextManager[TraceWatcher | None]:
        """A TraceWatcher on its own session when the live view asked for live telemetry."""
        if not self.live_telemetry:
            return contextlib.nullcontext()
        session = self._session(prepared.phone)
        trace = RunDir.of(run_id).file(TRACE)
        return TraceWatcher(session, trace, calibration_of(prepared.caps), status.show_readings)

    def _store_metrics(
        self, run_id: str, artifacts: Path, gpu_load: float, prepared: PreparedPhone, result: RunResult
    ) -> None:
        baseline = prepared.idle_baseline
        try:
            metrics = compute_metrics(
                artifacts,
                gpu_load,
                prepared.caps,
                discharging=result.charging_disabled is True,
                idle_power_mw=baseline.power_mw if baseline is not None else None,
                charging_disabled=result.charging_disabled,
            )
        except Exception as error:  # a metrics bug must not lose a measured run
            self._event("note", f"metrics not computed: {error}", run_id=run_id)
            return
        try:
            metrics += measurement_metrics(self.experiment, prepared, result, metrics, artifacts)
        except Exception as error:  # keep the run's own metrics whatever happens here
            self._event("note", f"validity not assessed: {error}", run_id=run_id)
        if self.store_error is None:  # else the next start computes them (recovery.backfill_metrics)
            run_store.put_metrics(self.store, run_id, metrics)

    def heartbeat_loop(self, stop: threading.Event) -> None:
        while not stop.wait(ownership.HEARTBEAT_INTERVAL_S):
            try:
                ownership.heartbeat(self.store, self.execution_id)
            except Exception:  # a busy database must not kill the heartbeat thread
                continue

    def report(self) -> SweepReport:
        counts = run_store.count_states(self.store, self.key)
        return SweepReport(
            done=counts[RunState.DONE],
            failed=counts[RunState.FAILED] + counts[RunState.SKIPPED],
            pending=counts[RunState.PENDING] + counts[RunState.RUNNING],
        )
