"""The experiment model: one frozen, validated `Experiment` per YAML file (and variant).

Load files with `farm.experiment.load(path, variant=None)`; it returns an `Experiment` or raises
`ConfigError("FILE:LINE: key.path: what is wrong")`. Building an `Experiment` in Python
(`Experiment.model_validate(dict)`) runs the same checks but raises `SpecProblem` (a
ConfigError without a line) for cross-field mistakes and pydantic's ValidationError for shapes.

A minimal file:

    name: smoke
    benchmark: {program: lstm, params: {seq_len: 16}}
    sweep: {backend: [cpu, gpu], gpu_load: [0, 0.5]}

What consumers use:
- `experiment.cells()` -> list[Cell] (sweep cross product minus excludes, zip groups honoured);
- `experiment.factor_names` (swept factors in file order), `experiment.fixed_params`;
- `experiment.program_args(cell)` -> the program's `--name=value` arguments for one cell,
  measurement arguments included (warmup, iters, min-seconds, max-seconds, seed); gpu_load is not among them;
- `experiment.gpu_load_of(cell)` -> background load level 0..1 for a cell (0.0 when not set);
- `experiment.qualified_name` -> `name` or `name.variant`: the key results are stored under;
- `experiment.settings_digest` -> hash of everything that changes what a run measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, StringConstraints, model_validator
from pydantic.json_schema import SkipJsonSchema

from farm.errors import ConfigError
from farm.experiment.checks import Issue, check
from farm.experiment.clocks import DEFAULT_CLOCKS
from farm.experiment.expand import Cell, canonical_json, cells_of, short_hash
from farm.experiment.external import ENV_NAME_PATTERN, Abi, OutputSpec, check_external
from farm.experiment.loader import format_path
from farm.experiment.programs import BENCH_PROGRAMS, GPU_LOAD, Program, factor_arg
from farm.experiment.sections import (
    MAX_ITERATIONS,
    Conditions,
    Devices,
    Frozen,
    GpuLoadSettings,
    Limits,
    Measurement,
    Name,
    Report,
    Retries,
    Slug,
    Telemetry,
    Text,
    Timeouts,
)
from farm.experiment.template import fields

Scalar = StrictBool | StrictInt | StrictFloat | StrictStr
Levels = Annotated[tuple[Scalar, ...], Field(min_length=1)]
ExcludeRule = Annotated[dict[Name, Scalar | tuple[Scalar, ...]], Field(min_length=1)]
ZipGroup = Annotated[tuple[Name, ...], Field(min_length=2)]


class SpecProblem(ConfigError):
    """Cross-field mistakes found after the shapes were valid; the loader adds FILE:LINE."""

    def __init__(self, issues: Sequence[Issue]) -> None:
        first = issues[0]
        more = f" (and {len(issues) - 1} more problems)" if len(issues) > 1 else ""
        super().__init__(f"{format_path(first.path)}: {first.message}{more}")
        self.issues = tuple(issues)


EnvName = Annotated[str, StringConstraints(strict=True, pattern=ENV_NAME_PATTERN, max_length=128)]


class Benchmark(Frozen):
    """Which program runs, with fixed arguments (`params`: argument name -> value).

    `program: external` runs the user's own binary instead (farm.experiment.external): `binary` by ABI,
    `args` and `env` with placeholders, `assets` pushed beside it, `output` its adapter. `tune`
    asks farm's own programs to tune their GPU kernels once per phone before the sweep."""

    program: Program
    params: dict[Name, Scalar] = Field(default_factory=dict)
    binary: dict[Abi, Text] = Field(default_factory=dict, description="external: ABI -> path of the binary")
    args: tuple[Scalar, ...] = Field(default=(), description="external: arguments, with {placeholders}")
    env: dict[EnvName, Scalar] = Field(default_factory=dict, description="external: environment variables")
    assets: tuple[Text, ...] = Field(default=(), description="external: files pushed to the phone")
    output: OutputSpec | None = Field(
        default=None, description="external: jsonl, tflite, llama_bench or regex"
    )
    cold_files: tuple[Text, ...] = Field(
        default=(),
        description="external: files (with {placeholders}, as args) dropped from the phone's page cache "
        "just before the program starts, so it reads them cold (farm.engine.pagecache)",
    )
    tune: StrictBool = Field(default=False, description="farm's programs: tune once per phone (--tune)")
    tune_budget_s: Annotated[StrictFloat, Field(gt=0, le=3600)] | None = Field(
        default=None, description="tune: search time per workload (the program's default: 30 s)"
    )

    @property
    def external(self) -> bool:
        return self.program is Program.EXTERNAL

    def placeholder_names(self) -> frozenset[str]:
        """The factor and measurement names an external program's args and env use."""
        texts = [str(a) for a in self.args] + [str(v) for v in self.env.values()]
        return frozenset(f.name for text in texts for f in fields(text) if f.asset is None)


