"""The engine's value types: what one phone was prepared with, what one run asks, how it ended,
and the gates every run passes. Plain frozen data (RunResult is filled in by its attempt); the
modules that act on them (lifecycle, conditions, collect, baseline, scheduler) import this one
and never each other's types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from farm.analysis.discharge import DischargeProof
from farm.device.session import DeviceSession
from farm.engine.affinity import AffinityReadback
from farm.engine.clockhold import ClockHold
from farm.engine.clocks import AppliedClocks
from farm.engine.deploy import Deployed, ExternalDeployed
from farm.engine.pagecache import PageCacheReport
from farm.engine.thermal import ThrottleReport
from farm.experiment.external import OutputSpec
from farm.experiment.programs import Program
from farm.experiment.sections import Intensity
from farm.fleet.inventory import Phone
from farm.store import Metric, Outcome, RunState
from farm.store.runs import StoredRun
from farm.telemetry.probe import Capabilities

# A JSON document at the edge: env.json, the store's JSON columns and event data. Typed values are
# turned into one only where they are written (farm.engine.collect.env_document, IdleBaseline.to_json).
JsonObject = dict[str, object]


class Phase(StrEnum):
    """What a phone's worker is doing now (the live view and `farm status` show it)."""

    IDLE = "idle"
    PREPARING = "preparing"  # recovery, probe, deploy
    BASELINE = "baseline"  # measuring the idle power
    CHARGING = "charging"  # battery gate: waiting for the minimum level
    COOLING = "cooling"  # temperature gate
    LOADING = "loading"  # background GPU load settling
    RUNNING = "running"  # the benchmark
    RESTORING = "restoring"  # charging back on, artifacts pulled
    OFFLINE = "offline"  # dropped off; waiting for it to come back
    LOST = "lost"  # did not come back (or its runs went to other phones)
    FAILED = "failed"  # unusable for this sweep (no build for its ABI, probe refused ...)
    QUARANTINED = "quarantined"  # the recovery ladder gave up on it: no more runs this sweep
    TAKEN = "taken"  # its lease passed to another coordinator: this one stopped using it


@dataclass(frozen=True)
class PhaseUpdate:
    """One step of an attempt, as it tells the scheduler: the phase it entered and what it has
    just read on the phone (None: not read in this step)."""

    phase: Phase
    battery_pct: float | None = None
    temperature_c: float | None = None
    gpu_load_target: float | None = None
    gpu_load_achieved: float | None = None


OnPhase = Callable[[PhaseUpdate], None]


@dataclass(frozen=True)
class IdleBaseline:
    """One phone's idle power in this session, or why there is none (power_mw None + note)."""

    power_mw: float | None
    readings: int = 0
    sampled_s: float = 0.0
    start_ns: int | None = None  # the averaging window, on the phone's CLOCK_MONOTONIC
    end_ns: int | None = None
    charging_disabled: bool = False
    note: str | None = None
    took_s: float = 0.0  # what measuring it cost the phone's session, round trips included
    # The fuel gauge's update interval seen while idling (median gap between its updates), or None
    # with fewer than two updates: what lengthens a slow gauge's runs (engine.measurement).
    gauge_interval_s: float | None = None

    def to_json(self) -> JsonObject:
        """As env.json's `idle_baseline` and the store's baseline event carry it."""
        return {
            "power_mw": self.power_mw,
            "readings": self.readings,
            "sampled_s": round(self.sampled_s, 3),
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "charging_disabled": self.charging_disabled,
            "note": self.note,
            "took_s": round(self.took_s, 3),
            "gauge_interval_s": self.gauge_interval_s,
        }


@dataclass(frozen=True)
class TuneChoice:
    """What one tuning run chose (or why it chose nothing: `error`)."""

    workload_args: tuple[str, ...]
    fields: JsonObject  # the `tune_*` keys of the program's info event
    error: str | None = None

    def to_json(self) -> JsonObject:
        document: JsonObject = {"args": list(self.workload_args), **self.fields}
        if self.error is not None:
            document["error"] = self.error
        return document


