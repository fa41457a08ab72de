"""Cross-field checks of an experiment whose shapes are already valid (pure).

Each check returns Issues with the key path of the offending node, so the loader can name the
line. Messages say what is wrong and, where it helps, what to write instead. The checks read the
experiment through `CheckedSpec`, the part of farm.experiment.model.Experiment they need, so the model
(which runs them from its validator) and this module do not import each other.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from farm.analysis.pooling import pooled_factors
from farm.experiment.expand import Cell, cross_product_size, level_key, rule_matches, same_level
from farm.experiment.programs import GPU_LOAD, MEASUREMENT_ARGS, Program, arguments, factor_arg, show
from farm.experiment.sections import Devices, Figure, Measurement, Report, Table

Scalar = bool | int | float | str


class CheckedBenchmark(Protocol):
    @property
    def program(self) -> Program: ...

    @property
    def params(self) -> Mapping[str, Scalar]: ...


class CheckedSpec(Protocol):
    """What the checks read of an experiment (farm.experiment.model.Experiment has all of it)."""

    @property
    def benchmark(self) -> CheckedBenchmark: ...

    @property
    def sweep(self) -> Mapping[str, Sequence[Scalar]]: ...

    @property
    def zip(self) -> Sequence[Sequence[str]]: ...

    @property
    def exclude(self) -> Sequence[Mapping[str, Scalar | Sequence[Scalar]]]: ...

    @property
    def devices(self) -> Devices: ...

    @property
    def measurement(self) -> Measurement: ...

    @property
    def report(self) -> Report: ...

    def cells(self) -> list[Cell]: ...


# More runs than this is a typo or a hostile file, not a lab plan (~1 week of 6 s runs on one phone).
MAX_PLANNED_RUNS = 100_000
# Figure axes may name a factor or one of these columns every result has.
FIGURE_COLUMNS = ("device", "repetition")


@dataclass(frozen=True)
class Issue:
    """One cross-field mistake: where (key path) and what."""

    path: tuple[str | int, ...]
    message: str


def suggest(word: str, candidates: Iterable[str]) -> str:
    """`; did you mean X?` for the closest candidate (difflib), or "" when none is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def check(experiment: CheckedSpec) -> list[Issue]:
    issues: list[Issue] = []
    # An external program's params and factor names are checked by farm.experiment.external.
    if experiment.benchmark.program is not Program.EXTERNAL:
        issues += _check_params(experiment)
    issues += _check_sweep(experiment)
    issues += _check_zip(experiment)
    issues += _check_exclude(experiment)
    issues += _check_figures(experiment)
    issues += _check_other(experiment)
    if not issues:
        issues += _check_plan_size(experiment)
    if not issues and not experiment.cells():
        issues.append(_issue(("exclude",), "the exclude rules remove every cell of the sweep"))
    return issues


def _issue(path: Sequence[str | int], message: str) -> Issue:
    return Issue(path=tuple(path), message=message)


def _unknown_name(experiment: CheckedSpec, name: str) -> str | None:
    """Why `name` cannot be a params key or factor of this program, or None when it can."""
    program = experiment.benchmark.program
    if name in MEASUREMENT_ARGS:
        return f"is set by {MEASUREMENT_ARGS[name]}; set it there"
    if factor_arg(program, name) is None:
        known = [*arguments(program), GPU_LOAD]
        hint = suggest(name, known) or f" (it takes: {', '.join(sorted(known))})"
        return f"program {program.value} has no argument {name}{hint}"
    return None


def _check_params(experiment: CheckedSpec) -> list[Issue]:
    issues = []
    program = experiment.benchmark.program
    for name, value in experiment.benchmark.params.items():
        path = ("benchmark", "params", name)
        unknown = _unknown_name(experiment, name)
        if unknown:
            issues.append(_issue(path, unknown))
            continue
        if name in experiment.sweep:
            issues.append(_issue(path, f"is also swept in sweep.{name}; keep one of the two"))
        arg = factor_arg(program, name)
        problem = arg.problem(value) if arg else None
        if problem:
            issues.append(_issue(path, problem))
    return issues


