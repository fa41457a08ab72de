"""One run on one phone: prepare -> (one conversation with the run script) -> store the files.

`prepare_phone` runs once per phone per sweep (probe, deploy, the run script). `execute_run` runs
one attempt and returns how it ended: the whole attempt is one shell stream with
device_agents/run/farm-run.sh (run folder, battery, charging off, cooldown, sampler, load settle,
benchmark, stop, restore, environment, the run's files), steered by farm.engine.steering. In
steady state that is one adb round trip per run; a stop file (cancel, a host-side timeout) and a
host-side restore when the script could not say it restored charging are the only others.

Charging: the store marker is written BEFORE the script switches charging off and cleared only
once the script says it is back on (verified), or the host restored it itself; a crash anywhere
in between leaves the marker, which the next farm process repairs (farm.engine.recovery).

Outcomes: exit 0 -> DONE; another exit code -> FAILED (stderr kept); past run_timeout_s -> the
benchmark is killed on the phone, TIMEOUT; the phone dropping off or going silent longer than the
call timeout -> LOST; the cancel event set (Ctrl-C) -> INTERRUPTED. The scheduler decides retries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Callable
from enum import Enum
from pathlib import Path

from farm import safe_json
from farm.adapters import OutputError
from farm.adapters.output import stderr_tail
from farm.device import controls
from farm.device.controls import ChargingControl
from farm.device.session import DeviceSession
from farm.engine import deploy as deploy_mod
from farm.engine.clockhold import Reapplied, clocks_held
from farm.engine.collect import ARTIFACTS, discharge_of, env_document, parse_environment
from farm.engine.conditions import (
    charging_control,
    cooldown_limit_c,
    mark_screen,
    release_screen_marker,
    restore_power,
)
from farm.engine.conversation import FileTooLarge, converse
from farm.engine.model import Gates, OnPhase, Phase, PhaseUpdate, PreparedPhone, RunJob, RunResult
from farm.engine.onphone import LOAD, PAGECACHE, PROBE, SAMPLER, RunDir, last_achieved_load
from farm.engine.pagecache import page_cache_of
from farm.engine.program import benchmark_argv, read_output
from farm.engine.runscript import (
    host_root_way,
    install_run_script,
    run_script_argv,
    steering_plan,
)
from farm.engine.steering import Ask, BenchEnd, Block, Ended, Event, Question, RunReport, Started, Steering
from farm.engine.thermal import ThrottleReport, hal_temperature_trace, judge
from farm.errors import DevicePermanentError, DeviceTransientError, EnvironmentProblem, FarmError, StoreError
from farm.experiment.model import Experiment
from farm.experiment.programs import Program
from farm.fleet.inventory import Phone, check_identity
from farm.store import Outcome, Store
from farm.store import devices as device_store
from farm.store.run_dirs import create_file
from farm.telemetry.losses import lost_telemetry
from farm.telemetry.opencl import parse_cl_devices
from farm.telemetry.probe import OPENCL_DEVICES_KEY, Capabilities, ProbeOutputError, capabilities_of
from farm.telemetry.sampler import default_sources

PROBE_TIMEOUT_S = 20.0
RUN_SCRIPT_FACT = "run_script"  # session.facts: the run script's phone path, once installed
STDERR_TAIL_BYTES = 8192  # what a failed run's reason reads of the program's stderr
LOAD_TAIL_BYTES = 65536  # gpuload's last reports (one short JSON line each)


def read_probe(session: DeviceSession, phone: Phone) -> tuple[Capabilities, dict[str, object]]:
    """Run farm-probe (deployed on first use): the phone's Capabilities, and the document they were
    parsed from (what the store keeps)."""
    deployed = deploy_mod.deploy(session, [PROBE], phone.abis)
    result = session.shell([deployed[PROBE].phone_path], timeout_s=PROBE_TIMEOUT_S, check=True)
    try:
        doc = safe_json.loads(result.stdout)
    except ValueError as error:
        raise DeviceTransientError(session.device_id, f"farm-probe printed no JSON: {error}") from error
    doc[OPENCL_DEVICES_KEY] = _list_opencl_devices(session, phone)
    try:
        return capabilities_of(doc), doc
    except ProbeOutputError as error:
        raise DevicePermanentError(
            session.device_id,
            str(error),
            hint="rebuild the device agents with `make kernels` so farm-probe matches this farm",
        ) from None


def _list_opencl_devices(session: DeviceSession, phone: Phone) -> list[dict[str, object]] | None:
    """The OpenCL devices the load generator lists, loading OpenCL as every farm program does
    (a library file proves nothing); None when there is no build for the phone's ABI or the
    listing says nothing either way."""
    try:
        deployed = deploy_mod.deploy(session, [LOAD], phone.abis)
    except EnvironmentProblem:
        return None
    result = session.shell([deployed[LOAD].phone_path, "--list-devices"], timeout_s=PROBE_TIMEOUT_S)
    devices = parse_cl_devices(result.stdout, result.exit_code)
    return None if devices is None else [d.to_json() for d in devices]


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
    """Probe once, deploy the benchmark, the load generator, the sampler and the run script
    (content-cached).
    An external program (`external`: its experiment) brings its own binary and assets; a phone
    it has no binary for raises NoBinaryForAbi (the sweep skips the phone); a phone that is not
    the one the store knows at its identity raises IdentityMismatch before anything is deployed."""
    stored = device_store.identity_of(store, phone.device_id)
    if stored is not None:
        check_identity(phone, stored.model, stored.abi)
    caps, doc = read_probe(session, phone)
    own = [] if program is Program.EXTERNAL else [program]
    names = [*own, SAMPLER] + ([LOAD] if program != LOAD else [])
    if external is not None and external.benchmark.cold_files:
        names.append(PAGECACHE)
    deployed_external = None
    if program is Program.EXTERNAL:
        assert external is not None, "an external program is deployed from its experiment"
        deployed_external = deploy_mod.deploy_external(session, external, phone.abis)
    programs = deploy_mod.deploy(session, names, phone.abis)
    if deployed_external is not None:
        programs[Program.EXTERNAL.value] = deployed_external.binary
    controls.stay_awake(session, on=True)
    session.facts[RUN_SCRIPT_FACT] = install_run_script(session)
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
    device_id = prepared.phone.device_id
    result = RunResult(Outcome.FAILED)
    notify = on_phase or (lambda _update: None)
    run_dir = RunDir.of(job.run_id)
    steering = Steering(steering_plan(prepared, job, gates))
    control = charging_control(prepared.caps) if gates.disable_charging else None
    marked = False
    lost: str | None = None
    job.artifacts.mkdir(parents=True, exist_ok=True)
    try:
        notify(PhaseUpdate(Phase.PREPARING))
        script = session.facts.get(RUN_SCRIPT_FACT)
        if not isinstance(script, str):
            script = session.facts[RUN_SCRIPT_FACT] = install_run_script(session)
        root_way = session.facts.get("root_write")
        screen_restore = mark_screen(prepared, store)
        argv = run_script_argv(
            script,
            prepared,
            job,
            gates,
            run_dir,
            root_way=root_way if isinstance(root_way, str) else None,
            screen_restore=screen_restore,
        )
        result.argv = tuple(benchmark_argv(prepared, job))
        if control is not None:
            device_store.mark_charging_disabled(store, device_id, control.node, control.enable_value)
            marked = True
        with session.stream(argv) as stream:
            files = converse(
                stream,
                steering,
                cancel=cancel,
                run_timeout_s=gates.run_timeout_s,
                request_stop=lambda: _request_stop(session, run_dir),
                on_event=_phase_notifier(notify, steering, gates),
                keep={phone: job.artifacts / local for phone, local in ARTIFACTS.items()},
                max_file_bytes=gates.max_file_bytes,
            )
        _outcome(prepared, job, gates, steering.report, files, cancel, result)
    except DeviceTransientError as error:
        result.outcome, result.error = Outcome.LOST, str(error)
        lost = str(error)
    except StoreError:
        raise  # the store failed, not the run: the sweep stops (the phone is restored below)
    except FarmError as error:
        result.outcome, result.error = Outcome.FAILED, str(error)
    finally:
        notify(PhaseUpdate(Phase.RESTORING))
        report = steering.report
        _gates_of(prepared, job, gates, report, control, result)
        _restore(prepared, store, report, marked, gates, result)
        release_screen_marker(prepared, store, report.screen_restored, result.notes)
        if report.root_way is not None and host_root_way(report.root_way) is not None:
            session.facts["root_write"] = host_root_way(report.root_way)
        result.throttle = _throttle(prepared, report)
        if result.charging_disabled:
            result.discharge = discharge_of(report.battery_after_switch, report.battery_at_end, job.artifacts)
        if prepared.clocks is not None:
            result.clock_hold = clocks_held(report.throttle_samples, prepared.clocks.readback)
        if result.clock_hold is not None and not result.clock_hold.held:
            drifts = "; ".join(d.describe() for d in result.clock_hold.drifts)
            result.notes.append(f"clock pins did not hold: {drifts}")
        repinned = report.repinned
        if result.clock_hold is not None and repinned is not None:
            again = Reapplied(repinned.at_ms / 1000, repinned.how, repinned.nodes, report.repin_tries)
            result.clock_hold = dataclasses.replace(result.clock_hold, reapplied=again)
            result.notes.append(again.describe())
        result.affinity = report.affinity
        if job.cold_files:
            result.page_cache = page_cache_of(job.cold_files, report.page_cache_drop, report.page_cache_end)
            reason = result.page_cache.cold_reason()
            if reason is not None:
                result.notes.append(f"not a cold start: {reason}")
        result.temperature_trace = hal_temperature_trace(report.throttle_samples)
        narrowed = report.affinity.note() if report.affinity is not None else None
        if narrowed is not None:
            result.notes.append(narrowed)
        if report.environment_text is not None:
            result.environment = parse_environment(report.environment_text)
        else:
            result.environment = parse_environment("", error=lost or "the run script did not get that far")
        if result.outcome is Outcome.DONE:
            _check_output(job, result)
        document = env_document(prepared, job, result)
        with create_file(job.artifacts / "env.json") as handle:
            handle.write(json.dumps(document, indent=2, sort_keys=True, default=str).encode())
    return result


def _phase_notifier(notify: OnPhase, steering: Steering, gates: Gates) -> Callable[[Event], None]:
    """The scheduler's phase updates (live view, `farm status`) from the script's events."""

    entered_cooling = False

    def on_event(event: Event) -> None:
        nonlocal entered_cooling
        report = steering.report
        match event:
            case Block(name="temp") if not entered_cooling:  # entering the gate (its first reading)
                entered_cooling = True
                notify(PhaseUpdate(Phase.COOLING, battery_pct=report.battery_last_pct))
            case Block(name="battery") if (report.battery_last_pct or 100.0) < gates.min_battery_pct:
                notify(PhaseUpdate(Phase.CHARGING, battery_pct=report.battery_last_pct))
            case Ask(question=Question.COOL):
                notify(PhaseUpdate(Phase.COOLING, temperature_c=report.temperature_start_c))
            case Started(name="load"):
                notify(PhaseUpdate(Phase.LOADING, gpu_load_target=steering.plan.load_target))
            case Ask(question=Question.SETTLE):
                notify(PhaseUpdate(Phase.LOADING, gpu_load_achieved=report.load_achieved))
            case Started(name="bench"):
                notify(PhaseUpdate(Phase.RUNNING))
            case Ended():
                notify(PhaseUpdate(Phase.RESTORING))
            case _:
                pass

    return on_event


def _request_stop(session: DeviceSession, run_dir: RunDir) -> None:
    """Cancel or a host-side timeout: the script's stop file (a second, short call)."""
    with contextlib.suppress(FarmError):  # the phone is gone: the conversation's own read says so
        session.script('touch "$1"', run_dir.file("farm.stop"), timeout_s=10.0)