@dataclass(frozen=True)
class PreparedPhone:
    """A phone probed and deployed to, once per phone per sweep. `caps` is what farm-probe found,
    parsed once here: every later question about the phone (charging node, GPU busy counter,
    thermal zones, battery conventions, sampler sources) is answered from it."""

    session: DeviceSession
    phone: Phone
    caps: Capabilities
    programs: dict[str, Deployed]
    idle_baseline: IdleBaseline | None = None  # this session's idle power of the phone
    clocks: AppliedClocks | None = None  # the clock control it got for this sweep (engine.clocks)
    idle_temperature_c: float | None = None  # read when prepared, for cooldown.within_c_of_idle
    # An external program's binary (also in `programs` under "external") and assets on this phone.
    external: ExternalDeployed | None = None
    tuned: tuple[TuneChoice, ...] = ()  # benchmark.tune: what tuning chose here (engine.tuning)


@dataclass(frozen=True)
class RunJob:
    """One attempt's orders: which program with which arguments under which load."""

    run_id: str
    experiment_key: str  # name (or name.variant): the results folder
    program_args: tuple[str, ...]
    program: Program
    gpu_load: float
    artifacts: Path
    env: tuple[tuple[str, str], ...] = ()  # an external program's environment variables
    output: OutputSpec | None = None  # an external program's adapter; None: farm's own events
    # Phone paths dropped from the page cache just before the program starts (farm.engine.pagecache)
    cold_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class CpuPolicyState:
    """One cpufreq policy (or cpu) folder as read after the run."""

    governor: str | None
    cur_khz: str | None


@dataclass(frozen=True)
class PhoneEnvironment:
    """What the phone's clocks, thermal zones and charging node said when the attempt ended.
    Best effort: `error` says why it could not be read (the phone may be gone)."""

    cpufreq: Mapping[str, CpuPolicyState] = field(default_factory=dict)  # by folder
    thermal_raw: Mapping[str, str] = field(default_factory=dict)  # zone type -> raw temp
    charging_node_value: str | None = None
    error: str | None = None


@dataclass
class RunResult:
    """How one attempt ended; the attempt fills it in as it goes (the scheduler reads it after).
    None: the attempt ended before it got there."""

    outcome: Outcome
    error: str | None = None
    exit_code: int | None = None
    load_achieved: float | None = None
    battery_start_pct: float | None = None
    # Whether the battery alone powered the phone while it measured: energy is kept only then.
    charging_disabled: bool | None = None
    cooldown_waited_s: float | None = None
    temperature_start_c: float | None = None
    charging_restored: bool | None = None  # None: charging was never off
    # With charging off: whether the run proved the battery alone powered the phone (else why not)
    discharge: DischargeProof | None = None
    screen: tuple[str | None, str | None] | None = None  # wakefulness before and after the benchmark
    battery_source: str | None = None  # the battery gate's sensor (steering.battery_block_source)
    temperature_source: str | None = None  # the cooldown gate's: thermal nodes | battery (...)
    argv: tuple[str, ...] | None = None
    throttle: ThrottleReport | None = None  # what the throttle watch saw while it measured
    clock_hold: ClockHold | None = None  # whether the pinned clock nodes read their pins throughout
    affinity: AffinityReadback | None = None  # the benchmark's CPU mask asked and in force, its cgroups
    page_cache: PageCacheReport | None = None  # the cold files' residency at the drop and at the end
    # (s since the watch began, hottest °C) from the thermal HAL where no thermal node is readable
    temperature_trace: list[tuple[float, float]] = field(default_factory=list)
    environment: PhoneEnvironment | None = None
    metrics: list[Metric] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The background load off its target at settle, apart from `notes`: env.json keeps it under
    # its own key, so the report knows it without reading the text, and states the load once, from
    # the run's gpu_load_mean metric (farm.report.tables).
    load_note: str | None = None


# Called once per finished attempt: (phone identity, the run as stored, how it ended, its next state).
OnFinished = Callable[[str, StoredRun, RunResult, RunState], None]


@dataclass(frozen=True)
class Gates:
    """The experiment's conditions for a run (farm.engine.scheduler.gates_of builds them)."""

    max_temp_c: float
    cooldown_timeout_s: float
    min_battery_pct: float
    disable_charging: bool
    settle_s: float
    tolerance: float
    intensity: Intensity
    rate_hz: float
    run_timeout_s: float
    idle_baseline_s: float = 0.0
    within_c_of_idle: float | None = None  # relative cooldown gate (conditions.cooldown_limit_c)
    max_file_bytes: int = 256 << 20  # the largest file a run brings back (limits.run_file_mb)
