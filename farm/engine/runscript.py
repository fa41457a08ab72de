"""The run script's command line: device_agents/run/farm-run.sh with one job's parameters.

Quoting rule (farm.device.session): nothing here is ever a shell command string. Scalars travel as
`KEY=VALUE` arguments, which the script splits at the first `=` and only expands in double quotes;
the benchmark's argv (user values: an external program's args and `env K=V`) is the script's
"$@" after `--`; the lists (thermal nodes, policy folders, the sampler's, load's and memory
sampler's argv, the files to bring back) are argv blocks made with shlex.quote that the script
turns back into argv with `eval "set -- $block"`. The whole argv then goes through the session's
own quote_argv, like every other phone command.

    script = install_run_script(session)                      # once per phone (content-cached)
    argv = run_script_argv(script, prepared, job, gates, RunDir.of(job.run_id))
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from pathlib import Path

from farm.device.session import DeviceSession
from farm.engine.conditions import charging_control, cooldown_limit_c, temperature_nodes
from farm.engine.deploy import source_root
from farm.engine.model import Gates, PreparedPhone, RunJob
from farm.engine.onphone import (
    CL_CACHE_DIR,
    LOAD,
    PAGECACHE,
    SAMPLER,
    TRACE,
    RunDir,
    gpu_busy_path,
    load_argv,
)
from farm.engine.program import program_argv
from farm.engine.steering import SteeringPlan, settle_limit_s
from farm.experiment.clocks import ClockMode
from farm.telemetry.probe import Capabilities
from farm.telemetry.sampler import default_sources, sampler_argv

RUN_SCRIPT = "farm-run.sh"
SCRIPT_SOURCE = Path("device_agents") / "run" / RUN_SCRIPT
MEM_RATE_HZ = 50.0
# The memory sampler ends as soon as it sees the benchmark's pid gone (after its exit record):
# every run waits for it before its files go back, and it has nothing else to sample.
MEM_LINGER_S = 0.0
# The benchmark waits at most this long for its memory sampler before it starts anyway.
MEM_GATE_WAIT_S = 5.0
MEM_GATE_POLL_S = 0.01
# `sh -c` script: say it is up ($4: the run script reads the pid's CPU mask and cgroups then,
# before the program runs), wait until the memory sampler has opened the pid's status ($0
# non-empty) or the host says go ($1), then exec the program in place, so the pid the sampler
# watches becomes it.
_GATED_EXEC = (
    ': > "$4"; i=0; '
    'while [ ! -s "$0" ] && [ ! -e "$1" ] && [ "$i" -lt "$2" ]; do sleep "$3"; i=$((i+1)); done; '
    'shift 4; exec "$@"'
)
BEAT_S = 1.0  # the script's heartbeat while the benchmark runs (the host's idle timeout is longer)
THROTTLE_POLL_S = 1.0  # the caps (scaling_max_freq, thermal_pwrlevel): sysfs reads, cheap
STATUS_POLL_S = 5.0  # dumpsys thermalservice is a binder call and a process: not more often
SETTLE_POLL_S = 0.25
BATTERY_POLL_S = 5.0
COOL_POLL_S = 1.0
# The phone files a run brings back (farm.engine.collect.ARTIFACTS names what they become).
RUN_FILES = ("bench.out", "bench.err", TRACE, "gpuload.out", "gpuload.err", "sampler.err", "mem.bin")
# How the script re-applies each clock mode's pin (farm-run.sh repin_if_broken).
_REPIN_WAYS = {ClockMode.PIN: "pin", ClockMode.FIXED_PERFORMANCE: "fixed"}
# farm.device.controls' names of the root-write ways -> the script's.
_ROOT_WAYS = {"direct": "direct", "su -c": "su-c", "su 0": "su-0"}


def host_root_way(script_way: str | None) -> str | None:
    """The script's name of a root-write way as farm.device.controls remembers it."""
    return next((host for host, script in _ROOT_WAYS.items() if script == script_way), None)


