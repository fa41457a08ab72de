"""The planner: experiment x phones -> runs in a seeded order, per-phone queues, time estimate.

Pure: no I/O, no clock, no global random state. The same experiment and device list always give
the same plan, and a run's id depends only on (experiment qualified name, cell factors,
repetition, device) -- never on order, time or how the YAML was written -- so running the same
file again finds the runs it already did (resume).

Device binding (`devices.spread` in the file):
- pinned (default): every selected phone runs every cell x repetition; `Run.device` is the phone
  and `plan.queues[device]` its queue. Results are per device, as phones differ.
- spread: each cell x repetition runs once on any of the (equivalent) phones; `Run.device` is
  None and there is one shared queue, `plan.queues[SHARED]`.

Order (`measurement.order`), applied to each queue separately:
- interleaved: repetition-major rounds (rep 0 of every cell, then rep 1, ...), the cells of each
  round shuffled by the seed (a different shuffle per round and per phone), so drift in
  temperature or battery does not line up with a factor;
- grouped: cells in file order, each cell's repetitions back to back;
- random: one seeded shuffle of every (cell, repetition).

    plan = plan(load("experiments/smoke.yaml"), ["emulator-5554", "lab1/ZY22"])
    for device, queue in plan.queues.items(): ...
    print(render_plan(plan))      # what `farm run --dry-run` shows
    left = plan.without(done_ids)  # what a resume still has to do, with its estimate

Phones the planner knows (`abilities`, from farm-probe) get no runs they cannot do: a gpu run or
a background GPU load on a phone without OpenCL, pinned clocks the file requires on a phone
without root. Those runs are in `plan.skipped` with the reason (stored SKIPPED, shown by
--dry-run), not in a queue to fail at run time.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from farm.errors import ConfigError
from farm.experiment.clocks import ClockMode
from farm.experiment.expand import Cell, canonical_json, short_hash
from farm.experiment.model import Experiment
from farm.experiment.programs import Program
from farm.experiment.sections import Order

SHARED = "*"  # queue key (and id component) of runs any phone may take (spread mode)
RUN_OVERHEAD_S = 4.0  # per run: sampler start/stop, artifact pull, restore (measured on virtual phones)
DEFAULT_ITERATION_S = 0.05  # assumed latency of one benchmark iteration when nothing better is known


@dataclass(frozen=True)
class Run:
    """One execution of the benchmark: a cell, a repetition, a phone (None: any, spread mode)."""

    run_id: str
    experiment: str
    cell: Cell
    repetition: int
    device: str | None

    @property
    def cell_id(self) -> str:
        return self.cell.cell_id


def run_id(experiment: str, cell: Cell, repetition: int, device: str | None) -> str:
    """Stable id of a run; see the module docstring for what it depends on."""
    key = [experiment, [[name, value] for name, value in cell.factors], repetition, device or SHARED]
    return short_hash(canonical_json(key), 16)


def _run_ids(
    experiment: str, cells: list[Cell], repetitions: int, device: str | None
) -> dict[tuple[str, int], str]:
    """`run_id` for many runs at once: the same text hashed, JSON encoded once per cell.

    canonical_json of a list is its items' encodings joined by "," inside brackets, so the
    key can be assembled from pre-encoded parts (a unit test holds the two equal).
    """
    prefix = canonical_json(experiment)
    suffix = canonical_json(device or SHARED)
    ids = {}
    for cell in cells:
        for rep in range(repetitions):
            ids[(cell.cell_id, rep)] = short_hash(f"[{prefix},{cell.encoded},{rep},{suffix}]", 16)
    return ids


@dataclass(frozen=True)
class PhoneAbilities:
    """What the planner knows one phone can do (farm-probe), to skip what it cannot at plan time."""

    opencl: bool
    root: bool


def cannot_run(experiment: Experiment, cell: Cell, abilities: PhoneAbilities) -> str | None:
    """Why a phone with these abilities cannot run this cell, or None when it can."""
    backend = cell.get("backend", experiment.benchmark.params.get("backend"))
    if not abilities.opencl:
        if backend == "gpu":
            return "backend gpu needs OpenCL, and this phone has no OpenCL driver (farm devices: OpenCL no)"
        if experiment.gpu_load_of(cell) > 0 or experiment.benchmark.program is Program.GPULOAD:
            return "a background GPU load needs OpenCL, and this phone has no OpenCL driver"
    clocks = experiment.conditions.clocks
    if clocks.required and clocks.mode is ClockMode.PIN and not abilities.root:
        return "conditions.clocks requires pinned clocks, which need root, and this phone has no root"
    return None


@dataclass(frozen=True)
class Plan:
    experiment: Experiment
    devices: tuple[str, ...]
    cells: tuple[Cell, ...]
    queues: Mapping[str, tuple[Run, ...]]  # device (or SHARED) -> runs in execution order
    estimated_s: float  # wall time, queues in parallel; cooldown waits not included
    run_estimates_s: Mapping[str, float] = field(default_factory=dict)  # cell_id -> seconds
    skipped: tuple[tuple[Run, str], ...] = ()  # runs a phone cannot do, with why (not in a queue)

    @property
    def spread(self) -> bool:
        return SHARED in self.queues

    @cached_property
    def runs(self) -> tuple[Run, ...]:
        """All runs, queues interleaved round-robin (the order to persist them as PENDING)."""
        queues = list(self.queues.values())
        longest = max((len(queue) for queue in queues), default=0)
        return tuple(queue[i] for i in range(longest) for queue in queues if i < len(queue))

    def without(self, done_run_ids: Collection[str]) -> Plan:
        """The plan left after `done_run_ids` (e.g. DONE in the store): same order, new estimate."""
        done = set(done_run_ids)
        queues = {key: tuple(r for r in queue if r.run_id not in done) for key, queue in self.queues.items()}
        estimated_s = _wall_s(queues, self.run_estimates_s, len(self.devices))
        return replace(self, queues=queues, estimated_s=estimated_s)


def _wall_s(queues: Mapping[str, tuple[Run, ...]], estimates: Mapping[str, float], devices: int) -> float:
    """Queues run in parallel; a shared queue is drained by every phone at once."""
    totals = {key: sum(estimates[run.cell_id] for run in queue) for key, queue in queues.items()}
    if SHARED in totals:
        return totals[SHARED] / max(devices, 1)
    return max(totals.values(), default=0.0)


def expand(experiment: Experiment) -> list[Cell]:
    """Cells of the experiment: sweep cross product minus excludes, zip groups honoured."""
    return experiment.cells()


def estimate_run_s(experiment: Experiment, cell: Cell, iteration_s: float = DEFAULT_ITERATION_S) -> float:
    """Rough seconds one run of `cell` takes: overhead, load settling, warm-up, bounded measuring."""
    m = experiment.measurement
    settle_s = experiment.gpu_load.settle_s if experiment.gpu_load_of(cell) > 0 else 0.0
    measure_s = min(max(m.iterations * iteration_s, m.min_seconds), m.max_seconds)
    return RUN_OVERHEAD_S + settle_s + m.warmup * iteration_s + measure_s


def plan(
    experiment: Experiment,
    devices: Sequence[str],
    *,
    iteration_s: float = DEFAULT_ITERATION_S,
    abilities: Mapping[str, PhoneAbilities] | None = None,
) -> Plan:
    """Bind the experiment's runs to `devices` (already selected by the fleet) and order them;
    runs a phone of `abilities` cannot do go to `skipped` (pinned runs only: a spread run may
    go to any phone)."""
    if len(set(devices)) != len(devices):
        raise ValueError(f"device ids must be unique, got {list(devices)}")
    wanted = experiment.devices.min_count
    if len(devices) < wanted:
        raise ConfigError(
            f"{experiment.name}: needs at least {wanted} phone(s) (devices.min_count), "
            f"{len(devices)} selected",
            hint="connect phones or lower devices.min_count",
        )
    cells = experiment.cells()
    owners: list[str | None] = [None] if experiment.devices.spread else list(devices)
    queues = {owner or SHARED: _queue(experiment, cells, owner) for owner in owners}
    skipped: list[tuple[Run, str]] = []
    for owner, queue in list(queues.items()):
        known = (abilities or {}).get(owner)
        if known is None:
            continue
        why = {cell.cell_id: cannot_run(experiment, cell, known) for cell in cells}
        skipped += [(run, reason) for run in queue if (reason := why[run.cell_id]) is not None]
        queues[owner] = tuple(run for run in queue if why[run.cell_id] is None)
    estimates = {cell.cell_id: estimate_run_s(experiment, cell, iteration_s) for cell in cells}
    wall_s = _wall_s(queues, estimates, len(devices))
    return Plan(experiment, tuple(devices), tuple(cells), queues, wall_s, estimates, tuple(skipped))


def _queue(experiment: Experiment, cells: list[Cell], device: str | None) -> tuple[Run, ...]:
    measurement = experiment.measurement
    repetitions = range(measurement.repetitions)
    seed = f"{measurement.seed}:{device or SHARED}"
    canonical = sorted(cells, key=lambda cell: cell.cell_id)  # shuffles must not depend on file order
    pairs: list[tuple[Cell, int]]
    if measurement.order is Order.GROUPED:
        pairs = [(cell, rep) for cell in cells for rep in repetitions]
    elif measurement.order is Order.RANDOM:
        pairs = [(cell, rep) for cell in canonical for rep in repetitions]
        random.Random(seed).shuffle(pairs)
    else:
        pairs = []
        for rep in repetitions:
            round_cells = list(canonical)
            random.Random(f"{seed}:{rep}").shuffle(round_cells)
            pairs += [(cell, rep) for cell in round_cells]
    name = experiment.qualified_name
    ids = _run_ids(name, cells, measurement.repetitions, device)
    return tuple(Run(ids[(cell.cell_id, rep)], name, cell, rep, device) for cell, rep in pairs)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


def render_plan(plan: Plan, *, max_runs_shown: int = 12, max_cells_shown: int = 60) -> str:
    """The plan as text for `farm run --dry-run`: summary, cells, the start of each queue."""
    exp = plan.experiment
    m = exp.measurement
    mode = "spread over equivalent phones" if plan.spread else "every phone runs every cell"
    lines = [
        f"experiment {exp.qualified_name}: {exp.benchmark.program.value}"
        + (f" -- {exp.description}" if exp.description else ""),
        f"  {len(plan.cells)} cells x {m.repetitions} repetitions on {len(plan.devices)} phone(s) "
        f"({mode}) = {len(plan.runs) + len(plan.skipped)} runs"
        + (f", {len(plan.skipped)} of them SKIPPED (below)" if plan.skipped else ""),
        f"  order {m.order.value} (seed {m.seed}); per run: warmup {m.warmup}, {m.iterations} iterations, "
        f"{m.min_seconds:g}..{m.max_seconds:g} s",
        f"  estimated wall time ~{_duration(plan.estimated_s)} (excluding cooldown waits)",
        "",
        f"  {'cell':<12}  {'~s/run':>6}  factors",
    ]
    for cell in plan.cells[:max_cells_shown]:
        estimate = plan.run_estimates_s.get(cell.cell_id, 0.0)
        lines.append(f"  {cell.cell_id:<12}  {estimate:>6.1f}  {cell.label(exp.factor_names)}")
    if len(plan.cells) > max_cells_shown:
        lines.append(f"  ... {len(plan.cells) - max_cells_shown} more cells")
    if plan.skipped:
        lines += ["", f"  {len(plan.skipped)} runs SKIPPED at plan time (the phone cannot do them):"]
        groups: dict[tuple[str, str], int] = {}
        for run, reason in plan.skipped:
            key = (run.device or SHARED, reason)
            groups[key] = groups.get(key, 0) + 1
        for (device, reason), count in groups.items():
            lines.append(f"    {device}: {count} runs: {reason}")
    for owner, queue in plan.queues.items():
        title = "shared queue" if owner == SHARED else f"queue {owner}"
        lines += ["", f"  {title} ({len(queue)} runs):"]
        for index, run in enumerate(queue[:max_runs_shown]):
            lines.append(
                f"    {index + 1:>4}. {run.run_id}  rep {run.repetition}  {run.cell.label(exp.factor_names)}"
            )
        if len(queue) > max_runs_shown:
            lines.append(f"    ... {len(queue) - max_runs_shown} more")
    return "\n".join(lines)