def _check_sweep(experiment: CheckedSpec) -> list[Issue]:
    issues = []
    program = experiment.benchmark.program
    zipped = {name for group in experiment.zip for name in group}
    for name, levels in experiment.sweep.items():
        unknown = _unknown_name(experiment, name)
        external = program is Program.EXTERNAL and name != GPU_LOAD
        if unknown and not (external and name not in MEASUREMENT_ARGS):
            issues.append(_issue(("sweep", name), unknown))
            continue
        arg = factor_arg(program, name)
        seen: set[tuple[object, ...]] = set()
        for index, value in enumerate(levels):
            problem = arg.problem(value, in_list=True) if arg is not None else None
            if problem:
                issues.append(_issue(("sweep", name, index), problem))
            elif name not in zipped and level_key(value) in seen:
                issues.append(_issue(("sweep", name, index), f"level {show(value)} is listed twice"))
            seen.add(level_key(value))
    return issues


def _check_zip(experiment: CheckedSpec) -> list[Issue]:
    issues = []
    seen: dict[str, int] = {}
    for group_index, group in enumerate(experiment.zip):
        for index, name in enumerate(group):
            path = ("zip", group_index, index)
            if name not in experiment.sweep:
                issues.append(
                    _issue(path, f"{name} is not a factor of sweep{suggest(name, experiment.sweep)}")
                )
            elif name in seen:
                issues.append(
                    _issue(
                        path,
                        f"{name} is already in zip group {seen[name]}; a factor "
                        "can be zipped with others only once",
                    )
                )
            seen.setdefault(name, group_index)
        lengths = {name: len(experiment.sweep[name]) for name in group if name in experiment.sweep}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{name} has {count}" for name, count in lengths.items())
            issues.append(
                _issue(("zip", group_index), f"zipped factors need the same number of levels: {detail}")
            )
        elif lengths and len(lengths) == len(group):
            issues += _duplicate_rows(experiment, group, group_index)
    return issues


def _duplicate_rows(experiment: CheckedSpec, group: Sequence[str], group_index: int) -> list[Issue]:
    rows = list(zip(*(experiment.sweep[name] for name in group), strict=True))
    seen: set[tuple[object, ...]] = set()
    for index, row in enumerate(rows):
        key = level_key(*row)
        if key in seen:
            shown = ", ".join(f"{name}={value}" for name, value in zip(group, row, strict=True))
            return [_issue(("sweep", group[0], index), f"zip group {group_index}: ({shown}) is listed twice")]
        seen.add(key)
    return []


def _check_exclude(experiment: CheckedSpec) -> list[Issue]:
    issues = []
    program = experiment.benchmark.program
    for rule_index, rule in enumerate(experiment.exclude):
        for name, wanted in rule.items():
            path = ("exclude", rule_index, name)
            if name not in experiment.sweep:
                where = (
                    "is fixed in benchmark.params, not swept"
                    if name in experiment.benchmark.params
                    else f"is not a factor of sweep{suggest(name, experiment.sweep)}"
                )
                issues.append(_issue(path, f"{name} {where}"))
                continue
            arg = factor_arg(program, name)
            options = wanted if isinstance(wanted, tuple) else (wanted,)
            for value in options:
                problem = arg.problem(value) if arg else None
                if problem:
                    issues.append(_issue(path, problem))
                    break
    return issues


def _check_plan_size(experiment: CheckedSpec) -> list[Issue]:
    """Refuse a plan too large to expand before anything expands it (cells x repetitions)."""
    cells = cross_product_size(experiment.sweep, experiment.zip)
    repetitions = experiment.measurement.repetitions
    if cells * repetitions <= MAX_PLANNED_RUNS:
        return []
    excluded = " before exclude rules" if experiment.exclude else ""
    return [
        _issue(
            ("sweep",),
            f"the sweep has {cells:,} cells{excluded} x {repetitions} repetitions = "
            f"{cells * repetitions:,} runs; farm plans at most {MAX_PLANNED_RUNS:,} per experiment: "
            "list fewer levels, zip factors that go together, or split it into several experiments",
        )
    ]


