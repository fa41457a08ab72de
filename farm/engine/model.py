"""The engine's value types: what one phone was prepared with, what one run asks, how it ended,
and the gates every run passes. Plain frozen data (RunResult is filled in by its attempt); the
modules that act on them (lifecycle, conditions, collect, baseline, scheduler) import this one
and never each other's types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from farm.device.session import DeviceSession
from farm.engine.deploy import Deployed
from farm.fleet.inventory import Phone
from farm.spec.programs import Program
from farm.spec.sections import Intensity
from farm.store import Metric, Outcome
from farm.telemetry.probe import Capabilities


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
class PreparedPhone:
    """A phone probed and deployed to, once per phone per sweep. `caps` is what farm-probe found,
    parsed once here: every later question about the phone (charging node, GPU busy counter,
    thermal zones, battery conventions, sampler sources) is answered from it."""

    session: DeviceSession
    phone: Phone
    caps: Capabilities
    programs: dict[str, Deployed]
    # This session's idle power of the phone (farm.engine.baseline.IdleBaseline.as_dict), or None.
    idle_baseline: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunJob:
    """One attempt's orders: which program with which arguments under which load."""

    run_id: str
    experiment_key: str  # name (or name.variant): the results folder
    factors: dict[str, Any]
    program_args: tuple[str, ...]
    program: Program
    gpu_load: float
    artifacts: Path


@dataclass
class RunResult:
    """How one attempt ended; the attempt fills it in as it goes (the scheduler reads it after)."""

    outcome: Outcome
    error: str | None = None
    exit_code: int | None = None
    load_achieved: float | None = None
    env: dict[str, Any] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


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
