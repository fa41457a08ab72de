"""After a run: the names of its artifacts, its environment, its metrics.

Artifacts in results/<experiment>/<run-id>/: stdout.jsonl (benchmark events; an external
program's stdout whatever its format, read by its adapter), stderr.txt,
trace.bin (sampler), gpuload.jsonl, env.json (environment snapshot), notes in env.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

import farm
from farm.adapters.jsonl import parse_event_lines
from farm.analysis.discharge import BatteryState, DischargeEvidence, DischargeProof, judge_discharge
from farm.analysis.metrics import compute_run_metrics
from farm.analysis.power import BatteryCalibration, calibrate
from farm.analysis.series import Series, TraceLike
from farm.device.android import THERMAL_HAL_SOURCE
from farm.engine.conditions import charging_control, temperature_nodes
from farm.engine.model import CpuPolicyState, JsonObject, PhoneEnvironment, PreparedPhone, RunJob, RunResult
from farm.engine.onphone import gpu_busy_path
from farm.engine.program import GRANULARITY_METRIC, output_metrics
from farm.experiment.external import OutputSpec
from farm.store import Metric
from farm.telemetry.losses import lost_telemetry
from farm.telemetry.probe import Capabilities
from farm.telemetry.trace import Trace, parse_trace

# phone file name -> artifact name
ARTIFACTS = {
    "bench.out": "stdout.jsonl",
    "bench.err": "stderr.txt",
    "trace.bin": "trace.bin",
    "gpuload.out": "gpuload.jsonl",
    "gpuload.err": "gpuload.stderr.txt",
    "sampler.err": "sampler.stderr.txt",
    "mem.bin": "mem.bin",
}
ENV_PROPS = (
    "ro.product.model",
    "ro.product.manufacturer",
    "ro.board.platform",
    "ro.soc.model",
    "ro.build.fingerprint",
    "ro.build.version.sdk",
    "ro.product.cpu.abi",
    "ro.serialno",
)
# Families recorded whole: what a phone states about its SoC (Android 12+ ro.soc.*) and how a
# simulated phone's speeds relate to the real SoC's (ro.vphone.slowdown, ...).
ENV_PROP_FAMILIES = ("ro.soc.", "ro.vphone.")


def env_props(props: Mapping[str, str]) -> dict[str, str | None]:
    """The properties env.json records: ENV_PROPS (None when absent) and every ENV_PROP_FAMILIES key."""
    chosen: dict[str, str | None] = {k: props.get(k) for k in ENV_PROPS}
    chosen.update({k: v for k, v in sorted(props.items()) if k.startswith(ENV_PROP_FAMILIES)})
    return chosen


_ENV_SCRIPT = (
    "for d in /sys/devices/system/cpu/cpufreq/policy* /sys/devices/system/cpu/cpu[0-9]*/cpufreq; do "
    '[ -d "$d" ] || continue; '
    'echo "cpufreq $d $(cat $d/scaling_governor 2>/dev/null) $(cat $d/scaling_cur_freq 2>/dev/null)"; '
    "done; "
    "for z in /sys/class/thermal/thermal_zone*; do "
    '[ -d "$z" ] || continue; echo "thermal $(cat $z/type 2>/dev/null) $(cat $z/temp 2>/dev/null)"; done; '
    '[ -n "$1" ] && echo "charging $(cat "$1" 2>/dev/null)"; true'
)


def environment_snapshot(prepared: PreparedPhone) -> PhoneEnvironment:
    """Governors and frequencies, thermal zones and the charging node, read now (one round trip;
    a run reads them in its own conversation, device_agents/run/farm-run.sh). Best effort: a phone
    that is gone yields the error instead."""
    control = charging_control(prepared.caps)
    try:
        text = prepared.session.script(_ENV_SCRIPT, control.node if control else "").stdout
    except Exception as error:  # the phone may be gone; the snapshot must not hide the outcome
        return PhoneEnvironment(error=str(error))
    return parse_environment(text)


def parse_environment(text: str, *, error: str | None = None) -> PhoneEnvironment:
    """`cpufreq DIR GOVERNOR KHZ`, `thermal TYPE RAW` and `charging VALUE` lines (pure); with
    `error`, the snapshot that could not be taken."""
    if error is not None:
        return PhoneEnvironment(error=error)
    cpufreq: dict[str, CpuPolicyState] = {}
    thermal: dict[str, str] = {}
    charging_value = None
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["cpufreq"] and len(parts) >= 2:
            cpufreq[parts[1]] = CpuPolicyState(
                parts[2] if len(parts) > 2 else None, parts[3] if len(parts) > 3 else None
            )
        elif parts[:1] == ["thermal"] and len(parts) >= 3:
            thermal[parts[1]] = parts[2]
        elif parts[:1] == ["charging"]:
            charging_value = parts[1] if len(parts) > 1 else None
    return PhoneEnvironment(cpufreq, thermal, charging_value)


def env_document(prepared: PreparedPhone, job: RunJob, result: RunResult) -> JsonObject:
    """env.json of an attempt (also the store's attempts.env_json): props, programs and their
    sha256, farm version, the load, the gates' readings, charging, the phone's environment after
    the run, the notes. Keys of steps the attempt did not reach are left out."""
    control = charging_control(prepared.caps)
    document: JsonObject = {
        "device_id": prepared.phone.device_id,
        "props": env_props(prepared.phone.props),
        "programs": {name: {"sha256": d.sha256, "abi": d.abi} for name, d in prepared.programs.items()},
        "farm_version": farm.__version__,
        "gpu_load_target": job.gpu_load,
        "gpu_load_achieved": result.load_achieved,
        "notes": list(result.notes),
        "load_note": result.load_note,
        "charging_control": control.node if control else None,
        "telemetry_lost": [loss.to_json() for loss in lost_telemetry(prepared.caps)],
    }
    reached: dict[str, object | None] = {
        "battery_start_pct": result.battery_start_pct,
        "charging_disabled": result.charging_disabled,
        "cooldown_waited_s": result.cooldown_waited_s,
        "temperature_start_c": result.temperature_start_c,
        "charging_restored": result.charging_restored,
        "discharge": result.discharge.to_json() if result.discharge is not None else None,
        "screen": {"start": result.screen[0], "end": result.screen[1]} if result.screen is not None else None,
        "argv": list(result.argv) if result.argv is not None else None,
        "idle_baseline": prepared.idle_baseline.to_json() if prepared.idle_baseline is not None else None,
        "clocks": prepared.clocks.to_json() if prepared.clocks is not None else None,
        "throttle": result.throttle.to_json() if result.throttle is not None else None,
        "clocks_held": result.clock_hold.to_json() if result.clock_hold is not None else None,
        "affinity": result.affinity.to_json() if result.affinity is not None else None,
        "page_cache": result.page_cache.to_json() if result.page_cache is not None else None,
        "temperature_trace": [{"at_s": t, "max_c": c} for t, c in result.temperature_trace] or None,
        "tuned": [choice.to_json() for choice in prepared.tuned] if prepared.tuned else None,
    }
    document.update({key: value for key, value in reached.items() if value is not None})
    document["sensors"] = sensors_document(prepared.caps, result)
    environment = result.environment
    if environment is not None and environment.error is not None:
        document["snapshot_error"] = environment.error
    elif environment is not None:
        document["cpufreq"] = {
            folder: {"governor": policy.governor, "cur_khz": policy.cur_khz}
            for folder, policy in environment.cpufreq.items()
        }
        document["thermal_raw"] = dict(environment.thermal_raw)
        if environment.charging_node_value is not None:
            document["charging_node_value"] = environment.charging_node_value
    return document


def sensors_document(caps: Capabilities, result: RunResult) -> JsonObject:
    """Which sensor each gate and metric used (env.json `sensors`), so a reader can tell a
    cooldown judged on the SoC from one judged on the battery thermistor, which lags it by
    minutes, or power from a gauge calibrated on discharging samples from none."""
    nodes = temperature_nodes(caps)
    battery_temp = caps.battery.temp.path if caps.battery.temp is not None else None
    battery_only = bool(nodes) and all(node == battery_temp for node in nodes)
    battery_only &= result.temperature_source != THERMAL_HAL_SOURCE  # the HAL came first
    current, voltage = caps.battery.current, caps.battery.voltage
    proof = result.discharge
    calibration = None
    if calibration_of(caps) is not None:
        calibration = "probe (phone discharging)"
    elif proof is not None and proof.proven:
        calibration = "the run's discharging samples"
    return {
        "battery_gate": result.battery_source,
        "cooldown_gate": result.temperature_source,
        "cooldown_nodes": nodes,
        "cooldown_battery_only": battery_only or (result.temperature_source or "").startswith("battery"),
        "power": {
            "current_now": current.path if current is not None and current.usable else None,
            "voltage_now": voltage.path if voltage is not None and voltage.usable else None,
            "calibration": calibration,
        },
        "gpu_busy": gpu_busy_path(caps),
        "throttle": {
            "cpu": [f"{p.dir}/scaling_max_freq" for p in caps.cpu_policies],
            "thermal_status": "dumpsys thermalservice",
        },
        # Where no thermal node is readable, the thermal HAL's readings with each status sample.
        "temperature_trace": "dumpsys thermalservice (HAL)" if result.temperature_trace else None,
        "discharge": "power_supply status and capacity, current_now" if proof is not None else None,
    }


def read_events(path: Path) -> list[Mapping[str, object]]:
    """The benchmark's JSON Lines events; lines that are not a JSON object are passed over."""
    return list(parse_event_lines(path.read_text(errors="replace")).events) if path.is_file() else []


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""


def _parse(path: Path) -> Trace | None:
    if not path.is_file():
        return None
    return parse_trace(path.read_bytes())


class MergedTrace:
    """The run's sampler trace plus the benchmark-pid memory trace, seen as one (TraceLike):
    sources come from the main trace first; `header` is the main trace's (source formats)."""

    def __init__(self, main: Trace, memory: Trace) -> None:
        self.main = main
        self.memory = memory
        self.header = main.header

    def series(self, source: str) -> Series | None:
        found = self.main.series(source)
        if found is not None and len(found) > 0:
            return found
        return self.memory.series(source)


def calibration_of(caps: Capabilities) -> BatteryCalibration | None:
    """The phone's battery calibration from the probe's sign/unit conventions, or None. Only
    when the probe saw the battery discharging: plugged in (Charging, or Full / Not charging on
    a lab phone held at its limit) the current is the charger's or a few mA of noise of either
    sign, so its magnitude and sign say nothing about the discharge convention (audit finding 5);
    a run's own discharging samples calibrate it then (calibration_from_trace)."""
    battery = caps.battery
    if battery.status != "Discharging":
        return None
    try:
        return BatteryCalibration.from_conventions(
            battery.current_sign.discharge_sign, battery.current_unit, battery.voltage_unit
        )
    except ValueError:
        return None


def calibration_from_trace(trace: TraceLike) -> BatteryCalibration | None:
    """Sign and units inferred from the run's own battery samples: valid only when the phone was
    discharging (charging disabled) during the run."""
    try:
        current = trace.series("battery.current_now")
        voltage = trace.series("battery.voltage_now")
        if current is None or voltage is None or len(current) == 0 or len(voltage) == 0:
            return None
        return calibrate(current.values, voltage.values)
    except ValueError:
        return None


def discharge_of(
    after_switch: BatteryState | None, at_end: BatteryState | None, artifacts: Path
) -> DischargeProof:
    """The proof that the battery alone powered the phone during the run (farm.analysis.discharge)
    from the script's battery states and the run's gauge samples: the current's readings after
    the first (which may predate the switch), and the voltage."""
    trace = _parse(artifacts / "trace.bin")
    current: tuple[float, ...] = ()
    voltage: tuple[float, ...] = ()
    if trace is not None:
        cur = trace.series("battery.current_now")
        volt = trace.series("battery.voltage_now")
        if cur is not None and len(cur) > 0:
            current = tuple(float(x) for x in after_first_update(cur))
        if volt is not None:
            voltage = tuple(float(x) for x in volt.values)
    return judge_discharge(DischargeEvidence(after_switch, at_end, current, voltage))


def after_first_update(series: Series) -> np.ndarray:
    """The gauge's readings from its first update on: the value before may predate the
    charging switch (a slow gauge holds its last charging reading for seconds); none when the
    value never changed."""
    changed = np.flatnonzero(series.values != series.values[0])
    if changed.size == 0:
        return np.empty(0)
    readings = series.readings()
    kept: np.ndarray = readings.values[readings.t_ns >= series.t_ns[changed[0]]]
    return kept


def energy_invalid_of(env: Mapping[str, object]) -> str | None:
    """Why a run's energy does not count, from env.json's discharge proof (None: it counts, or
    the run predates the proof)."""
    proof = env.get("discharge")
    if isinstance(proof, Mapping) and proof.get("proven") is False:
        reason = proof.get("reason")
        return str(reason) if reason else "discharge not proven"
    return None


# Metrics that read battery power: meaningless while a charger feeds the battery.
ENERGY_METRICS = frozenset(
    {
        "power_mean_mw",
        "power_readings",
        "power_idle_mw",
        "energy_total_mj",
        "energy_net_mj",
        "energy_per_inference_mj",
        "energy_per_inference_gross_mj",
        "energy_per_prefill_token_mj",
        "energy_per_decode_token_mj",
    }
)


def charging_disabled_of(env: Mapping[str, object]) -> bool | None:
    """Whether charging was off while the run measured (env.json), None when not recorded.
    Older runs did not record it; charging restored afterwards implies it had been off."""
    value = env.get("charging_disabled")
    if isinstance(value, bool):
        return value
    return True if env.get("charging_restored") is True else None


def compute_metrics(
    artifacts: Path,
    target_gpu_load: float | None,
    caps: Capabilities | None = None,
    *,
    discharging: bool = False,
    idle_power_mw: float | None = None,
    charging_disabled: bool | None = None,
    output: OutputSpec | None = None,
    energy_invalid: str | None = None,
) -> list[Metric]:
    """Per-run metrics from the pulled artifacts (farm.analysis.metrics), as store rows.

    `charging_disabled` False: the charger fed the phone while it measured, so battery power is
    not its consumption and no power or energy metric is kept (`charging_disabled` 0 says why).
    `energy_invalid`: charging was off but the run did not prove the battery discharged
    (farm.analysis.discharge; env.json has the reason): no power or energy metric either, and
    `energy_valid` 0 says so.
    `output`: an external program's adapter; what it reads without iteration stamps goes through
    farm.engine.program.output_metrics (stamped jsonl iterations are read like farm's own)."""
    events = read_events(artifacts / "stdout.jsonl")
    parsed = None
    if output is not None:
        parsed = output.adapter_of().parse(_text(artifacts / "stdout.jsonl"), _text(artifacts / "stderr.txt"))
    main = _parse(artifacts / "trace.bin")
    memory = _parse(artifacts / "mem.bin")
    trace: TraceLike | None = main or memory
    if main is not None and memory is not None:
        trace = MergedTrace(main, memory)
    calibration = calibration_of(caps) if caps is not None else None
    if calibration is None and discharging and trace is not None:
        calibration = calibration_from_trace(trace)
    if parsed is not None and parsed.iterations is None:
        computed = output_metrics(parsed, trace, calibration, idle_power_mw, target_gpu_load)
    else:
        computed = compute_run_metrics(events, trace, calibration, idle_power_mw, target_gpu_load)
        if parsed is not None:
            computed.append(Metric(GRANULARITY_METRIC, 1.0, "bool"))
    metrics = list(computed)
    if charging_disabled is None:
        return metrics
    if not charging_disabled or energy_invalid is not None:
        metrics = [m for m in metrics if m.name not in ENERGY_METRICS]
    flags = [Metric("charging_disabled", float(charging_disabled), "bool")]
    if charging_disabled:
        flags.append(Metric("energy_valid", float(energy_invalid is None), "bool"))
    return [*metrics, *flags]
