"""The clock ladder (pure): what an experiment's `conditions.clocks` asks, against what one phone
allows, gives the control farm applies and why.

    abilities = ClockAbilities(root=True, sdk=33, cpu=(CpuTable(...),), gpu=GpuTable(...))
    plan = plan_clocks(experiment.conditions.clocks, abilities)
    plan.ladder      # the modes to try, strongest first (auto: pin, fixed_performance, none)
    plan.cpu / gpu   # the pins, resolved to entries of the phone's own tables
    plan.refusal     # set when `required: true` and the phone cannot do the mode: skip the phone

Fixed performance mode can only be known to work by trying it (a power HAL without the mode
refuses it), so the ladder lists it and the engine (farm.engine.clocks) moves down a step when
the phone refuses; `fallback_after` says what the plan becomes then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from farm.experiment.clocks import Affinity, ClockLevel, ClockMode, Clocks, LevelKind

FIXED_PERFORMANCE_MIN_SDK = 30  # Android 11: PowerManagerShellCommand gained the mode


@dataclass(frozen=True)
class CpuTable:
    """One cpufreq policy as the phone lists it."""

    dir: str  # /sys/devices/system/cpu/cpufreq/policyN
    cpus: tuple[int, ...]
    freqs_khz: tuple[int, ...]  # ascending
    governors: tuple[str, ...]


@dataclass(frozen=True)
class GpuTable:
    """The GPU's devfreq device; on Adreno also the kgsl folder, whose power levels count from the
    fastest (pwrlevel 0 = the highest frequency)."""

    dir: str  # the devfreq folder: available_frequencies, min_freq, max_freq, governor
    freqs_hz: tuple[int, ...]  # ascending
    governors: tuple[str, ...]
    kgsl_dir: str | None = None


@dataclass(frozen=True)
class ClockAbilities:
    """What a phone lets farm do with its clocks."""

    root: bool
    sdk: int | None
    cpu: tuple[CpuTable, ...] = ()
    gpu: GpuTable | None = None


@dataclass(frozen=True)
class CpuPin:
    dir: str
    governor: str
    khz: int


@dataclass(frozen=True)
class GpuPin:
    dir: str
    governor: str
    hz: int
    kgsl_dir: str | None = None
    pwrlevel: int | None = None  # kgsl: index counted from the fastest


@dataclass(frozen=True)
class ClockPlan:
    requested: ClockMode
    ladder: tuple[ClockMode, ...]  # strongest first; ends with NONE unless the mode is required
    cpu: tuple[CpuPin, ...] = ()
    gpu: GpuPin | None = None
    affinity: Affinity = Affinity.ALL
    affinity_cpus: tuple[int, ...] = ()  # empty: no taskset
    notes: tuple[str, ...] = ()  # why a step of the ladder was left out
    refusal: str | None = None  # required and impossible: why the phone is skipped

    @property
    def mode(self) -> ClockMode:
        """The mode applied first (NONE for a refused plan)."""
        return self.ladder[0] if self.ladder else ClockMode.NONE

    def fallback_after(self, mode: ClockMode, why: str) -> ClockPlan:
        """The plan once the phone refused `mode` at apply time: the next step down, or a refusal
        when the experiment required that mode (its ladder has no other step)."""
        note = f"{mode.value} refused: {why}"
        rest = tuple(m for m in self.ladder if m is not mode)
        if not rest:
            return replace(self, ladder=(), notes=(*self.notes, note), refusal=note)
        return replace(self, ladder=rest, notes=(*self.notes, note))


def resolve_level(level: ClockLevel, table: Sequence[int], per_khz: int = 1) -> int:
    """The table entry (in the table's unit; `per_khz` of it make one kHz) a level names.

    nominal is the middle entry (the upper one of two), a fraction the highest entry at or below
    that share of the maximum (the lowest entry when none is), a frequency the nearest entry."""
    entries = sorted(table)
    if not entries:
        raise ValueError("empty frequency table")
    match level.kind:
        case LevelKind.MAX:
            return entries[-1]
        case LevelKind.MIN:
            return entries[0]
        case LevelKind.NOMINAL:
            return entries[len(entries) // 2]
        case LevelKind.FRACTION:
            assert level.fraction is not None
            limit = entries[-1] * level.fraction
            return max((f for f in entries if f <= limit), default=entries[0])
        case LevelKind.FREQUENCY:
            assert level.khz is not None
            target = level.khz * per_khz
            return min(entries, key=lambda f: (abs(f - target), f))


def _pin_blockers(spec: Clocks, abilities: ClockAbilities) -> list[str]:
    if not abilities.root:
        return ["needs root (adbd as root or a working su)"]
    tables = [t for t in abilities.cpu if t.freqs_khz]
    if not tables:
        return ["the phone lists no cpufreq frequency table"]
    # A policy that lists no governors may still take it: the write is read back and judged.
    without = [t.dir.rsplit("/", 1)[-1] for t in tables if t.governors and spec.governor not in t.governors]
    if without:
        return [f"governor {spec.governor} is not offered by {', '.join(without)}"]
    return []


def _affinity_cpus(affinity: Affinity, tables: Sequence[CpuTable]) -> tuple[int, ...]:
    ranked = sorted((t for t in tables if t.cpus and t.freqs_khz), key=lambda t: t.freqs_khz[-1])
    if affinity is Affinity.ALL or len(ranked) < 2:
        return ()
    return ranked[-1].cpus if affinity is Affinity.BIG else ranked[0].cpus


def plan_clocks(spec: Clocks, abilities: ClockAbilities) -> ClockPlan:
    """The ladder for one phone; see the module docstring."""
    wanted = {
        ClockMode.AUTO: (ClockMode.PIN, ClockMode.FIXED_PERFORMANCE, ClockMode.NONE),
        ClockMode.PIN: (ClockMode.PIN, ClockMode.FIXED_PERFORMANCE, ClockMode.NONE),
        ClockMode.FIXED_PERFORMANCE: (ClockMode.FIXED_PERFORMANCE, ClockMode.NONE),
        ClockMode.NONE: (ClockMode.NONE,),
    }[spec.mode]
    notes: list[str] = []
    ladder: list[ClockMode] = []
    for mode in wanted:
        blockers = []
        if mode is ClockMode.PIN:
            blockers = _pin_blockers(spec, abilities)
        elif mode is ClockMode.FIXED_PERFORMANCE and (abilities.sdk or 0) < FIXED_PERFORMANCE_MIN_SDK:
            blockers = [f"needs Android 11 (API 30) or later, the phone is API {abilities.sdk or 'unknown'}"]
        if blockers:
            notes.append(f"{mode.value} not possible: {blockers[0]}")
            if spec.required and mode is spec.mode:
                return ClockPlan(spec.mode, (), notes=tuple(notes), refusal=notes[-1])
            continue
        ladder.append(mode)
    if spec.required:
        ladder = [spec.mode]  # no fallback: the engine refuses the phone if this one fails
    cpu: tuple[CpuPin, ...] = ()
    gpu = None
    if ClockMode.PIN in ladder:
        cpu = tuple(
            CpuPin(t.dir, spec.governor, resolve_level(spec.cpu, t.freqs_khz))
            for t in abilities.cpu
            if t.freqs_khz
        )
        gpu = _gpu_pin(spec, abilities.gpu, notes)
    return ClockPlan(
        requested=spec.mode,
        ladder=tuple(ladder),
        cpu=cpu,
        gpu=gpu,
        affinity=spec.affinity,
        affinity_cpus=_affinity_cpus(spec.affinity, abilities.cpu),
        notes=tuple(notes),
    )


def _gpu_pin(spec: Clocks, table: GpuTable | None, notes: list[str]) -> GpuPin | None:
    if table is None or not table.freqs_hz:
        notes.append("GPU not pinned: the phone lists no GPU devfreq frequency table")
        return None
    governor = spec.governor if spec.governor in table.governors or not table.governors else "performance"
    if table.governors and governor not in table.governors:
        notes.append(f"GPU not pinned: its devfreq offers neither {spec.governor} nor performance")
        return None
    hz = resolve_level(spec.gpu, table.freqs_hz, per_khz=1000)
    pwrlevel = None
    if table.kgsl_dir is not None:
        pwrlevel = sorted(table.freqs_hz, reverse=True).index(hz)
    return GpuPin(table.dir, governor, hz, table.kgsl_dir, pwrlevel)
