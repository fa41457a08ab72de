"""`benchmark.tune: true`: farm's own programs tune their GPU kernels once per phone, before the sweep.

Each program searches its kernels' parameters with `--tune` and keeps the winner in its on-phone
cache (kernels/README.md "Tuning"), keyed by device and kernel source; the sweep's runs then use
it without being told. So farm runs one short tuning run per distinct gpu workload of the
experiment (the cell's arguments without the measurement ones) on the prepared phone, under the
sweep's clock control, and keeps what each chose (`tune_*` of its `info` event) as a TuneChoice:
env.json `tuned` carries them with every run of that phone.

    choices = tune_phone(prepared, experiment, timeout_s)   # () when tune is off
    workloads(experiment)                                   # pure: what would be tuned
"""

from __future__ import annotations

from farm.adapters.jsonl import parse_event_lines
from farm.analysis.iterations import event_kind
from farm.engine.model import JsonObject, PreparedPhone, TuneChoice
from farm.engine.onphone import CL_CACHE_DIR
from farm.errors import DeviceTransientError, FarmError
from farm.experiment.model import Experiment
from farm.experiment.programs import BACKEND, MEASUREMENT_ARGS, Backend

_MEASURED_FLAGS = tuple(f"--{name.replace('_', '-')}=" for name in MEASUREMENT_ARGS)
# One measured iteration after the search: the tuning run is not a measurement.
_TUNE_RUN_ARGS = ("--warmup=0", "--iters=1", "--min-seconds=0", "--max-seconds=5")


def workloads(experiment: Experiment) -> tuple[tuple[str, ...], ...]:
    """The distinct gpu workloads of the experiment's cells, in cell order (pure)."""
    if not experiment.benchmark.tune:
        return ()
    found: dict[tuple[str, ...], None] = {}
    default = experiment.benchmark.params.get(BACKEND, Backend.GPU.value)
    for cell in experiment.cells():
        if cell.get(BACKEND, default) != Backend.GPU.value:
            continue
        args = tuple(a for a in experiment.program_args(cell) if not a.startswith(_MEASURED_FLAGS))
        found.setdefault(args, None)
    return tuple(found)


def chosen_fields(stdout: str) -> JsonObject:
    """The `tune_*` keys of the last `info` event of a tuning run's output (pure)."""
    infos = [e for e in parse_event_lines(stdout).events if event_kind(e) == "info"]
    if not infos:
        return {}
    return {key: value for key, value in infos[-1].items() if key.startswith("tune_")}


def tune_phone(
    prepared: PreparedPhone, experiment: Experiment, timeout_s: float, budget_s: float | None = None
) -> tuple[TuneChoice, ...]:
    """Run each workload once with --tune on the phone; a run that fails is kept as its error
    (the sweep goes on with the program's defaults or an older cache entry)."""
    binary = prepared.programs[experiment.benchmark.program.value].phone_path
    prefix = prepared.clocks.taskset_prefix() if prepared.clocks is not None else []
    budget = [f"--tune-budget-s={budget_s:g}"] if budget_s is not None else []
    choices = []
    for args in workloads(experiment):
        argv = [*prefix, binary, *args, *_TUNE_RUN_ARGS, "--tune", *budget, f"--cl-cache={CL_CACHE_DIR}"]
        try:
            result = prepared.session.shell(argv, timeout_s=timeout_s)
        except DeviceTransientError:
            raise  # the phone went away: the sweep's recovery handles it, not tuning
        except FarmError as error:
            choices.append(TuneChoice(args, {}, error=str(error)))
            continue
        if not result.ok:
            tail = result.stderr.strip().splitlines()
            reason = f"exited {result.exit_code}: {tail[-1] if tail else 'no stderr'}"
            choices.append(TuneChoice(args, {}, error=reason))
            continue
        choices.append(TuneChoice(args, chosen_fields(result.stdout)))
    return tuple(choices)
