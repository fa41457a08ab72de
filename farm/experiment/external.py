"""`program: external`: a researcher's own binary, with its assets and an output adapter.

    benchmark:
      program: external
      binary: {x86_64: ../kernels/examples/build/x86_64/example-matmul,
               arm64-v8a: ../kernels/examples/build/arm64-v8a/example-matmul}
      args: [--n={n}, --iters={iters}, --input={asset:data/seed.bin}]
      env: {OMP_NUM_THREADS: "{threads}"}
      assets: [data/seed.bin]
      output: jsonl                    # or tflite, or {adapter: regex, patterns: ..., metrics: ...}

A sweep factor's level that is one of the listed assets stands for that asset's path on the phone
(`sweep: {model: [models/a.gguf, models/b.gguf]}` with `args: [-m, "{model}"]`: each run gets its
model, every listed model is pushed once per phone, content-addressed). Paths are relative to
the experiment file. Every sweep factor (gpu_load aside, which farm itself
applies) must appear as a placeholder in args or env, every placeholder must be a factor, a
measurement value or a listed asset, and every listed asset must be used (farm.experiment.template
gives the syntax). `check_external` is pure; that the files exist is checked by the loader
(farm.experiment.files), the only place that reads the disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Protocol

from pydantic import Field, model_validator
from pydantic import ValidationError as PydanticValidationError

from farm.adapters import AdapterName, OutputAdapter, RegexMetric, RegexSpec, Stream, adapter_for
from farm.experiment.checks import Issue, suggest
from farm.experiment.programs import GPU_LOAD, MEASUREMENT_ARGS
from farm.experiment.sections import Frozen
from farm.experiment.template import TemplateError, fields


class Abi(StrEnum):
    """Android ABIs a binary can be given for (what ro.product.cpu.abilist names)."""

    ARM64_V8A = "arm64-v8a"
    ARMEABI_V7A = "armeabi-v7a"
    X86_64 = "x86_64"
    X86 = "x86"


# Placeholders filled from the measurement section (the same values farm's own programs get).
MEASUREMENT_PLACEHOLDERS = tuple(MEASUREMENT_ARGS)
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class OutputSpec(Frozen):
    """How the program's output is read: `jsonl`, `tflite`, or a mapping with `adapter: regex`
    and the regex adapter's patterns / metrics / latency / inferences / stream."""

    adapter: AdapterName
    patterns: Annotated[tuple[str, ...], Field(min_length=1)] | None = None
    metrics: dict[str, RegexMetric] | None = None
    latency: str | None = None
    inferences: str | None = None
    stream: Stream = Stream.BOTH

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"adapter": data}
        if isinstance(data, dict) and isinstance(data.get("patterns"), str):
            return {**data, "patterns": [data["patterns"]]}
        return data

    @model_validator(mode="after")
    def _regex_needs_patterns(self) -> OutputSpec:
        given = [k for k in ("patterns", "metrics", "latency", "inferences") if getattr(self, k) is not None]
        if self.adapter is not AdapterName.REGEX:
            if given:
                raise ValueError(f"the {self.adapter.value} adapter takes no {given[0]} (only regex does)")
            return self
        if self.patterns is None or self.metrics is None:
            raise ValueError("the regex adapter needs patterns and metrics")
        self.regex()  # RegexSpec's own checks: patterns compile, groups exist, latency unit
        return self

    def regex(self) -> RegexSpec:
        try:
            return RegexSpec.model_validate(
                {
                    "patterns": self.patterns,
                    "metrics": self.metrics,
                    "latency": self.latency,
                    "inferences": self.inferences,
                    "stream": self.stream,
                }
            )
        except PydanticValidationError as error:
            raise ValueError(
                error.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")
            ) from None

    def adapter_of(self) -> OutputAdapter:
        """The configured parser (farm.adapters)."""
        return adapter_for(self.adapter, regex=self.regex() if self.adapter is AdapterName.REGEX else None)