def _tail(path: Path | None, size: int = STDERR_TAIL_BYTES) -> str:
    """The end of a run's file (its start may be megabytes the phone wrote)."""
    if path is None:
        return ""
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - size))
        return handle.read().decode("utf-8", "replace")


def _outcome(
    prepared: PreparedPhone,
    job: RunJob,
    gates: Gates,
    report: RunReport,
    files: dict[str, Path],
    cancel: threading.Event,
    result: RunResult,
) -> None:
    """How the attempt ended, from what the script said (exit code, timeout, stop)."""
    if report.load_exit_code is not None:
        raise FarmError(f"gpuload exited {report.load_exit_code} before the load settled")
    if report.oversize:
        size, name = max((size, name) for name, size in report.oversize)
        raise FileTooLarge(
            f"{name} is {size} bytes, over the {gates.max_file_bytes} bytes a run's file may be "
            "(limits.run_file_mb); it was left on the phone"
        )
    load = files.get("gpuload.out")
    if load is not None:  # what the load held while the benchmark ran, not only at the start
        result.load_achieved = last_achieved_load(_tail(load, LOAD_TAIL_BYTES)) or report.load_achieved
    end = report.bench_end
    if end is None or (end.how is BenchEnd.STOPPED and cancel.is_set()):
        result.outcome, result.error = Outcome.INTERRUPTED, "interrupted"  # stopped at a gate, or Ctrl-C
        return
    if end.how is not BenchEnd.EXITED:
        pid = report.started.get("bench")
        result.outcome = Outcome.TIMEOUT
        result.error = f"timed out after {gates.run_timeout_s:g} s; killed on the phone (pid {pid})"
        return
    result.exit_code = end.exit_code
    if end.exit_code == 0:
        result.outcome = Outcome.DONE
        return
    stderr = _tail(files.get("bench.err"))
    result.outcome = Outcome.FAILED
    if job.program is Program.EXTERNAL:
        name = prepared.programs[job.program].name
        result.error = f"{name} exited {end.exit_code}{killed_by(end.exit_code)}: {stderr_tail(stderr)}"
    else:
        tail = stderr.strip().splitlines()
        result.error = f"{job.program} exited {end.exit_code}: {tail[-1] if tail else 'no stderr'}"