class Experiment(Frozen):
    """A validated experiment. See the module docstring for the file format and the API."""

    name: Slug
    description: str = ""
    benchmark: Benchmark
    sweep: dict[Name, Levels] = Field(default_factory=dict)
    zip: tuple[ZipGroup, ...] = ()
    exclude: tuple[ExcludeRule, ...] = ()
    devices: Devices = Devices()
    measurement: Measurement = Measurement()
    gpu_load: GpuLoadSettings = GpuLoadSettings()
    telemetry: Telemetry = Telemetry()
    conditions: Conditions = Conditions()
    timeouts: Timeouts = Timeouts()
    retries: Retries = Retries()
    limits: Limits = Limits()
    report: Report = Report()
    variants: dict[Slug, dict[str, Any]] = Field(
        default_factory=dict, description="named overrides merged over the file, e.g. quick: {sweep: ...}"
    )
    variant: SkipJsonSchema[Slug | None] = Field(default=None, description="set by the loader")
    # The experiment file's folder: an external program's binary and asset paths are relative to
    # it. Set by the loader; None (in Python) means the current directory.
    source_dir: SkipJsonSchema[str | None] = Field(default=None, description="set by the loader")

    @model_validator(mode="before")
    @classmethod
    def _gpu_load_levels_are_floats(cls, data: Any) -> Any:
        # gpu_load 0 and 0.0 must be the same cell (same id), so store levels as floats.
        if isinstance(data, dict) and isinstance(data.get("sweep"), dict):
            levels = data["sweep"].get(GPU_LOAD)
            if isinstance(levels, list) and all(_is_number(v) for v in levels):
                data = {**data, "sweep": {**data["sweep"], GPU_LOAD: [float(v) for v in levels]}}
        return data

    @model_validator(mode="after")
    def _cross_field_checks(self) -> Experiment:
        issues = check(self)
        if self.benchmark.external:
            issues += check_external(self.benchmark, self.sweep, self.zip)
        else:
            issues += _farm_program_checks(self.benchmark)
        sustained = self.measurement.sustained_s
        if sustained is not None and self.timeouts.run_timeout_s <= sustained:
            issues.append(
                Issue(
                    ("measurement", "sustained_s"),
                    f"{_plain(sustained)} s runs need timeouts.run_timeout_s above it "
                    f"(it is {_plain(self.timeouts.run_timeout_s)})",
                )
            )
        if issues:
            raise SpecProblem(issues)
        return self

    @property
    def factor_names(self) -> tuple[str, ...]:
        return tuple(self.sweep)

    @property
    def fixed_params(self) -> dict[str, Any]:
        return dict(self.benchmark.params)

    @property
    def qualified_name(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name

    def cells(self) -> list[Cell]:
        return cells_of(self.sweep, self.zip, self.exclude)

    def gpu_load_of(self, cell: Cell) -> float:
        level = cell.get(GPU_LOAD, self.benchmark.params.get(GPU_LOAD, 0.0))
        return float(level) if level is not None else 0.0

    def resolve_path(self, path: str) -> Path:
        """A binary or asset path of the file, made absolute from the file's folder."""
        return Path(self.source_dir or ".").joinpath(path).resolve()

    def placeholder_values(self, cell: Cell, min_seconds: float | None = None) -> dict[str, str]:
        """What an external program's {placeholders} stand for in this cell, assets aside (the
        engine adds `asset:PATH` -> phone path, known once the asset is deployed)."""
        values = {name: _text(value) for name, value in cell.as_dict().items()}
        values.update(_measurement_values(self.measurement, min_seconds))
        return values

    def program_args(self, cell: Cell, min_seconds: float | None = None) -> tuple[str, ...]:
        """Arguments for the benchmark program in this cell: params, cell factors, measurement.
        `min_seconds` replaces measurement.min_seconds (an energy window extended for a slow fuel
        gauge, farm.engine.measurement.energy_window).

        Not for external programs, whose arguments are their own templates
        (farm.engine.program.external_command renders them)."""
        program = self.benchmark.program
        assert program is not Program.EXTERNAL, "external programs: farm.engine.program.external_command"
        values: dict[str, Any] = {**self.benchmark.params, **cell.as_dict()}
        values.pop(GPU_LOAD, None)
        rendered = []
        for name in sorted(values):
            arg = factor_arg(program, name)
            assert arg is not None, f"{name} passed the checks but is not an argument of {program}"
            rendered.append(arg.render(values[name]))
        m = self.measurement
        if program in BENCH_PROGRAMS:
            values = _measurement_values(m, min_seconds)
            rendered += [f"--{name.replace('_', '-')}={values[name]}" for name in _MEASURED_ORDER]
        elif "duration_s" not in values:  # gpuload runs until SIGTERM without it
            rendered.append(f"--duration-s={_plain(m.max_seconds)}")
        return tuple(rendered)

    @cached_property
    def settings_digest(self) -> str:
        """Hash of what changes a measurement (not name, description, report or run order).

        Store it with runs; when a resumed experiment's digest differs, the file was edited.
        """
        data = self.model_dump(
            mode="json",
            exclude={"name", "description", "report", "variants", "variant", "source_dir", "limits"},
        )
        data["measurement"].pop("order")
        # Keys added after experiments were stored count only when set, so old digests still match.
        for key, empty in (
            ("binary", {}),
            ("args", []),
            ("env", {}),
            ("assets", []),
            ("output", None),
            ("tune", False),
            ("tune_budget_s", None),
        ):
            if data["benchmark"].get(key) == empty:
                data["benchmark"].pop(key)
        for key, default in (("clocks", DEFAULT_CLOCKS.model_dump(mode="json")), ("on_throttle", "flag")):
            if data["conditions"].get(key) == default:
                data["conditions"].pop(key)
        if data["measurement"].get("sustained_s") is None:
            data["measurement"].pop("sustained_s", None)
        if data["telemetry"].get("gauge_updates") == 5:  # added later: old digests still match
            data["telemetry"].pop("gauge_updates")
        if data["conditions"]["cooldown"].get("within_c_of_idle") is None:
            data["conditions"]["cooldown"].pop("within_c_of_idle", None)
        # How a lost phone is recovered changes no measurement (and old nights' digests stay).
        data["timeouts"].pop("lost_phone_wait_s")
        data["retries"].pop("reboot")
        return short_hash(canonical_json(data))


_MEASURED_ORDER = ("warmup", "iters", "min_seconds", "max_seconds", "seed")


def _measurement_values(m: Measurement, min_seconds: float | None = None) -> dict[str, str]:
    """The measurement arguments every run gets, as text (farm's programs and placeholders);
    `min_seconds` lengthens the window (never past max_seconds; not for sustained runs)."""
    # Sustained: measure for exactly sustained_s, however many iterations that takes.
    iters = MAX_ITERATIONS if m.sustained_s is not None else m.iterations
    low = m.sustained_s if m.sustained_s is not None else m.min_seconds
    if min_seconds is not None and m.sustained_s is None:
        low = min(max(low, min_seconds), m.max_seconds)
    high = m.sustained_s if m.sustained_s is not None else m.max_seconds
    return {
        "warmup": str(m.warmup),
        "iters": str(iters),
        "min_seconds": _plain(low),
        "max_seconds": _plain(high),
        "seed": str(m.seed),
    }


def _farm_program_checks(benchmark: Benchmark) -> list[Issue]:
    """The external-only keys are refused for farm's own programs; tune needs a benchmark loop."""
    issues = []
    for key in ("binary", "args", "env", "assets", "output", "cold_files"):
        if getattr(benchmark, key):
            issues.append(
                Issue(("benchmark", key), f"is for program: external; {benchmark.program.value} takes params")
            )
    if benchmark.tune and benchmark.program not in BENCH_PROGRAMS:
        issues.append(Issue(("benchmark", "tune"), f"{benchmark.program.value} has no kernels to tune"))
    if benchmark.tune_budget_s is not None and not benchmark.tune:
        issues.append(Issue(("benchmark", "tune_budget_s"), "is the budget of tune: true; set tune too"))
    return issues


def _text(value: Any) -> str:
    """A level as a program reads it: true/false as 1/0 (like farm's own flags), numbers plainly."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return _plain(value)
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _plain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)