def block(argv: Sequence[str]) -> str:
    """An argv as one quoted parameter the script reads back with `eval "set -- $block"`."""
    return " ".join(shlex.quote(str(arg)) for arg in argv)


def gated_argv(argv: Sequence[str], run_dir: RunDir, wait_s: float = MEM_GATE_WAIT_S) -> list[str]:
    """argv behind a shell that waits for the memory sampler (at least wait_s of polls at most),
    then execs argv: the benchmark's memory is watched from its first instruction, also for runs
    of a few ms."""
    steps = max(1, int(wait_s / MEM_GATE_POLL_S))
    gate = [run_dir.file("mem.bin"), run_dir.file("bench.go"), str(steps), f"{MEM_GATE_POLL_S:g}"]
    gate.append(run_dir.file("bench.gate"))
    return ["sh", "-c", _GATED_EXEC, *gate, *argv]


def install_run_script(session: DeviceSession, root: Path | None = None) -> str:
    """Put farm-run.sh on the phone (skipped when it holds the same content); its phone path."""
    path, _pushed = session.push_cached((root or source_root()) / SCRIPT_SOURCE, mode=0o755)
    return path


def memory_sampler_argv(binary: str, run_dir: RunDir) -> list[str]:
    """The benchmark-pid memory sampler without its pid (the script appends --watch-pid=)."""
    argv = sampler_argv(binary, [], MEM_RATE_HZ, run_dir.file("mem.bin"), 1, linger_s=MEM_LINGER_S)
    return [arg for arg in argv if not arg.startswith("--watch-pid=")]


def _ms(seconds: float) -> str:
    return str(max(0, round(seconds * 1000)))


def run_script_argv(
    script: str,
    prepared: PreparedPhone,
    job: RunJob,
    gates: Gates,
    run_dir: RunDir,
    *,
    root_way: str | None = None,
    screen_restore: str | None = None,
) -> list[str]:
    """`sh farm-run.sh KEY=VALUE... -- GATED BENCHMARK ARGV` for one attempt (pure)."""
    caps, programs = prepared.caps, prepared.programs
    # The host hears from the script at least every third of its call timeout, so that silence
    # longer than the timeout means a hung or gone phone, not a long wait.
    quiet_s = prepared.session.default_timeout_s / 3
    beat_s = min(BEAT_S, quiet_s)
    params = {
        "dir": run_dir.path,
        "cache": CL_CACHE_DIR,
        "battery": "1",
        "bat_dir": caps.battery.dir or "",
        "screen": "1",
        "cool": "1",
        # The script asks the host only when a gate would hold the run (it still reports readings).
        "battery_min": str(math.ceil(gates.min_battery_pct)),
        "temp_limit_mc": str(math.floor(cooldown_limit_c(gates, prepared.idle_temperature_c) * 1000)),
        "temps": block(temperature_nodes(caps)),
        # No readable thermal zone (SELinux): the thermal HAL's readings before the battery's.
        "hal_first": "0" if any(zone.node.usable for zone in caps.thermal) else "1",
        "policies": block([p.dir for p in caps.cpu_policies]),
        "kgsl": (prepared.clocks.kgsl_dir if prepared.clocks is not None else None) or "",
        # Every pinned node, read with each throttle sample (farm.engine.clockhold), and what
        # it should read: a broken pin is applied again until it holds, at most three times
        # (repin_if_broken).
        "clock_nodes": block(list(prepared.clocks.readback) if prepared.clocks is not None else []),
        **_repin(prepared),
        "throttle_ms": _ms(THROTTLE_POLL_S),
        "status_ms": _ms(STATUS_POLL_S),
        "timeout_ms": _ms(gates.run_timeout_s),
        "beat_s": f"{beat_s:.3g}",
        "beat_ms": _ms(beat_s),
        "battery_poll_s": f"{min(BATTERY_POLL_S, quiet_s):.3g}",
        "cool_poll_s": f"{min(COOL_POLL_S, quiet_s):.3g}",
        "settle_poll_s": f"{SETTLE_POLL_S:g}",
        "files": block(RUN_FILES),
        # The mask asked for: the one in force is read back before the benchmark runs.
        "affinity": prepared.clocks.affinity_mask() if prepared.clocks is not None else "",
        "gated": "1",  # the benchmark's argv is gated_argv's: it says when it is up
        # The phone's own screen timeout as the store's marker keeps it ("": the script reads it).
        "screen_restore": screen_restore or "",
        "max_bytes": str(gates.max_file_bytes),
    }
    control = charging_control(caps) if gates.disable_charging else None
    if control is not None:
        params |= {
            "charge_node": control.node,
            "charge_off": control.disable_value,
            "charge_on": control.enable_value,
            "root_way": _ROOT_WAYS.get(root_way or "", "direct"),
        }
    sampler = programs[SAMPLER].phone_path
    sources = default_sources(caps)
    if sources:
        params["sampler"] = block(sampler_argv(sampler, sources, gates.rate_hz, run_dir.file(TRACE)))
    if job.gpu_load > 0 and LOAD in programs:
        load = load_argv(programs[LOAD].phone_path, job.gpu_load, gates.intensity, gpu_busy_path(caps))
        params["load"] = block(load)
    else:
        params |= _idle_gate(caps, gates)
    params["mem"] = block(memory_sampler_argv(sampler, run_dir))
    if job.cold_files and PAGECACHE in programs:  # farm.engine.pagecache
        agent = programs[PAGECACHE].phone_path
        params["cold"] = block([agent, "--drop", *job.cold_files])
        params["cold_end"] = block([agent, *job.cold_files])
    # taskset outside the gate: the gate's shell already runs under the mask, so the script reads
    # the mask in force while the gate waits, before the program's first instruction.
    taskset = prepared.clocks.taskset_prefix() if prepared.clocks is not None else []
    bench = [*taskset, *gated_argv(list(program_argv(prepared, job)), run_dir)]
    return ["sh", script, *(f"{key}={value}" for key, value in params.items()), "--", *bench]