# Signals a program on a phone is killed with, and who sends them.
_SIGNALS = {
    9: "SIGKILL: the kernel's out-of-memory killer, Android's low-memory killer, or a kill -9",
    6: "SIGABRT: the program aborted (an assertion or abort())",
    11: "SIGSEGV: the program crashed (invalid memory access)",
    15: "SIGTERM",
}


def killed_by(exit_code: int | None) -> str:
    """` (killed by SIGNAL: who sends it)` for a shell exit status 128 + signal, else ''."""
    if exit_code is None or not 128 < exit_code < 160:
        return ""
    signal = exit_code - 128
    return f" (killed by {_SIGNALS.get(signal, f'signal {signal}')})"


def _gates_of(
    prepared: PreparedPhone,
    job: RunJob,
    gates: Gates,
    report: RunReport,
    control: ChargingControl | None,
    result: RunResult,
) -> None:
    """The gates' readings and their notes, as far as the conversation got."""
    result.battery_start_pct = report.battery_last_pct  # what the run started at, after the gate
    level = report.battery_last_pct
    if level is not None and level < gates.min_battery_pct:
        result.notes.append(f"battery {level:.0f}% below the minimum {gates.min_battery_pct:.0f}%")
    past_battery = report.charging_disabled is not None or report.cooldown_waited_s is not None
    if gates.disable_charging and control is None and past_battery:
        result.notes.append("charging could not be disabled: no writable charging node")
    if report.charging_disabled is False:
        result.notes.append("charging could not be disabled: the phone refused every root write")
    result.charging_disabled = bool(report.charging_disabled) if past_battery else None
    result.cooldown_waited_s = report.cooldown_waited_s
    result.battery_source, result.temperature_source = report.battery_source, report.temperature_source
    if report.screen_start is not None or report.screen_end is not None:
        result.screen = (report.screen_start, report.screen_end)
        if report.screen_start != "Awake" or report.screen_end != "Awake":
            result.notes.append(
                f"screen {report.screen_start} before the benchmark, {report.screen_end} after it"
            )
    temp = result.temperature_start_c = report.temperature_start_c
    limit_c = cooldown_limit_c(gates, prepared.idle_temperature_c)
    if temp is not None and temp > limit_c:
        waited = f"{gates.cooldown_timeout_s:.0f} s cooldown"
        result.notes.append(f"still {temp:.1f} °C (limit {limit_c:.1f} °C) after the {waited}")
    if "bench" in report.started:  # every run that measured says what the phone would not show
        result.notes.extend(loss.note() for loss in lost_telemetry(prepared.caps))
    if "sampler" not in report.started and "bench" in report.started and not default_sources(prepared.caps):
        result.notes.append("no telemetry: the phone has no readable battery, GPU or thermal node")
    if "load" in report.started and "bench" in report.started:
        achieved = report.load_achieved
        if achieved is None or abs(achieved - job.gpu_load) > gates.tolerance:
            result.load_note = f"background load not reached: target {job.gpu_load:g}, achieved {achieved}"
    idle = report.gpu_idle
    if idle is not None and idle.busy_pct is not None and idle.busy_pct > gates.tolerance * 100:
        result.notes.append(
            f"GPU still {idle.busy_pct}% busy after waiting {idle.waited_ms / 1000:g} s for it to idle"
        )