def _check_figures(experiment: CheckedSpec) -> list[Issue]:
    """Figures and tables: axes name factors or columns, `where` levels exist, and no factor that
    varies within a point is left unnamed unless the view lists it in `pool`."""
    issues: list[Issue] = []
    columns = [*experiment.sweep, *FIGURE_COLUMNS]
    views: list[tuple[str, int, Figure | Table, tuple[str, ...]]] = [
        *(("figures", i, f, ("x", "color", "facet")) for i, f in enumerate(experiment.report.figures)),
        *(("tables", i, t, ("rows",)) for i, t in enumerate(experiment.report.tables)),
    ]
    for section, index, view, axes in views:
        path = ("report", section, index)
        found = len(issues)
        for axis in axes:
            value = getattr(view, axis)
            for position, name in enumerate(value if isinstance(value, tuple) else (value,)):
                if name is not None and name not in columns:
                    at = (*path, axis, position) if isinstance(value, tuple) else (*path, axis)
                    issues.append(
                        _issue(
                            at,
                            f"{name} is not a swept factor or {' / '.join(FIGURE_COLUMNS)}"
                            f"{suggest(name, columns)}",
                        )
                    )
        issues += _check_where(experiment, (*path, "where"), view.where)
        if isinstance(view, Table):
            issues += _check_table(experiment, path, view)
        else:
            issues += _check_derived_figure(experiment, path, view)
            issues += _check_figure_marks(experiment, path, view)
        for position, name in enumerate(view.pool):
            if name not in experiment.sweep and not (section == "tables" and name == "device"):
                issues.append(
                    _issue(
                        (*path, "pool", position),
                        f"{name} is not a swept factor{suggest(name, experiment.sweep)}",
                    )
                )
        if len(issues) == found and cross_product_size(experiment.sweep, experiment.zip) <= MAX_PLANNED_RUNS:
            issues += _check_pooling(experiment, path, view)
    return issues


def _check_table(experiment: CheckedSpec, path: tuple[str | int, ...], table: Table) -> list[Issue]:
    issues = []
    derived = table.relative_to is not None or table.best_of is not None
    if derived and len(table.metrics) > 1:
        issues.append(_issue((*path, "metrics"), "a derived table (relative_to, best_of) shows one metric"))
    if table.relative_to is not None:
        issues += _check_where(experiment, (*path, "relative_to"), table.relative_to)
    elif table.speedup:
        issues.append(_issue((*path, "speedup"), "needs relative_to: {factor: reference level}"))
    if table.crossover is not None:
        levels = experiment.sweep.get(table.crossover)
        if table.relative_to is None:
            issues.append(_issue((*path, "crossover"), "needs relative_to: {factor: reference level}"))
        elif levels is None or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in levels
        ):
            issues.append(_issue((*path, "crossover"), f"{table.crossover} is not a numeric swept factor"))
    for name in (table.best_of,):
        if name is not None and name not in experiment.sweep:
            issues.append(
                _issue((*path, "best_of"), f"{name} is not a swept factor{suggest(name, experiment.sweep)}")
            )
    return issues


def _check_derived_figure(
    experiment: CheckedSpec, path: tuple[str | int, ...], figure: Figure
) -> list[Issue]:
    """relative_to / speedup / share_of: one of them, a reference level that exists, and axes a
    per-phone derived figure can draw (phones are its panels; relative_to's levels its lines)."""
    issues = []
    if figure.relative_to is None and figure.speedup:
        issues.append(_issue((*path, "speedup"), "needs relative_to: {factor: reference level}"))
    if figure.relative_to is not None and figure.share_of is not None:
        issues.append(_issue((*path, "share_of"), "a figure is relative_to or share_of, not both"))
    if figure.relative_to is None and figure.share_of is None:
        return issues
    kind = "relative_to" if figure.relative_to is not None else "share_of"
    if figure.x == "device":
        issues.append(
            _issue((*path, "x"), f"a {kind} figure has one panel per phone; x names a swept factor")
        )
    if figure.facet is not None and figure.facet != "device":
        issues.append(_issue((*path, "facet"), f"a {kind} figure has one panel per phone; leave facet out"))
    if figure.relative_to is not None:
        issues += _check_where(experiment, (*path, "relative_to"), figure.relative_to)
        (factor,) = figure.relative_to
        if factor == figure.x:
            issues.append(
                _issue(
                    (*path, "relative_to", factor),
                    f"{factor} is the figure's x; compare the levels of another factor along x",
                )
            )
        if figure.color is not None and figure.color != factor:
            issues.append(
                _issue(
                    (*path, "color"),
                    f"a relative_to figure draws one line per level of {factor}; "
                    f"leave color out or make it {factor}",
                )
            )
    return issues