def _repin(prepared: PreparedPhone) -> dict[str, str]:
    """How the script re-applies a pin the phone broke mid-run: root writes of the pinned values
    (pin) or fixed performance mode asked again; {} when nothing is held."""
    clocks = prepared.clocks
    if clocks is None or not clocks.readback or clocks.mode not in _REPIN_WAYS:
        return {}
    pairs = [text for node, value in clocks.readback.items() for text in (node, value.strip())]
    return {"repin": _REPIN_WAYS[clocks.mode], "clock_pins": block(pairs)}


def _idle_gate(caps: Capabilities, gates: Gates) -> dict[str, str]:
    """Without background load the script waits (at most as long as a load may take to settle)
    until the GPU counter is within the load tolerance of idle; {} without a usable counter."""
    node = gpu_busy_path(caps)
    if node is None or caps.gpu.busy_format is None:
        return {}
    return {
        "idle_node": node,
        "idle_fmt": caps.gpu.busy_format,
        "idle_max_pct": str(math.floor(gates.tolerance * 100)),
        "idle_wait_ms": _ms(settle_limit_s(gates.settle_s)),
    }


def steering_plan(prepared: PreparedPhone, job: RunJob, gates: Gates) -> SteeringPlan:
    """What the host decides the script's questions by, for this attempt (pure)."""
    has_load = job.gpu_load > 0 and LOAD in prepared.programs
    return SteeringPlan(
        min_battery_pct=gates.min_battery_pct,
        battery_timeout_s=gates.cooldown_timeout_s,
        temp_limit_c=cooldown_limit_c(gates, prepared.idle_temperature_c),
        cooldown_timeout_s=gates.cooldown_timeout_s,
        load_target=job.gpu_load if has_load else None,
        settle_s=gates.settle_s,
        tolerance=gates.tolerance,
    )