def _restore(
    prepared: PreparedPhone,
    store: Store,
    report: RunReport,
    marked: bool,
    gates: Gates,
    result: RunResult,
) -> None:
    """Clear the charging marker once charging is verified back on (the script's word, or the
    host's own restore when the script could not say it: the phone dropped, the script died).
    Failures are kept as notes; the marker then stays, so recovery retries on the next start."""
    device_id = prepared.phone.device_id
    if not marked:
        return
    control = charging_control(prepared.caps)
    action = marker_action(report, control.enable_value if control else None)
    if action is MarkerAction.CLEAR:
        _clear_marker(store, device_id, result)
        result.charging_restored = True if report.charging_restored else None
        return
    try:
        if restore_power(prepared, store, charging_off=True):
            result.charging_restored = True
    except FarmError as error:
        result.notes.append(f"charging not restored yet: {error}")
        result.charging_restored = False


class MarkerAction(Enum):
    CLEAR = "clear"  # charging is verifiably on: drop the store marker
    RESTORE = "restore"  # the host switches charging back on (the marker stays until it does)


def marker_action(report: RunReport, enable_value: str | None) -> MarkerAction:
    """What the host does with the charging marker after the script ended (pure). Cleared only
    when charging is known to be on: the script switched it back on, its switch-off failed with
    the node still reading the enable value, or it never reached the switch."""
    if report.charging_restored:
        return MarkerAction.CLEAR
    if report.charging_disabled is False:
        failed_on = enable_value is not None and report.charging_failed_reads == enable_value
        never_restored = report.charging_restored is None and report.done
        return MarkerAction.CLEAR if failed_on and never_restored else MarkerAction.RESTORE
    if report.done and report.charging_disabled is None:
        return MarkerAction.CLEAR
    return MarkerAction.RESTORE


def _clear_marker(store: Store, device_id: str, result: RunResult) -> None:
    """Charging is back on: drop its marker. A store that fails here must not lose the measured
    run (the scheduler keeps it in the outbox when the store is gone); the marker stays and the
    next start's recovery finds charging already on."""
    try:
        device_store.clear_charging_disabled(store, device_id)
    except StoreError as error:
        result.notes.append(f"charging back on; its marker stays in the store until the next start: {error}")


def _throttle(prepared: PreparedPhone, report: RunReport) -> ThrottleReport | None:
    """Throttling over the script's samples (None: it took none, the run never measured)."""
    if not report.throttle_samples:
        return None
    clocks = prepared.clocks
    if clocks is None:
        return judge(report.throttle_samples, {}, None)
    return judge(report.throttle_samples, clocks.pinned_khz, clocks.pinned_pwrlevel)


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


__all__ = ["execute_run", "prepare_phone", "probe_phone"]
