"""The sections of an experiment file other than name / benchmark / sweep, with their defaults.

Every model is frozen and forbids unknown keys. Numbers are strict (the string "64" is not an
integer); choices are StrEnums so code compares against members, never against bare strings.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    model_validator,
)

from farm.experiment.clocks import DEFAULT_CLOCKS, Clocks, OnThrottle
from farm.experiment.programs import show

SLUG_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
NAME_PATTERN = r"^[a-z][a-z0-9_]*$"

Slug = Annotated[str, StringConstraints(strict=True, pattern=SLUG_PATTERN, max_length=64)]
Name = Annotated[str, StringConstraints(strict=True, pattern=NAME_PATTERN, max_length=64)]
Text = Annotated[str, StringConstraints(strict=True, min_length=1)]
Count = Annotated[StrictInt, Field(ge=1)]
# The benchmark programs' own limits (kernels/common FARM_OPTS_BENCH).
MAX_ITERATIONS = 1_000_000_000
MAX_MEASURE_S = 1_000_000.0
Seconds = Annotated[StrictFloat, Field(ge=0)]
PositiveSeconds = Annotated[StrictFloat, Field(gt=0)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False, allow_inf_nan=False)


class Order(StrEnum):
    INTERLEAVED = "interleaved"  # round-robin over cells, repetition-major, shuffled per round
    GROUPED = "grouped"  # all repetitions of a cell back to back, cells in file order
    RANDOM = "random"  # one seeded shuffle of everything


class Intensity(StrEnum):
    COMPUTE = "compute"
    MEMORY = "memory"


class PowerSource(StrEnum):
    BATTERY = "battery"  # the phone's fuel gauge (current_now x voltage_now)
    TREPN = "trepn"  # an imported Trepn profiler export
    NONE = "none"


class GpuFamily(StrEnum):
    ADRENO = "adreno"
    MALI = "mali"
    POWERVR = "powervr"
    OTHER = "other"


class RetryOn(StrEnum):
    TIMEOUT = "timeout"  # the run passed timeouts.run_timeout_s
    LOST = "lost"  # the phone dropped off (USB, adb, reboot)
    ERROR = "error"  # the benchmark exited non-zero


class FigureKind(StrEnum):
    LINE = "line"
    BAR = "bar"
    BOX = "box"


class Devices(Frozen):
    """Which phones run the experiment. `devices: all` and `devices: [serial, ...]` are shorthands.

    Every given criterion must hold (serials, model, gpu_family, tags from the farm config).
    `spread: false` (default) pins every run to each selected phone (per-device results, since
    phones differ); `spread: true` shares the runs out over equivalent phones.
    """

    serials: tuple[Text, ...] = ()
    model: Text | None = None
    gpu_family: GpuFamily | None = None
    tags: tuple[Slug, ...] = ()
    min_count: Count = 1
    spread: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        if data == "all":
            return {}
        if isinstance(data, list):
            return {"serials": data}
        if not isinstance(data, dict):
            raise ValueError(
                f"expected all, a list of serials or a mapping (serials, model, gpu_family, tags, "
                f"min_count, spread), got {show(data)}"
            )
        return data

    def matches(self, serial: str, model: str | None, gpu_family: str | None, tags: frozenset[str]) -> bool:
        """Whether a phone with these properties is selected (fleet supplies them)."""
        if self.serials and serial not in self.serials and serial.split("/")[-1] not in self.serials:
            return False
        if self.model is not None and (model or "").lower() != self.model.lower():
            return False
        if self.gpu_family is not None and gpu_family != self.gpu_family.value:
            return False
        return set(self.tags) <= tags


class Measurement(Frozen):
    """How each run measures: bounded by count AND time, repeated, in a seeded order."""

    warmup: Annotated[StrictInt, Field(ge=0, le=MAX_ITERATIONS)] = 5
    iterations: Annotated[StrictInt, Field(ge=1, le=MAX_ITERATIONS)] = 50
    min_seconds: Annotated[StrictFloat, Field(ge=0, le=MAX_MEASURE_S)] = 1.0
    max_seconds: Annotated[StrictFloat, Field(gt=0, le=MAX_MEASURE_S)] = 60.0
    repetitions: Annotated[StrictInt, Field(ge=1, le=10_000)] = 3
    order: Order = Order.INTERLEAVED
    seed: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] = 0
    # Sustained mode: every run measures for exactly this long (iterations unbounded), to see
    # latency and clocks over time; throttling is then what is measured, not a reason to flag it.
    sustained_s: Annotated[StrictFloat, Field(gt=0, le=MAX_MEASURE_S)] | None = None


class GpuLoadSettings(Frozen):
    """How the background GPU load (factor gpu_load) is held and verified."""

    settle_s: Seconds = 3.0
    tolerance: Annotated[StrictFloat, Field(gt=0, le=1)] = 0.05
    intensity: Intensity = Intensity.COMPUTE


class Telemetry(Frozen):
    """What the on-phone sampler records during a run, and how power is measured.

    Charging is always restored after a run (`restore: always`), also after a crash.
    """

    rate_hz: Annotated[StrictFloat, Field(gt=0, le=1000)] = 20.0
    sources: Literal["auto"] | tuple[Slug, ...] = "auto"
    power: PowerSource = PowerSource.BATTERY
    disable_charging: StrictBool = True
    restore: Literal["always"] = "always"
    # Idle power sampled once per phone per `farm run`, subtracted for net energy: at least this
    # long, extended until the fuel gauge has updated a few times; 0 disables it.
    idle_baseline_s: Annotated[StrictFloat, Field(ge=0, le=600)] = 5.0
    # With battery power measured, each run's measuring window covers at least this many fuel-gauge
    # updates (the gauge's interval from the idle baseline), at most measurement.max_seconds.
    gauge_updates: Annotated[StrictInt, Field(ge=1, le=100)] = 5


class Cooldown(Frozen):
    """Before each run, wait (at most timeout_s) until the phone is at most max_temp_c and, with
    within_c_of_idle, at most that many degrees above what it read when farm first prepared it in
    this sweep (its idle temperature): a relative gate for labs whose phones idle warm or cold."""

    max_temp_c: Annotated[StrictFloat, Field(gt=0, le=120)] = 40.0
    within_c_of_idle: Annotated[StrictFloat, Field(gt=0, le=50)] | None = None
    timeout_s: Seconds = 300.0


class Conditions(Frozen):
    """Gates checked before every run."""

    cooldown: Cooldown = Cooldown()
    min_battery_pct: Annotated[StrictInt, Field(ge=0, le=100)] = 20
    clocks: Clocks = DEFAULT_CLOCKS
    on_throttle: OnThrottle = OnThrottle.FLAG


class Timeouts(Frozen):
    run_timeout_s: PositiveSeconds = 600.0
    device_call_timeout_s: PositiveSeconds = 30.0
    # How long each step of the recovery ladder waits for a phone that dropped off to answer again
    # (a USB phone rebooting by itself takes about a minute); a reboot or power-cycle waits at least
    # 3 minutes.
    lost_phone_wait_s: PositiveSeconds = 120.0


class Limits(Frozen):
    """What one experiment may cost the coordinator, whatever its phones send back."""

    # The largest file a run brings back (the program's stdout, a trace, ...): a larger one fails
    # its run and stays on the phone. A 1 kHz trace of an hour is well under the default.
    run_file_mb: Annotated[StrictInt, Field(ge=1, le=65536)] = 256
    # The most a plan may add to the store (its runs' rows): larger plans are refused before
    # anything is written (farm.store.runs.plan_bytes measures it).
    plan_store_mb: Annotated[StrictInt, Field(ge=1, le=1_000_000)] = 64

    @property
    def run_file_bytes(self) -> int:
        return self.run_file_mb << 20

    @property
    def plan_store_bytes(self) -> int:
        return self.plan_store_mb << 20


class Retries(Frozen):
    max_attempts: Count = 3
    on: tuple[RetryOn, ...] = (RetryOn.TIMEOUT, RetryOn.LOST)
    # May the recovery ladder reboot a phone that stopped answering? Off by default: a reboot
    # loses whatever state the experiment set up on the phone (and takes a minute).
    reboot: StrictBool = False


Level = StrictBool | StrictInt | StrictFloat | Annotated[str, StringConstraints(strict=True)]
# A view's filter: factor -> one level, or a list meaning any of them.
Where = dict[Name, Level | tuple[Level, ...]]


class ShareOf(Frozen):
    """Parts of a whole, as metrics per run: `part` summed over `whole` summed (data movement,
    h2d + d2h, over h2d + d2h + kernel time)."""

    part: Annotated[tuple[Name, ...], Field(min_length=1)]
    whole: Annotated[tuple[Name, ...], Field(min_length=1)]


class Figure(Frozen):
    """One figure of the report: x / color / facet name factors (or `device`), y a metric.
    `where` keeps only the cells with those levels; every other factor that varies must be named
    or listed in `pool` (its levels are then averaged into each point, and the caption says so).

    Derived figures are per phone (one panel each): `relative_to: {backend: cpu}` draws every other
    level's ratio of medians of y against that one, one line (or bar) per level, with its bootstrap
    CI (`speedup: true`: reference / level); `share_of: {part: [...], whole: [...]}` draws the
    median over runs of each run's part / whole, one line per level of `color`.
    `crossover: gpu_load` (with relative_to, the figure's numeric x) marks where each line's ratio
    crosses 1, its bootstrap CI shaded; `best_of: g` (a plain figure's x, phones named by color or
    facet) marks each line's level with the lowest median."""

    x: Name
    y: Name = "latency_median_ms"
    color: Name | None = None
    facet: Name | None = None
    kind: FigureKind = FigureKind.LINE
    title: Text | None = None
    where: Where = Field(default_factory=dict)
    pool: tuple[Name, ...] = ()
    relative_to: Annotated[dict[Name, Level], Field(min_length=1, max_length=1)] | None = None
    speedup: StrictBool = False
    share_of: ShareOf | None = None
    crossover: Name | None = None
    best_of: Name | None = None

    @property
    def named(self) -> tuple[str, ...]:
        derived = (*(self.relative_to or {}), "device") if self.relative_to or self.share_of else ()
        return tuple(dict.fromkeys(a for a in (self.x, self.color, self.facet, *derived) if a is not None))


class Table(Frozen):
    """One table of the report: a row per phone and combination of `rows` (factors) with each of
    `metrics` as median [95% CI]; `where` and `pool` as for figures. Derived tables (one metric):
    `relative_to: {backend: cpu}` shows every other level's ratio of medians against that one
    (`speedup: true`: reference / level), `crossover: gpu_load` (with relative_to) the level of a
    numeric factor where that ratio crosses 1, `best_of: g` the level with the lowest median."""

    rows: tuple[Name, ...] = ()
    metrics: Annotated[tuple[Name, ...], Field(min_length=1)] = ("latency_median_ms",)
    title: Text | None = None
    where: Where = Field(default_factory=dict)
    pool: tuple[Name, ...] = ()
    relative_to: Annotated[dict[Name, Level], Field(min_length=1, max_length=1)] | None = None
    speedup: StrictBool = False
    crossover: Name | None = None
    best_of: Name | None = None

    @property
    def named(self) -> tuple[str, ...]:
        derived = [*(self.relative_to or {}), self.crossover, self.best_of]
        return (*self.rows, *(name for name in derived if name is not None))


class Study(StrEnum):
    """The seed study an experiment reproduces: its report opens with a section that makes the
    paper's argument from the data (farm.report.studies)."""

    MOBIRNN = "mobirnn"  # Cao et al., EMDL 2017: LSTM on the phone GPU under background load
    SQUEEZENET = "squeezenet"  # Motamedi et al., arXiv 1611.07151: SqueezeNet, precision, g
    TRAINING = "training"  # Das et al., PerCom Workshops 2022: training on the phone GPU
    GEMM = "gemm"  # Augur (Lu et al., ACM MM 2017): GEMM as the building block of CNN layers
    LLM = "llm"  # language models (llama-bench): prefill/decode, GPU offload under load, energy


class Report(Frozen):
    study: Study | None = None
    figures: tuple[Figure, ...] = ()
    tables: tuple[Table, ...] = ()
