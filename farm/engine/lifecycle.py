"""One run on one phone: prepare -> sampler -> load -> benchmark -> stop -> collect -> restore.

`prepare_phone` runs once per phone per sweep (probe, deploy). `execute_run` runs one attempt and
returns how it ended; it never leaves charging off (farm.engine.conditions says how).

Outcomes: exit 0 -> DONE; another exit code -> FAILED (stderr kept); past run_timeout_s -> the
benchmark is killed on the phone by pid, TIMEOUT; the phone dropping off -> LOST; the cancel
event set (Ctrl-C) -> INTERRUPTED. The scheduler decides retries from the outcome.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from contextlib import AbstractContextManager

from farm.adapters import OutputError
from farm.adapters.output import stderr_tail
from farm.device import controls
from farm.device.session import DeviceSession
from farm.engine import deploy as deploy_mod
from farm.engine.collect import ARTIFACTS, collect_artifacts, env_document, environment_snapshot
from farm.engine.conditions import (
    battery_pct,
    cooldown_limit_c,
    disable_charging,
    restore_power,
    wait_for_battery,
    wait_until_cool,
)
from farm.engine.model import Gates, OnPhase, Phase, PhaseUpdate, PreparedPhone, RunJob, RunResult
from farm.engine.onphone import (
    LOAD,
    PROBE,
    SAMPLER,
    Background,
    RunDir,
    gpu_busy_path,
    last_achieved_load,
    load_argv,
    trace_sampler,
)
from farm.engine.program import benchmark_argv, read_output
from farm.engine.runscript import MEM_LINGER_S, MEM_RATE_HZ, gated_argv
from farm.engine.thermal import throttle_watch
from farm.errors import DevicePermanentError, DeviceTransientError, FarmError, StoreError
from farm.fleet.inventory import Phone
from farm.spec.model import Experiment
from farm.spec.programs import Program
from farm.store import Outcome, Store
from farm.store import devices as device_store
from farm.telemetry.probe import Capabilities, ProbeOutputError, capabilities_of
from farm.telemetry.sampler import sampler_argv

PROBE_TIMEOUT_S = 20.0


def read_probe(session: DeviceSession, phone: Phone) -> tuple[Capabilities, dict[str, object]]:
    """Run farm-probe (deployed on first use): the phone's Capabilities, and the document they were
    parsed from (what the store keeps)."""
    deployed = deploy_mod.deploy(session, [PROBE], phone.abis)
    result = session.shell([deployed[PROBE].phone_path], timeout_s=PROBE_TIMEOUT_S, check=True)
    try:
        doc = json.loads(result.stdout)
    except ValueError as error:
        raise DeviceTransientError(session.device_id, f"farm-probe printed no JSON: {error}") from error
    try:
        return capabilities_of(doc), doc
    except ProbeOutputError as error:
        raise DevicePermanentError(
            session.device_id,
            str(error),
            hint="rebuild the device agents with `make kernels` so farm-probe matches this farm",
        ) from None


def probe_phone(session: DeviceSession, phone: Phone) -> Capabilities:
    """What the phone can do (farm-probe, parsed)."""
    return read_probe(session, phone)[0]


def prepare_phone(
    session: DeviceSession,
    phone: Phone,
    program: Program,
    store: Store,
    *,
    external: Experiment | None = None,
) -> PreparedPhone:
    """Probe once, deploy the benchmark, the load generator and the sampler (content-cached).
    An external program (`external`: its experiment) brings its own binary and assets; a phone
    it has no binary for raises NoBinaryForAbi (the sweep skips the phone)."""
    caps, doc = read_probe(session, phone)
    own = [] if program is Program.EXTERNAL else [program]
    names = [*own, SAMPLER] + ([LOAD] if program != LOAD else [])
    deployed_external = None
    if program is Program.EXTERNAL:
        assert external is not None, "an external program is deployed from its experiment"
        deployed_external = deploy_mod.deploy_external(session, external, phone.abis)
    programs = deploy_mod.deploy(session, names, phone.abis)
    if deployed_external is not None:
        programs[Program.EXTERNAL.value] = deployed_external.binary
    controls.stay_awake(session, on=True)
    device_store.record_device(
        store,
        phone.device_id,
        host=phone.host,
        serial=phone.serial,
        adb_serial=phone.adb_serial,
        model=phone.model,
        abi=phone.abi,
        capabilities=doc,
        state="online",
    )
    return PreparedPhone(session, phone, caps, programs, external=deployed_external)


def settle_load(load: Background, target: float, gates: Gates, cancel: threading.Event) -> float | None:
    """Wait until gpuload reports utilisation within tolerance of the target (at least settle_s,
    at most 3x settle_s + 5 s); returns the last achieved value."""
    start = time.monotonic()
    limit_s = 3 * gates.settle_s + 5.0
    achieved = None
    while not cancel.is_set():
        elapsed = time.monotonic() - start
        achieved = last_achieved_load(load.read_stdout())
        if elapsed >= gates.settle_s and achieved is not None and abs(achieved - target) <= gates.tolerance:
            return achieved
        if elapsed >= limit_s:
            return achieved
        code = load.exit_code()
        if code is not None:
            raise FarmError(f"gpuload exited {code} before the load settled")
        cancel.wait(0.5)
    return achieved


def execute_run(
    prepared: PreparedPhone,
    job: RunJob,
    gates: Gates,
    store: Store,
    cancel: threading.Event,
    on_phase: OnPhase | None = None,
) -> RunResult:
    """One attempt of one run; the phone is restored whatever happens."""
    session = prepared.session
    result = RunResult(Outcome.FAILED)
    notify = on_phase or (lambda _update: None)
    run_dir = RunDir.of(job.run_id)
    charging_off = False
    job.artifacts.mkdir(parents=True, exist_ok=True)
    try:
        notify(PhaseUpdate(Phase.PREPARING))
        run_dir.create(session)
        level = battery_pct(prepared, unplug=gates.disable_charging)
        if level is not None and level < gates.min_battery_pct:
            notify(PhaseUpdate(Phase.CHARGING, battery_pct=level))
            level = wait_for_battery(prepared, gates, cancel)
            if level is not None and level < gates.min_battery_pct:
                result.notes.append(f"battery {level:.0f}% below the minimum {gates.min_battery_pct:.0f}%")
        result.battery_start_pct = level
        if gates.disable_charging:
            charging_off = disable_charging(prepared, store, result.notes)
        result.charging_disabled = charging_off
        notify(PhaseUpdate(Phase.COOLING, battery_pct=level))
        temp, waited = wait_until_cool(prepared, gates, cancel)
        result.cooldown_waited_s = round(waited, 3)
        result.temperature_start_c = temp
        limit_c = cooldown_limit_c(gates, prepared.idle_temperature_c)
        if temp is not None and temp > limit_c:
            result.notes.append(
                f"still {temp:.1f} °C (limit {limit_c:.1f} °C) after the "
                f"{gates.cooldown_timeout_s:.0f} s cooldown"
            )
        notify(PhaseUpdate(Phase.COOLING, temperature_c=temp))
        policy_dirs = [p.dir for p in prepared.caps.cpu_policies]
        with throttle_watch(session, policy_dirs, prepared.clocks) as watch:
            _run_measured(prepared, job, gates, run_dir, result, cancel, notify)
        result.throttle = watch.report()
    except DeviceTransientError as error:
        result.outcome, result.error = Outcome.LOST, str(error)
    except StoreError:
        raise  # the store failed, not the run: the sweep stops (the phone is restored below)
    except FarmError as error:
        result.outcome, result.error = Outcome.FAILED, str(error)
    finally:
        notify(PhaseUpdate(Phase.RESTORING))
        _restore(prepared, store, result, charging_off, gates)
        try:
            collect_artifacts(session, run_dir, job.artifacts)
        except FarmError as error:
            if result.outcome is Outcome.DONE:
                result.outcome, result.error = Outcome.LOST, f"artifacts not pulled: {error}"
        if result.outcome is Outcome.DONE:
            _check_output(job, result)
        result.environment = environment_snapshot(prepared)
        document = env_document(prepared, job, result)
        (job.artifacts / "env.json").write_text(json.dumps(document, indent=2, sort_keys=True, default=str))
    return result


def _run_measured(
    prepared: PreparedPhone,
    job: RunJob,
    gates: Gates,
    run_dir: RunDir,
    result: RunResult,
    cancel: threading.Event,
    notify: OnPhase,
) -> None:
    session = prepared.session
    programs = prepared.programs
    sampler = trace_sampler(session, run_dir, programs[SAMPLER].phone_path, prepared.caps, gates.rate_hz)
    if sampler is None:
        result.notes.append("no telemetry: the phone has no readable battery, GPU or thermal node")
    with sampler or contextlib.nullcontext():
        if job.gpu_load > 0 and LOAD in programs:
            notify(PhaseUpdate(Phase.LOADING, gpu_load_target=job.gpu_load))
            load = Background(
                session,
                run_dir,
                "gpuload",
                load_argv(
                    programs[LOAD].phone_path, job.gpu_load, gates.intensity, gpu_busy_path(prepared.caps)
                ),
            )
            with load:
                result.load_achieved = settle_load(load, job.gpu_load, gates, cancel)
                notify(PhaseUpdate(Phase.LOADING, gpu_load_achieved=result.load_achieved))
                if result.load_achieved is None or abs(result.load_achieved - job.gpu_load) > gates.tolerance:
                    result.notes.append(
                        f"background load not reached: target {job.gpu_load:g}, "
                        f"achieved {result.load_achieved}"
                    )
                _run_benchmark(prepared, job, gates, run_dir, result, cancel, notify)
                # What the load held while the benchmark ran, not only at the start.
                result.load_achieved = last_achieved_load(load.read_stdout()) or result.load_achieved
        else:
            _run_benchmark(prepared, job, gates, run_dir, result, cancel, notify)


def _memory_sampler(
    prepared: PreparedPhone, run_dir: RunDir, bench: Background
) -> AbstractContextManager[object]:
    """A second sampler that watches the benchmark's own pid (VmRSS / VmHWM) into mem.bin; it
    ends by itself shortly after the benchmark. The benchmark (gated_argv) starts once mem.bin
    exists; when the pid cannot be read it is told to go on without."""
    pid = prepared.session.program_pid(bench.exit_file)
    if pid is None:
        prepared.session.script('touch "$1"', run_dir.file("bench.go"))
        return contextlib.nullcontext()
    binary = prepared.programs[SAMPLER].phone_path
    argv = sampler_argv(binary, [], MEM_RATE_HZ, run_dir.file("mem.bin"), pid, linger_s=MEM_LINGER_S)
    return Background(prepared.session, run_dir, "memsampler", argv)


def _run_benchmark(
    prepared: PreparedPhone,
    job: RunJob,
    gates: Gates,
    run_dir: RunDir,
    result: RunResult,
    cancel: threading.Event,
    notify: OnPhase,
) -> None:
    session = prepared.session
    argv = list(benchmark_argv(prepared, job))
    result.argv = tuple(argv)
    notify(PhaseUpdate(Phase.RUNNING))
    bench = Background(session, run_dir, "bench", gated_argv(argv, run_dir))
    with bench, _memory_sampler(prepared, run_dir, bench):
        deadline = time.monotonic() + gates.run_timeout_s
        code = None
        while code is None and not cancel.is_set() and time.monotonic() < deadline:
            code = bench.wait(min(1.0, max(0.0, deadline - time.monotonic())))
        if code is None:
            session.kill(bench.pid or 0, "KILL")
            if cancel.is_set():
                result.outcome, result.error = Outcome.INTERRUPTED, "interrupted"
            else:
                result.outcome = Outcome.TIMEOUT
                result.error = (
                    f"timed out after {gates.run_timeout_s:g} s; killed on the phone (pid {bench.pid})"
                )
            return
        result.exit_code = code
        if code == 0:
            result.outcome = Outcome.DONE
        else:
            stderr = session.read_text(bench.stderr) or ""
            result.outcome = Outcome.FAILED
            if job.program is Program.EXTERNAL:
                name = prepared.programs[job.program].name
                result.error = f"{name} exited {code}: {stderr_tail(stderr)}"
            else:
                tail = stderr.strip().splitlines()
                result.error = f"{job.program} exited {code}: {tail[-1] if tail else 'no stderr'}"


def _check_output(job: RunJob, result: RunResult) -> None:
    """An external program that exited 0 but printed no usable result fails with the adapter's
    one reason (FAILED: never retried, the sweep goes on)."""
    stdout, stderr = job.artifacts / ARTIFACTS["bench.out"], job.artifacts / ARTIFACTS["bench.err"]
    try:
        read_output(
            job,
            stdout.read_text(errors="replace") if stdout.is_file() else "",
            stderr.read_text(errors="replace") if stderr.is_file() else "",
        )
    except OutputError as error:
        result.outcome, result.error = Outcome.FAILED, str(error)


def _restore(
    prepared: PreparedPhone, store: Store, result: RunResult, charging_off: bool, gates: Gates
) -> None:
    """Charging back on and Android's battery state reset; failures are kept as notes (the store
    marker stays, so recovery retries on the next start)."""
    try:
        if restore_power(prepared, store, unplugged=gates.disable_charging, charging_off=charging_off):
            result.charging_restored = True
    except FarmError as error:
        result.notes.append(f"charging not restored yet: {error}")
        result.charging_restored = False


__all__ = ["execute_run", "gated_argv", "prepare_phone", "probe_phone"]
