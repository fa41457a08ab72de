"""The sweep's one seam to the phones: what a worker does on its phone, behind a Protocol.

The scheduler decides (which run, which phone, retries, leases); a PhoneDriver acts on the phone
(recover and prepare it, measure its idle power, run one attempt, write env.json, compute the
metrics, and the recovery ladder's actions). `AdbDriver` is farm's own: the lifecycle over adb,
through the endpoint of the phone's host. A benchmark of the coordinator itself (tests/bench)
passes a driver whose phones answer at once, so the store and the scheduler are what it measures.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import adbutils

from farm.analysis.latest import Readings
from farm.device.session import DeviceSession
from farm.engine.baseline import measure_idle_baseline
from farm.engine.collect import calibration_of, compute_metrics, env_document
from farm.engine.lifecycle import execute_run, prepare_phone
from farm.engine.model import Gates, IdleBaseline, JsonObject, OnPhase, PreparedPhone, RunJob, RunResult
from farm.engine.onphone import TRACE, RunDir
from farm.engine.recovery import recover_phone
from farm.engine.watch import TraceWatcher
from farm.errors import DeviceTransientError, FarmError
from farm.experiment.model import Experiment
from farm.fleet.endpoint import Endpoint
from farm.fleet.inventory import Phone
from farm.store import Metric, Store

HEALTH_TIMEOUT_S = 10.0


class PhoneDriver(Protocol):
    """What the scheduler asks of a phone. Errors are farm's: DeviceTransientError when the phone
    dropped off (retry may help), another FarmError when it cannot be used."""

    def endpoint(self, phone: Phone) -> Endpoint: ...

    def prepare(self, phone: Phone, experiment: Experiment, store: Store) -> PreparedPhone:
        """Undo what a dead farm left on the phone, probe it, deploy the experiment's programs.
        NoBinaryForAbi: an external program has no build for the phone (it is skipped)."""
        ...

    def baseline(
        self,
        prepared: PreparedPhone,
        gates: Gates,
        store: Store,
        cancel: threading.Event,
        artifacts: Path,
    ) -> IdleBaseline: ...

    def execute(
        self,
        prepared: PreparedPhone,
        job: RunJob,
        gates: Gates,
        store: Store,
        cancel: threading.Event,
        on_phase: OnPhase,
    ) -> RunResult:
        """One attempt; the phone is restored (charging on) whatever happens."""
        ...

    def document(self, prepared: PreparedPhone, job: RunJob, result: RunResult) -> JsonObject:
        """The attempt's environment document (env.json, attempts.env_json)."""
        ...

    def metrics(self, prepared: PreparedPhone, job: RunJob, result: RunResult) -> list[Metric]:
        """The run's metrics from its artifacts (called off the phone's critical path)."""
        ...

    def watcher(
        self,
        prepared: PreparedPhone,
        run_id: str,
        on_readings: Callable[[Readings], None],
        *,
        discharging: bool = False,
    ) -> AbstractContextManager[TraceWatcher | None]:
        """Live readings of the attempt under way (the live view), on a session of its own;
        `discharging`: the run switches charging off, so its own samples may calibrate power."""
        ...

    def healthy(self, phone: Phone) -> bool:
        """Does the phone answer a trivial command within HEALTH_TIMEOUT_S?"""
        ...

    def reboot(self, phone: Phone) -> None:
        """Ask the phone to reboot (it drops off, then comes back)."""
        ...


class AdbDriver:
    """The lifecycle over adb (farm.engine.lifecycle), each phone through its host's endpoint."""

    def __init__(
        self, endpoint: Endpoint, endpoints: Mapping[str, Endpoint], *, call_timeout_s: float
    ) -> None:
        self._default = endpoint
        self._endpoints = endpoints  # by host: read at each call, so hosts that join are found
        self.call_timeout_s = call_timeout_s

    def endpoint(self, phone: Phone) -> Endpoint:
        return self._endpoints.get(phone.host, self._default)

    def session(self, phone: Phone, timeout_s: float | None = None) -> DeviceSession:
        return DeviceSession(
            self.endpoint(phone).device(phone.adb_serial),
            phone.device_id,
            default_timeout_s=timeout_s or self.call_timeout_s,
        )

    def prepare(self, phone: Phone, experiment: Experiment, store: Store) -> PreparedPhone:
        session = self.session(phone)
        recover_phone(store, session, phone.device_id)
        program = experiment.benchmark.program
        external = experiment if experiment.benchmark.external else None
        return prepare_phone(session, phone, program, store, external=external)

    def baseline(
        self, prepared: PreparedPhone, gates: Gates, store: Store, cancel: threading.Event, artifacts: Path
    ) -> IdleBaseline:
        return measure_idle_baseline(prepared, gates, store, cancel, artifacts)

    def execute(
        self,
        prepared: PreparedPhone,
        job: RunJob,
        gates: Gates,
        store: Store,
        cancel: threading.Event,
        on_phase: OnPhase,
    ) -> RunResult:
        return execute_run(prepared, job, gates, store, cancel, on_phase)

    def document(self, prepared: PreparedPhone, job: RunJob, result: RunResult) -> JsonObject:
        return env_document(prepared, job, result)

    def metrics(self, prepared: PreparedPhone, job: RunJob, result: RunResult) -> list[Metric]:
        baseline = prepared.idle_baseline
        proof = result.discharge
        return compute_metrics(
            job.artifacts,
            job.gpu_load,
            prepared.caps,
            discharging=result.charging_disabled is True and (proof is None or proof.proven),
            idle_power_mw=baseline.power_mw if baseline is not None else None,
            charging_disabled=result.charging_disabled,
            output=job.output,
            energy_invalid=proof.reason if proof is not None and not proof.proven else None,
        )

    def watcher(
        self,
        prepared: PreparedPhone,
        run_id: str,
        on_readings: Callable[[Readings], None],
        *,
        discharging: bool = False,
    ) -> AbstractContextManager[TraceWatcher | None]:
        trace = RunDir.of(run_id).file(TRACE)
        calibration = calibration_of(prepared.caps)
        return TraceWatcher(
            self.session(prepared.phone), trace, calibration, on_readings, discharging=discharging
        )

    def healthy(self, phone: Phone) -> bool:
        try:
            reply = self.session(phone, HEALTH_TIMEOUT_S).shell(["echo", "farm-ok"])
        except FarmError:
            return False
        return "farm-ok" in reply.stdout

    def reboot(self, phone: Phone) -> None:
        try:  # the `reboot:` service, not `shell reboot`: a phone whose shell hangs still takes it
            connection = self.endpoint(phone).device(phone.adb_serial).open_transport(timeout=10.0)
            with connection:
                connection.send_command("reboot:")
                connection.check_okay()
        except (adbutils.AdbError, OSError) as error:
            raise DeviceTransientError(phone.device_id, f"adb reboot failed: {error}") from error
