"""What runs on the phone for one job and what its output means: the one place that knows how
farm's own programs and external programs (`program: external`) differ.

    args, env = job_arguments(experiment, cell, prepared)   # the scheduler, building a RunJob
    argv = benchmark_argv(prepared, job)                     # on the phone: env, taskset, binary
    parsed = read_output(job, stdout, stderr)                # after exit 0: ProgramOutput | None
    metrics = output_metrics(parsed, trace, ...)             # a program without iteration stamps

farm's own programs get `--name=value` arguments from the spec, `--cl-cache`, and speak the JSON
Lines contract (parsed by farm.engine.collect). An external program gets its args and env
templates rendered (farm.experiment.template), its assets' phone paths, and its output read by its
adapter (farm.adapters): output without a usable result is an OutputError, which fails the run
(never retried: the same binary prints the same thing again).

Telemetry of a program that stamps nothing (regex, tflite, jsonl without `iter`) is taken over the
program's own window on the phone's clock: from the first to the last memory sample of its pid
(the memory sampler watches it from its first instruction, see farm.engine.runscript.gated_argv),
so power, GPU load, temperature and memory line up with it without a host-to-phone clock offset.
"""

from __future__ import annotations

import numpy as np

from farm.adapters import Granularity, OutputError, ProgramOutput
from farm.adapters.output import GRANULARITY_METRIC
from farm.analysis.iterations import Iterations
from farm.analysis.llm import energy_per_token_metrics
from farm.analysis.metrics import latency_metrics, telemetry_metrics
from farm.analysis.power import BatteryCalibration
from farm.analysis.series import DEFAULT_SOURCES, TraceLike
from farm.engine.model import PreparedPhone, RunJob
from farm.engine.onphone import CL_CACHE_DIR
from farm.experiment.expand import Cell
from farm.experiment.model import Experiment
from farm.experiment.programs import NO_OPENCL, Program
from farm.experiment.template import ASSET_PREFIX, render
from farm.metric import Metric


def job_arguments(
    experiment: Experiment, cell: Cell, prepared: PreparedPhone, min_seconds: float | None = None
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The program's arguments and environment for one cell on this phone; `min_seconds`
    lengthens the window (a slow fuel gauge: engine.measurement.energy_window)."""
    if not experiment.benchmark.external:
        return experiment.program_args(cell, min_seconds), ()
    values = _external_values(experiment, cell, prepared, min_seconds)
    benchmark = experiment.benchmark
    args = tuple(render(str(arg), values) for arg in benchmark.args)
    env = tuple((name, render(str(value), values)) for name, value in benchmark.env.items())
    return args, env


def cold_files(experiment: Experiment, cell: Cell, prepared: PreparedPhone) -> tuple[str, ...]:
    """The phone paths of the files this cell's program reads cold (benchmark.cold_files:
    farm.engine.pagecache); () for none."""
    if not experiment.benchmark.external or not experiment.benchmark.cold_files:
        return ()
    values = _external_values(experiment, cell, prepared, None)
    return tuple(render(str(path), values) for path in experiment.benchmark.cold_files)


def _external_values(
    experiment: Experiment, cell: Cell, prepared: PreparedPhone, min_seconds: float | None
) -> dict[str, str]:
    """The values an external program's templates are rendered with on this phone."""
    assert prepared.external is not None, "an external program is deployed when the phone is prepared"
    values = experiment.placeholder_values(cell, min_seconds)
    assets = prepared.external.assets
    # A level naming a listed asset (a model per run) stands for its path on the phone.
    values = {name: assets[value].phone_path if value in assets else value for name, value in values.items()}
    values.update({ASSET_PREFIX + name: d.phone_path for name, d in assets.items()})
    return values


def benchmark_argv(prepared: PreparedPhone, job: RunJob) -> tuple[str, ...]:
    """The command line the phone runs for `job` (before the memory gate wraps it): the program's
    under the affinity's taskset, if any."""
    argv = program_argv(prepared, job)
    if prepared.clocks is not None:  # affinity: big | little (toybox taskset), recorded in env.json
        argv = (*prepared.clocks.taskset_prefix(), *argv)
    return argv


def program_argv(prepared: PreparedPhone, job: RunJob) -> tuple[str, ...]:
    """The program's own command line for `job` (env, binary, args; no taskset)."""
    binary = prepared.programs[job.program].phone_path
    if job.program is Program.EXTERNAL:
        # toybox env: the variables for this program only, no shell parsing of their values.
        prefix = ["env", *(f"{name}={value}" for name, value in job.env)] if job.env else []
        argv = [*prefix, binary, *job.program_args]
    elif job.program in NO_OPENCL:
        argv = [binary, *job.program_args]
    else:
        argv = [binary, *job.program_args, f"--cl-cache={CL_CACHE_DIR}"]
    return tuple(argv)


def read_output(job: RunJob, stdout: str, stderr: str) -> ProgramOutput | None:
    """An external program's output read by its adapter (OutputError when it has no result);
    None for farm's own programs, whose events farm.engine.collect reads."""
    if job.output is None:
        return None
    return job.output.adapter_of().parse(stdout, stderr)


def program_window_ns(trace: TraceLike | None) -> tuple[int, int] | None:
    """The program's run on the phone's clock, from its pid's memory samples (None: none taken)."""
    rss = trace.series(DEFAULT_SOURCES.rss) if trace is not None else None
    if rss is None or len(rss) < 2:
        return None
    return int(rss.t_ns[0]), int(rss.t_ns[-1])


def output_metrics(
    parsed: ProgramOutput,
    trace: TraceLike | None,
    calibration: BatteryCalibration | None,
    idle_power_mw: float | None,
    target_gpu_load: float | None,
) -> list[Metric]:
    """Metrics of a program that gave no iteration stamps: latency statistics from its
    per-iteration latencies (laid end to end), else its summary figures under the same names;
    GRANULARITY_METRIC says which; telemetry over the program's window, energy per inference
    when the adapter counted inferences, energy per token when it timed one language-model phase
    (farm.analysis.llm)."""
    metrics: list[Metric] = []
    per_iteration = parsed.granularity is Granularity.PER_ITERATION and bool(parsed.latencies_ms)
    if per_iteration:
        durations_ns = np.round(np.asarray(parsed.latencies_ms, dtype=np.float64) * 1e6).astype(np.int64)
        ends = np.cumsum(durations_ns)
        metrics += latency_metrics(Iterations(ends - durations_ns, ends, None, None, None))
    names = {m.name for m in metrics}
    metrics += [m for m in parsed.metrics if m.name not in names]
    metrics.append(Metric(GRANULARITY_METRIC, 1.0 if per_iteration else 0.0, "bool"))
    window = program_window_ns(trace)
    if trace is not None and window is not None:
        metrics += telemetry_metrics(
            trace,
            calibration,
            idle_power_mw,
            target_gpu_load,
            window,
            parsed.inferences,
            benchmark_on_gpu=False,
        )
        values = {m.name: m.value for m in metrics}
        # A language model's energy per token of the run's one phase (llama_bench's phase window).
        metrics += energy_per_token_metrics(
            values.get("power_mean_mw"), values.get("power_idle_mw"), parsed.metrics
        )
    return metrics


__all__ = [
    "GRANULARITY_METRIC",
    "OutputError",
    "benchmark_argv",
    "cold_files",
    "job_arguments",
    "output_metrics",
    "program_argv",
    "program_window_ns",
    "read_output",
]