class ExternalSpec(Protocol):
    """What `check_external` reads of the benchmark section (farm.experiment.model.Benchmark has it)."""

    @property
    def binary(self) -> Mapping[Abi, str]: ...
    @property
    def args(self) -> Sequence[object]: ...
    @property
    def env(self) -> Mapping[str, object]: ...
    @property
    def assets(self) -> Sequence[str]: ...
    @property
    def output(self) -> OutputSpec | None: ...
    @property
    def params(self) -> Mapping[str, object]: ...
    @property
    def tune(self) -> bool: ...
    @property
    def cold_files(self) -> Sequence[object]: ...


def asset_levels(assets: Sequence[str], sweep: Mapping[str, object]) -> set[str]:
    """The sweep's levels that name a listed asset (they render as its phone path)."""
    levels = {str(level) for values in sweep.values() if isinstance(values, list | tuple) for level in values}
    return levels & set(assets)


def check_external(
    benchmark: ExternalSpec, sweep: Mapping[str, object], zip_groups: Sequence[Sequence[str]] = ()
) -> list[Issue]:
    """Cross-field mistakes of an external benchmark (paths are ("benchmark", ...) key paths).
    A factor of a zip group that some other member's placeholder uses needs none of its own: it
    names levels that already differ (`backend: [cpu-4t, gpu]` zipped with `ngl: [0, 99]`)."""
    issues: list[Issue] = []
    if benchmark.params:
        name = next(iter(benchmark.params))
        issues.append(
            Issue(
                ("benchmark", "params", name),
                "an external program takes no params: write its fixed arguments in benchmark.args",
            )
        )
    if benchmark.tune:
        issues.append(
            Issue(("benchmark", "tune"), "tune is for farm's own programs; an external one has none")
        )
    if not benchmark.binary:
        issues.append(
            Issue(
                ("benchmark", "binary"),
                "an external program needs binary: {ABI: path, ...} (e.g. x86_64: ...)",
            )
        )
    if benchmark.output is None:
        issues.append(
            Issue(
                ("benchmark", "output"),
                "an external program needs output: jsonl, tflite, llama_bench or regex",
            )
        )
    used_names: set[str] = set()
    used_assets: set[str] = set()
    known = [*sweep, *MEASUREMENT_PLACEHOLDERS]
    places: list[tuple[tuple[str | int, ...], str]] = [
        (("benchmark", "args", index), str(arg)) for index, arg in enumerate(benchmark.args)
    ]
    places += [(("benchmark", "env", name), str(value)) for name, value in benchmark.env.items()]
    places += [
        (("benchmark", "cold_files", index), str(path)) for index, path in enumerate(benchmark.cold_files)
    ]
    for path, text in places:
        try:
            found = fields(text)
        except TemplateError as error:
            issues.append(Issue(path, str(error)))
            continue
        for field in found:
            if field.asset is not None:
                if field.asset not in benchmark.assets:
                    issues.append(
                        Issue(
                            path,
                            f"{{asset:{field.asset}}}: {field.asset} is not listed in benchmark.assets"
                            f"{suggest(field.asset, benchmark.assets)}",
                        )
                    )
                used_assets.add(field.asset)
            elif field.name not in known:
                hint = suggest(field.name, known) or f" (known: {', '.join(known)})"
                issues.append(
                    Issue(
                        path,
                        f"unknown placeholder {{{field.name}}}: not a sweep factor or measurement value"
                        f"{hint}",
                    )
                )
            else:
                used_names.add(field.name)
    used_assets |= asset_levels(benchmark.assets, sweep)
    for index, asset in enumerate(benchmark.assets):
        if asset in benchmark.assets[:index]:
            issues.append(Issue(("benchmark", "assets", index), f"{asset} is listed twice"))
        elif asset not in used_assets:
            issues.append(
                Issue(
                    ("benchmark", "assets", index),
                    f"{asset} is listed but no argument uses it; pass it as {{asset:{asset}}} or drop it",
                )
            )
    for group in zip_groups:
        if used_names & set(group):
            used_names |= set(group)
    for name in sweep:
        if name != GPU_LOAD and name not in used_names:
            issues.append(
                Issue(
                    ("sweep", name),
                    f"factor {name} is not used: put {{{name}}} in benchmark.args or benchmark.env, "
                    "or the runs of its levels would all be the same",
                )
            )
    return issues
