"""The scheduler: runs -> phones. One worker thread per leased phone, one run at a time per phone,
all phones in parallel; retries decided from how an attempt ended.

Pinned runs (the default) are taken by the worker of their phone in planned order; spread runs
(`devices.spread: true`) by whichever phone is free (an atomic PENDING -> RUNNING claim in the
store). A phone that drops off climbs the recovery ladder (farm.engine.ladder: wait and
reconnect, reboot, power-cycle, quarantine); its run goes back to PENDING and is retried when the
phone is back (or by another phone when spread). Everything a worker does goes through the store
first, so a killed farm resumes where it was.

Several coordinators (farm processes on one machine or many, one store) share one experiment:
each leases the phones it can reach, claims runs only on phones it holds (one conditional
statement), and its supervisor (farm.engine.coordination) drops a phone whose lease was taken
over, requeues a dead coordinator's runs and lets phones join while the sweep runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from contextlib import AbstractContextManager
from pathlib import Path

from farm import crashlog
from farm.engine.attempt_rules import AttemptPolicy, judge_attempt, not_stored_event
from farm.engine.cancel import PhoneCancel
from farm.engine.clocks import ClocksRefused, apply_clocks, restore_clocks
from farm.engine.conditions import read_temperature_c
from farm.engine.coordination import Supervisor
from farm.engine.deploy import NoBinaryForAbi
from farm.engine.driver import AdbDriver, PhoneDriver
from farm.engine.ladder import Ladder
from farm.engine.measurement import energy_window_of, layers_of, measurement_metrics
from farm.engine.model import (
    Gates,
    IdleBaseline,
    OnFinished,
    Phase,
    PhaseUpdate,
    PreparedPhone,
    RunJob,
    RunResult,
)
from farm.engine.program import cold_files, job_arguments
from farm.engine.tuning import tune_phone
from farm.engine.watch import TraceWatcher
from farm.engine.workers import PhoneStatus, Worker
from farm.errors import DeviceTransientError, FarmError, StoreError
from farm.experiment.model import Experiment
from farm.fleet.endpoint import Endpoint
from farm.fleet.inventory import Phone
from farm.store import Outcome, RunState, Store, events, outbox, ownership, run_artifacts_dir
from farm.store import devices as device_store
from farm.store import runs as run_store
from farm.store.events import EventKind, EventPayload
from farm.store.layers import put_layers
from farm.store.run_dirs import RunFolderRefused, make_run_dir
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
        max_file_bytes=experiment.limits.run_file_bytes,
    )


class Sweep:
    """One `farm run` execution over the phones it leases.

    Phones join while it runs (`join_phones`: a lab host that came back, a phone another
    coordinator left); each has a Worker thread. farm.engine.coordination's supervisor keeps the
    execution's heartbeat, drops phones whose lease was lost, requeues the runs of coordinators
    that died, and says when the sweep is over (`finished`)."""

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
        *,
        driver: PhoneDriver | None = None,
        candidates: Callable[[], Sequence[Phone]] | None = None,
        plan_phones: Callable[[Sequence[Phone]], Sequence[str]] | None = None,
        ladder: Ladder | None = None,
    ) -> None:
        self.experiment = experiment
        self.key = experiment_key
        self.initial = list(phones)  # eligible at start: leased in start() where free
        self.endpoint = endpoint
        self.endpoints = endpoints if endpoints is not None else {}  # by host; may grow (hosts back)
        self.store = store
        self.results = results
        self.execution_id = execution_id
        self.cancel = cancel
        self.on_finished = on_finished
        self.lost_wait_s = lost_wait_s
        self.live_telemetry = live_telemetry  # poll each running phone's trace for the live view
        self.driver: PhoneDriver = driver or AdbDriver(
            endpoint, self.endpoints, call_timeout_s=experiment.timeouts.device_call_timeout_s
        )
        self.candidates = candidates or (lambda: self.initial)
        self.plan_phones = plan_phones or (lambda _phones: ())
        self.ladder = ladder or Ladder(reboot_allowed=experiment.retries.reboot)
        self.gates = gates_of(experiment)
        self.status: dict[str, PhoneStatus] = {}
        self.workers: dict[str, Worker] = {}
        self._joined: list[Phone] = []
        self._lock = threading.Lock()
        self.planned: set[str] = {p.device_id for p in phones}  # phones whose runs are in the store
        self.planned_run_ids: list[str] = []  # runs planned for phones that joined later
        self.excluded: dict[str, str] = {}  # device_id -> why it takes no more runs this sweep
        self._cells = {cell.cell_id: cell for cell in experiment.cells()}
        self.problems: list[str] = []  # phones that could not be used, and why (for the summary)
        self.store_error: StoreError | None = None  # the first store failure; it stopped the sweep
        self._metrics_pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics")
        self._pending_metrics: list[futures.Future[None]] = []
        self.baselines: dict[str, IdleBaseline] = {}  # device_id -> this session's idle power
        self.finished = threading.Event()  # set by the supervisor: nothing left for this sweep
        self.worker_ended = threading.Event()  # a worker stopped: time to look for phones again
        self._supervisor: Supervisor | None = None

    @property
    def phones(self) -> list[Phone]:
        """Every phone that worked in this sweep so far, by device id."""
        with self._lock:
            return sorted(self._joined, key=lambda p: p.device_id)

    # -- running --------------------------------------------------------------------------------

    def start(self) -> int:
        """Lease the free eligible phones with work, start their workers and the supervisor;
        returns how many phones joined (0: every one is busy elsewhere, or nothing is left)."""
        joined = self.join_phones(self.initial, announce=False)
        self._supervisor = Supervisor(self)
        self._supervisor.start()
        return joined

    def close(self) -> None:
        """Stop the supervisor (after the workers ended) and release every lease still held."""
        if self._supervisor is not None:
            self._supervisor.stop()
        self._metrics_pool.shutdown(wait=False)

    def active_workers(self) -> list[Worker]:
        with self._lock:
            return [w for w in self.workers.values() if w.active]

    def join_phones(self, phones: Sequence[Phone], *, announce: bool = True) -> int:
        """Start a worker for each phone that is free (or ours), usable and has work here."""
        if self.cancel.is_set():
            return 0
        holders = {lease.device_id: lease for lease in ownership.leases(self.store)}
        fresh = [p for p in phones if p.device_id not in self.planned]
        fresh = [p for p in fresh if _free_for(holders.get(p.device_id), self.execution_id)]
        if fresh:
            self.planned_run_ids.extend(self.plan_phones(fresh))
            self.planned.update(p.device_id for p in fresh)
        joined = 0
        # In random order: coordinators that start together interleave their claims on a shared
        # pool instead of the first one leasing every phone and the others idling as standbys.
        for phone in random.sample(list(phones), len(phones)):
            device_id = phone.device_id
            current = self.workers.get(device_id)
            if (current is not None and current.active) or device_id in self.excluded:
                continue
            if device_id not in self.planned:
                continue
            if not _free_for(holders.get(device_id), self.execution_id):
                continue
            if not run_store.has_pending(self.store, self.key, device_id):
                continue
            if not ownership.acquire_lease(self.store, device_id, self.execution_id):
                continue
            self._start_worker(phone)
            joined += 1
            if announce:
                self.event(EventKind.JOINED, "phone joined the sweep", device_id=device_id)
        return joined

    def _start_worker(self, phone: Phone) -> None:
        worker = Worker(phone, PhoneCancel(self.cancel))
        with self._lock:
            self.workers[phone.device_id] = worker
            self.status.setdefault(phone.device_id, PhoneStatus(phone.device_id))
            if all(p.device_id != phone.device_id for p in self._joined):
                self._joined.append(phone)
        thread = threading.Thread(
            target=self._worker, args=(worker,), name=f"phone-{phone.device_id}", daemon=True
        )
        thread.start()

    def drop(self, device_id: str, why: str) -> None:
        """Stop using a phone at once (its lease was taken over): the run in flight is interrupted
        (its result is refused if the run was requeued meanwhile) and the phone restored."""
        worker = self.workers.get(device_id)
        if worker is None or not worker.active or worker.dropped is not None:
            return
        worker.dropped = why
        worker.holds_lease = False
        worker.cancel.set()
        self.event(EventKind.LEASE, f"stopped using the phone: {why}", device_id=device_id)

    def alive(self) -> bool:
        return not self.finished.is_set() or not all(f.done() for f in self._pending_metrics)

    def join(self, timeout_s: float | None = None) -> None:
        """Wait for the sweep to end. Events, not Thread.join: a join interrupted by Ctrl-C can
        return at once when called again (CPython), and we must wait for the phones' restore."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.finished.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        futures.wait(list(self._pending_metrics), timeout=remaining)

    def event(
        self,
        kind: EventKind,
        message: str,
        *,
        run_id: str | None = None,
        device_id: str | None = None,
        payload: EventPayload | None = None,
    ) -> None:
        events.emit(
            self.store,
            kind,
            message,
            experiment=self.key,
            run_id=run_id,
            device_id=device_id,
            payload=payload,
        )

    @property
    def attempt_policy(self) -> AttemptPolicy:
        """The experiment's rules for ending an attempt (retries, throttling)."""
        return AttemptPolicy(
            max_attempts=self.experiment.retries.max_attempts,
            retry_on=frozenset(self.experiment.retries.on),
            on_throttle=self.experiment.conditions.on_throttle,
        )

    def has_work(self, device_id: str) -> bool:
        return run_store.has_pending(self.store, self.key, device_id)

    def _worker(self, worker: Worker) -> None:
        phone = worker.phone
        try:
            self._work(worker)
        finally:
            if worker.holds_lease:
                worker.holds_lease = False
                with contextlib.suppress(StoreError):
                    ownership.release_lease(self.store, phone.device_id, self.execution_id)
            worker.done.set()
            self.worker_ended.set()

    def _work(self, worker: Worker) -> None:
        phone = worker.phone
        status = self.status[phone.device_id]
        prepared: PreparedPhone | None = None
        try:
            while not worker.cancel.is_set():
                if prepared is None:
                    if not self.has_work(phone.device_id):
                        break
                    status.state = Phase.PREPARING
                    prepared = self.driver.prepare(phone, self.experiment, self.store)
                    self._deploy_event(prepared)
                    device_store.clear_quarantine(self.store, phone.device_id)
                    prepared = self._with_clocks(prepared)
                    prepared = self._with_tuning(prepared, status)
                    prepared = self._with_baseline(prepared, status, worker.cancel)
                claimed = run_store.claim_next(
                    self.store,
                    self.key,
                    self.execution_id,
                    phone.device_id,
                    f"{self.key}/",
                    on_lease=True,
                )
                if claimed is None:
                    break  # nothing left for this phone, or its lease is gone
                self._attempt(prepared, claimed[0], claimed[1], status, worker.cancel)
                if status.state is Phase.LOST:
                    if not self._recover(worker, status):
                        return
                    prepared = None  # re-probe and re-check the deployment on a phone that came back
        except StoreError as error:
            self._store_failed(phone, status, error)
        except DeviceTransientError as error:
            self.event(EventKind.FAULT, f"phone lost while preparing: {error}", device_id=phone.device_id)
            status.state = Phase.LOST
            if self._recover(worker, status):
                self._work(worker)
        except (ClocksRefused, NoBinaryForAbi) as error:
            status.state = Phase.FAILED
            self.event(EventKind.ERROR, f"phone skipped: {error}", device_id=phone.device_id)
            self.problems.append(str(error))  # it names the phone
            self._skip_bound_runs(phone, str(error))
        except FarmError as error:
            status.state = Phase.FAILED
            self.event(EventKind.ERROR, f"phone unusable: {error}", device_id=phone.device_id)
            self.problems.append(f"{phone.device_id}: {error}")
            self.excluded[phone.device_id] = str(error)
        finally:
            if prepared is not None:
                self._restore_clocks(prepared)
            if worker.dropped is not None:
                status.state = Phase.TAKEN
            elif status.state not in (Phase.LOST, Phase.FAILED, Phase.QUARANTINED):
                status.state = Phase.IDLE
            status.cell = None

    def _with_tuning(self, prepared: PreparedPhone, status: PhoneStatus) -> PreparedPhone:
        """benchmark.tune: each gpu workload tuned once on this phone (engine.tuning), under the
        sweep's clocks; what it chose goes with every run (env.json `tuned`) and in one event."""
        benchmark = self.experiment.benchmark
        if not benchmark.tune:
            return prepared
        status.state = Phase.PREPARING
        timeout_s = self.experiment.timeouts.run_timeout_s + (benchmark.tune_budget_s or 30.0)
        choices = tune_phone(prepared, self.experiment, timeout_s, benchmark.tune_budget_s)
        for choice in choices:
            shown = choice.error or ", ".join(
                f"{k}={v}" for k, v in choice.fields.items() if k != "tune_cache_path"
            )
            self.event(
                EventKind.TUNE,
                f"{' '.join(choice.workload_args)}: {shown}",
                device_id=prepared.phone.device_id,
            )
        return dataclasses.replace(prepared, tuned=choices)

    def _deploy_event(self, prepared: PreparedPhone) -> None:
        """One `deploy` event per prepared phone: what was copied (a phone that already has the
        same sha256 of everything gets `nothing pushed`)."""
        pushed = [d.name for d in prepared.programs.values() if d.pushed]
        if prepared.external is not None:
            pushed += [f"asset {d.name}" for d in prepared.external.assets.values() if d.pushed]
        message = f"pushed {', '.join(pushed)}" if pushed else "nothing pushed (the phone has every sha256)"
        self.event(EventKind.DEPLOY, message, device_id=prepared.phone.device_id)

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
        self.event(EventKind.CLOCKS, "; ".join([message, *applied.notes]), device_id=prepared.phone.device_id)
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
            self.event(
                EventKind.WARNING, f"clocks not restored yet: {error}", device_id=prepared.phone.device_id
            )

    def _recover(self, worker: Worker, status: PhoneStatus) -> bool:
        """A phone that dropped off: the recovery ladder (farm.engine.ladder), bounded."""
        if worker.cancel.is_set():
            return False
        back = self.ladder.climb(self, worker, status)
        if back:
            status.state = Phase.IDLE
        return back

    def _store_failed(self, phone: Phone, status: PhoneStatus, error: StoreError) -> None:
        """The store failed (full, read-only, server gone): stop the whole sweep the clean way
        (the other phones interrupt their runs and are restored); nothing more is written here.
        A finished attempt was kept in its run folder (farm.store.outbox) for the next start."""
        status.state = Phase.FAILED
        self.problems.append(f"{phone.device_id}: {error}")
        self.stop_for_store(error)

    def stop_for_store(self, error: StoreError) -> None:
        """Stop the sweep the clean way because the store failed; the first failure is the one said."""
        if self.store_error is None:
            self.store_error = error
        self.cancel.set()

    def exclude(self, device_id: str, reason: str, *, problem: str) -> None:
        """No more runs on this phone this sweep (`reason`); `problem` goes into the summary."""
        self.excluded[device_id] = reason
        self.problems.append(problem)

    def _with_baseline(
        self, prepared: PreparedPhone, status: PhoneStatus, cancel: threading.Event
    ) -> PreparedPhone:
        """The phone's idle baseline, measured before its first run of this `farm run` (a phone
        that comes back after a drop keeps the one it had)."""
        device_id = prepared.phone.device_id
        baseline = self.baselines.get(device_id)
        if baseline is None:
            status.state = Phase.BASELINE
            artifacts = self.results / self.key / "idle" / device_id.replace("/", "_")
            baseline = self.driver.baseline(prepared, self.gates, self.store, cancel, artifacts)
            self.baselines[device_id] = baseline
            if baseline.power_mw is not None:
                message = f"idle power {baseline.power_mw:.1f} mW ({baseline.readings} gauge readings)"
            else:
                message = baseline.note or "no idle baseline"
            kind = (
                EventKind.BASELINE
                if baseline.power_mw is not None or baseline.note is None
                else EventKind.QUALITY
            )
            self.event(kind, message, device_id=device_id, payload=baseline)
        return dataclasses.replace(prepared, idle_baseline=baseline)

    def wait_for_phone(self, worker: Worker, status: PhoneStatus, timeout_s: float) -> bool:
        """Wait (bounded) until a lost phone is listed online again; stop waiting early when
        nothing is left for it (its runs were taken by equivalent phones) or it must stop."""
        phone = worker.phone
        status.state = Phase.OFFLINE
        endpoint = self.driver.endpoint(phone)
        deadline = time.monotonic() + timeout_s
        while True:
            if worker.cancel.is_set() or not self.has_work(phone.device_id):
                return False
            try:
                endpoint.wait_online(
                    phone.adb_serial, phone.device_id, max(0.1, min(LOST_WAIT_SLICE_S, timeout_s))
                )
                return True
            except FarmError as error:
                if time.monotonic() >= deadline:
                    self.event(
                        EventKind.FAULT, f"phone did not come back: {error}", device_id=phone.device_id
                    )
                    return False

    def _attempt(
        self,
        prepared: PreparedPhone,
        run: StoredRun,
        attempt: int,
        status: PhoneStatus,
        cancel: threading.Event,
    ) -> None:
        device_id = prepared.phone.device_id
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
        try:
            artifacts = make_run_dir(self.results, self.key, run.run_id)
        except RunFolderRefused as error:  # nothing is written through a planted link
            run_store.finish(
                self.store, run.run_id, attempt, Outcome.FAILED, next_state=RunState.FAILED, error=str(error)
            )
            return
        args, env = job_arguments(
            self.experiment, cell, prepared, energy_window_of(self.experiment, prepared).min_seconds
        )
        job = RunJob(
            run_id=run.run_id,
            experiment_key=self.key,
            program_args=args,
            program=self.experiment.benchmark.program,
            gpu_load=self.experiment.gpu_load_of(cell),
            artifacts=artifacts,
            env=env,
            output=self.experiment.benchmark.output,
            cold_files=cold_files(self.experiment, cell, prepared),
        )
        status.cell = cell.label(self.experiment.factor_names)
        status.run_started = time.time()

        try:
            with self._watcher(prepared, run.run_id, status) as watcher:

                def on_phase(update: PhaseUpdate) -> None:
                    status.apply(update)
                    if watcher is not None:
                        watcher.follow(update.phase)

                result = self.driver.execute(prepared, job, self.gates, self.store, cancel, on_phase)
        except StoreError:
            raise  # not the run's fault: the sweep stops, the run is requeued at the next start
        except Exception as error:  # a bug in farm: record it on the run rather than leave it RUNNING
            stack_at = crashlog.record(error, f"run {run.run_id} on {prepared.phone.device_id}")
            result = RunResult(
                Outcome.FAILED, error=f"internal error: {type(error).__name__}: {error} (stack in {stack_at})"
            )
        status.gpu_load_achieved = result.load_achieved
        status.live = None
        end = judge_attempt(
            result.outcome,
            result.error,
            result.throttle,
            [*result.notes, *([result.load_note] if result.load_note else [])],
            attempts_after=run.attempts + 1,
            policy=self.attempt_policy,
        )
        result.outcome, result.error = end.outcome, end.error  # as stored and as on_finished sees it
        ended = outbox.PendingResult(
            run.run_id,
            attempt,
            end.outcome,
            end.next_state,
            error=end.error,
            exit_code=result.exit_code,
            load_target=job.gpu_load,
            load_achieved=result.load_achieved,
            env=self.driver.document(prepared, job, result),
            metrics=tuple(result.metrics),
        )
        stored = outbox.finish_or_keep(self.store, artifacts, ended)  # kept on disk if the store fails
        if stored and end.wants_metrics:
            # Metrics are computed off the phone's critical path; a crash before they are stored
            # leaves a DONE run without metrics, which the next start fills in (recovery).
            self._pending_metrics.append(
                self._metrics_pool.submit(self._store_metrics, run.run_id, prepared, job, result)
            )
        if end.phone_lost:
            status.state = Phase.LOST
        if end.phone_answered:
            self.ladder.reset(device_id)  # the phone answered to the end: its ladder starts over
        refused = None if stored else not_stored_event(end)
        for planned in (*end.events, *([refused] if refused is not None else [])):
            self.event(planned.kind, planned.message, run_id=run.run_id, device_id=device_id)
        if stored and self.on_finished is not None:
            self.on_finished(device_id, run, result, end.next_state)
        status.run_started = None

    def _watcher(
        self, prepared: PreparedPhone, run_id: str, status: PhoneStatus
    ) -> AbstractContextManager[TraceWatcher | None]:
        """A TraceWatcher on its own session when the live view asked for live telemetry."""
        if not self.live_telemetry:
            return contextlib.nullcontext()
        return self.driver.watcher(
            prepared, run_id, status.show_readings, discharging=self.gates.disable_charging
        )

    def _store_metrics(self, run_id: str, prepared: PreparedPhone, job: RunJob, result: RunResult) -> None:
        try:
            metrics = self.driver.metrics(prepared, job, result)
        except Exception as error:  # a metrics bug must not lose a measured run
            self.event(EventKind.NOTE, f"metrics not computed: {error}", run_id=run_id)
            return
        try:
            metrics += measurement_metrics(self.experiment, prepared, result, metrics, job.artifacts)
        except Exception as error:  # keep the run's own metrics whatever happens here
            self.event(EventKind.NOTE, f"validity not assessed: {error}", run_id=run_id)
        if self.store_error is None:  # else the next start computes them (recovery.backfill_metrics)
            run_store.put_metrics(self.store, run_id, metrics)
            put_layers(self.store, run_id, layers_of(job.artifacts))


def _free_for(holder: ownership.Lease | None, execution_id: int) -> bool:
    """May this execution take the phone? Yes when nobody alive holds it, or it holds it itself."""
    return holder is None or holder.execution_id == execution_id
