"""The engine's value types: what one phone was prepared with, what one run asks, how it ended,
and the gates every run passes. Plain frozen data (RunResult is filled in by its attempt); the
modules that act on them (lifecycle, conditions, collect, baseline, scheduler) import this one
and never each other's types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from farm.device.session import DeviceSession
from farm.engine.deploy import Deployed
from farm.fleet.inventory import Phone
from farm.store import Metric, Outcome
from farm.telemetry.probe import Capabilities


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
    program: str
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
    intensity: str
    rate_hz: float
    run_timeout_s: float
    idle_baseline_s: float = 0.0