def _numeric_factor(experiment: CheckedSpec, name: str) -> bool:
    levels = experiment.sweep.get(name)
    return levels is not None and all(isinstance(v, int | float) and not isinstance(v, bool) for v in levels)


def _check_figure_marks(experiment: CheckedSpec, path: tuple[str | int, ...], figure: Figure) -> list[Issue]:
    """crossover: a relative_to figure's numeric x; best_of: a plain figure's x, per phone."""
    issues = []
    if figure.crossover is not None:
        at = (*path, "crossover")
        if figure.relative_to is None:
            issues.append(
                _issue(at, "needs relative_to: {factor: reference level} (the ratio that crosses 1)")
            )
        elif figure.crossover != figure.x:
            issues.append(
                _issue(at, f"{figure.crossover} must be the figure's x ({figure.x}): it is marked along x")
            )
        elif not _numeric_factor(experiment, figure.crossover):
            issues.append(_issue(at, f"{figure.crossover} is not a numeric swept factor"))
    if figure.best_of is not None:
        at = (*path, "best_of")
        if figure.relative_to is not None or figure.share_of is not None:
            issues.append(
                _issue(at, "marks the lowest median of a plain figure; leave out relative_to / share_of")
            )
        elif figure.best_of not in experiment.sweep:
            issues.append(
                _issue(
                    at, f"{figure.best_of} is not a swept factor{suggest(figure.best_of, experiment.sweep)}"
                )
            )
        elif figure.best_of != figure.x:
            issues.append(
                _issue(at, f"{figure.best_of} must be the figure's x ({figure.x}): it is marked along x")
            )
        elif "device" not in (figure.color, figure.facet):
            issues.append(
                _issue(at, "the best level is per phone: name device as the figure's color or facet")
            )
    return issues


def _check_where(
    experiment: CheckedSpec, path: tuple[str | int, ...], where: Mapping[str, object]
) -> list[Issue]:
    issues = []
    for name, wanted in where.items():
        if name not in experiment.sweep:
            issues.append(
                _issue((*path, name), f"{name} is not a swept factor{suggest(name, experiment.sweep)}")
            )
            continue
        levels = experiment.sweep[name]
        for value in wanted if isinstance(wanted, tuple) else (wanted,):
            if not any(same_level(value, level) for level in levels):
                issues.append(
                    _issue(
                        (*path, name),
                        f"{name} has no level {show(value)}; "
                        f"its levels: {', '.join(show(v) for v in levels)}",
                    )
                )
    return issues


def _check_pooling(experiment: CheckedSpec, path: tuple[str | int, ...], view: Figure | Table) -> list[Issue]:
    cells = [c.as_dict() for c in experiment.cells() if rule_matches(view.where, c.as_dict())]
    if not cells:
        return [_issue((*path, "where"), "no cell of the sweep has these levels together")]
    rows = [{name: level_key(value) for name, value in cell.items()} for cell in cells]
    values: dict[str, dict[Hashable, Scalar]] = {
        name: {level_key(v): v for v in experiment.sweep[name]} for name in experiment.sweep
    }
    kind = "figure" if path[1] == "figures" else "table"
    issues = []
    for pooled in pooled_factors(rows, (*view.named, *view.pool), list(experiment.sweep)):
        shown = ", ".join(str(values[pooled.factor][key]) for key in pooled.levels)
        issues.append(
            _issue(
                path,
                f"{pooled.factor} varies within each point ({shown}) but the {kind} does not name "
                f"it: name it as an axis, hold it with `where: {{{pooled.factor}: ...}}`, "
                f"or say `pool: [{pooled.factor}]` to average over it",
            )
        )
    return issues


def _check_other(experiment: CheckedSpec) -> list[Issue]:
    issues = []
    measurement = experiment.measurement
    if measurement.max_seconds < measurement.min_seconds:
        issues.append(
            _issue(
                ("measurement", "max_seconds"), f"must not be below min_seconds ({measurement.min_seconds:g})"
            )
        )
    devices = experiment.devices
    if devices.serials and devices.min_count > len(devices.serials):
        issues.append(
            _issue(
                ("devices", "min_count"),
                f"is {devices.min_count} but only {len(devices.serials)} serials are listed",
            )
        )
    return issues
