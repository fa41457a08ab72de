"""The benchmark programs an experiment may name, and the arguments each one takes.

This is the checked contract between experiment files and kernels/*/: a `params` key or a sweep
factor must be an argument of the chosen program (or one of the SPECIAL_FACTORS), and its values
must have the argument's type. Names are snake_case here (`seq_len`); `Arg.flag` is what the
program is called with (`--seq-len`). Adding a program or argument means adding it here and in
the program's `--help`.

The measurement section owns warmup / iters / min_seconds / max_seconds / seed
(MEASUREMENT_ARGS) so that all runs of one experiment are measured alike; they cannot be set in
params or swept. The lifecycle owns the OpenCL plumbing (--cl-device, --cl-cache, --dump-output,
--list-devices), which experiments do not set either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Program(StrEnum):
    GEMM = "gemm"
    LSTM = "lstm"
    CNN = "cnn"
    TRAIN = "train"
    GPULOAD = "gpuload"
    IDLE = "idle"  # sleeps --seconds speaking the contract: idle power, orchestration cost
    EXTERNAL = "external"  # a researcher's own binary (farm.experiment.external): its arguments are its own


class Backend(StrEnum):
    CPU = "cpu"
    CPU_MT = "cpu-mt"
    GPU = "gpu"


class ArgKind(StrEnum):
    INT = "int"
    FLOAT = "float"
    STR = "str"
    BOOL = "bool"
    CHOICE = "choice"
    INT_LIST = "int_list"  # "784,256,128,16": comma-separated positive integers
    CHOICE_INT = "choice_int"  # an integer from a fixed set
    SPEC = "spec"  # a positive integer or a string the program parses (cnn --g=4,conv10:8)


# What a user reads in "expected ..." messages, singular and plural.
_KIND_WORDS: dict[ArgKind, tuple[str, str]] = {
    ArgKind.INT: ("an integer", "integers"),
    ArgKind.FLOAT: ("a number", "numbers"),
    ArgKind.STR: ("a string", "strings"),
    ArgKind.BOOL: ("true or false", "booleans"),
    ArgKind.CHOICE: ("one of", "one of"),
    ArgKind.INT_LIST: ('comma-separated integers like "784,256,10"', 'strings like "784,256,10"'),
    ArgKind.CHOICE_INT: ("one of", "one of"),
    ArgKind.SPEC: ("a positive integer or a string", "positive integers or strings"),
}
_INT_LIST = re.compile(r"^[1-9][0-9]*(,[1-9][0-9]*)+$")


@dataclass(frozen=True)
class Arg:
    """One argument of a benchmark program."""

    name: str
    kind: ArgKind
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def problem(self, value: Any, *, in_list: bool = False) -> str | None:
        """Why `value` is not valid for this argument, or None when it is."""
        single, plural = _KIND_WORDS[self.kind]
        expected = f"a list of {plural}" if in_list else single
        if self.kind in (ArgKind.CHOICE, ArgKind.CHOICE_INT):
            wanted_type = str if self.kind is ArgKind.CHOICE else int
            if type(value) is not wanted_type or str(value) not in self.choices:
                return f"expected one of {', '.join(self.choices)}, got {show(value)}"
            return None
        if not _has_kind(value, self.kind):
            return f"expected {expected}, got {show(value)}"
        if self.minimum is not None and value < self.minimum:
            return f"must be at least {number_text(self.minimum)}, got {show(value)}"
        if self.maximum is not None and value > self.maximum:
            return f"must be at most {number_text(self.maximum)}, got {show(value)}"
        return None

    def render(self, value: Any) -> str:
        """`--name=value` as the program takes it."""
        if isinstance(value, bool):
            return f"{self.flag}={int(value)}"
        return f"{self.flag}={value}"


def _has_kind(value: Any, kind: ArgKind) -> bool:
    if kind is ArgKind.BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind is ArgKind.INT:
        return isinstance(value, int)
    if kind is ArgKind.FLOAT:
        return isinstance(value, int | float)
    if kind is ArgKind.INT_LIST:
        return isinstance(value, str) and bool(_INT_LIST.match(value))
    if kind is ArgKind.SPEC:
        return (isinstance(value, int) and value >= 1) or (isinstance(value, str) and bool(value.strip()))
    return isinstance(value, str)


def show(value: Any) -> str:
    """A value as the user wrote it: strings in double quotes, lists and mappings named."""
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return str(value)


def number_text(value: float) -> str:
    """A bound as a person writes it: 1, 0.5, 1000000 (not 1.0 or 1e+06)."""
    return str(int(value)) if float(value).is_integer() else str(value)


LSTM_MAX_LAYERS = 8  # kernels/lstm/lstm.h
GPU_LOAD = "gpu_load"
BACKEND = "backend"

# Factors with a meaning of their own. gpu_load is not a program argument: the lifecycle runs
# kernels/gpuload at that utilisation (0..1) in the background while the benchmark runs.
SPECIAL_FACTORS: dict[str, Arg] = {
    GPU_LOAD: Arg(GPU_LOAD, ArgKind.FLOAT, "background GPU utilisation, 0..1", minimum=0.0, maximum=1.0),
    BACKEND: Arg(BACKEND, ArgKind.CHOICE, "where the work runs", choices=tuple(b.value for b in Backend)),
}

# Passed to every program from the measurement section, never from params or sweep.
MEASUREMENT_ARGS: dict[str, str] = {
    "warmup": "measurement.warmup",
    "iters": "measurement.iterations",
    "min_seconds": "measurement.min_seconds",
    "max_seconds": "measurement.max_seconds",
    "seed": "measurement.seed",
}

_COMMON: tuple[Arg, ...] = (
    Arg("threads", ArgKind.INT, "threads of the cpu-mt backend", minimum=1, maximum=1024),
    Arg("precision", ArgKind.CHOICE, "fp32, or fp16 storage", choices=("fp32", "fp16")),
    Arg("verify", ArgKind.BOOL, "check the result against the cpu path (gpu backend only)"),
)


def _dim(name: str, help_text: str) -> Arg:
    return Arg(name, ArgKind.INT, help_text, minimum=1, maximum=65536)


# Mirrors the option tables in kernels/<program>/main.c (see each program's --help).
_SPECIFIC: dict[Program, tuple[Arg, ...]] = {
    Program.LSTM: (
        Arg("hidden", ArgKind.INT, "hidden units per layer", minimum=1, maximum=8192),
        Arg("layers", ArgKind.INT, "stacked LSTM layers", minimum=1, maximum=LSTM_MAX_LAYERS),
        Arg("seq_len", ArgKind.INT, "time steps per window (UCI HAR: 128)", minimum=1, maximum=100_000),
        Arg("input_dim", ArgKind.INT, "input channels per step (UCI HAR: 9)", minimum=1, maximum=65536),
        Arg("classes", ArgKind.INT, "output classes (UCI HAR: 6)", minimum=1, maximum=65536),
        Arg("batch", ArgKind.INT, "windows per inference", minimum=1, maximum=100_000),
        Arg(
            "wg",
            ArgKind.INT,
            "gpu: work-group size along hidden units (0: driver's choice)",
            minimum=0,
            maximum=4096,
        ),
        Arg(
            "gpu_kernel",
            ArgKind.CHOICE,
            "gpu: one launch per inference (fused, or persist: one work-group owns the recurrence, or "
            "grid: work-groups meeting at a barrier per diagonal), per step and layer (step) or per "
            "diagonal (wave)",
            choices=("auto", "fused", "step", "wave", "persist", "grid"),
        ),
    ),
    Program.GEMM: (
        _dim("m", "rows of A and C"),
        _dim("n", "columns of B and C"),
        _dim("k", "columns of A, rows of B"),
        Arg("kernel", ArgKind.CHOICE, "gpu kernel", choices=("auto", "packed", "regblock", "local")),
        Arg("tile_m", ArgKind.INT, "rows of C per work-item (0: per kernel)", minimum=0, maximum=16),
        Arg("vec", ArgKind.CHOICE_INT, "regblock: columns of C per work-item", choices=("2", "4", "8", "16")),
        Arg("vecs", ArgKind.INT, "packed: vectors per work-item row (0: 2)", minimum=0, maximum=4),
        Arg("wg_m", ArgKind.INT, "regblock: work-group rows (0: driver's choice)", minimum=0, maximum=1024),
        Arg(
            "wg_n", ArgKind.INT, "regblock: work-group columns (0: driver's choice)", minimum=0, maximum=1024
        ),
        Arg(
            "transfers", ArgKind.CHOICE, "gpu: copy A, B, C every iteration or once", choices=("each", "once")
        ),
    ),
    Program.CNN: (
        Arg(
            "model",
            ArgKind.CHOICE,
            "network",
            choices=("squeezenet1.0", "squeezenet1.1", "mobilenetv1", "mobilenetv2", "resnet18", "layer"),
        ),
        Arg(
            "layer",
            ArgKind.CHOICE,
            "model layer: the one kernel to run",
            choices=("conv", "dwconv", "maxpool", "avgpool", "fc", "add"),
        ),
        Arg("channels", ArgKind.INT, "model layer: input channels", minimum=1, maximum=65536),
        Arg("out_channels", ArgKind.INT, "model layer: output maps (conv, fc)", minimum=1, maximum=65536),
        Arg("kernel", ArgKind.INT, "model layer: window side", minimum=1, maximum=64),
        Arg("stride", ArgKind.INT, "model layer: stride", minimum=1, maximum=64),
        Arg("pad", ArgKind.INT, "model layer: zero padding", minimum=0, maximum=64),
        Arg("input_size", ArgKind.INT, "square input side (0: the model's)", minimum=0, maximum=4096),
        Arg("layers_limit", ArgKind.INT, "run only the first N layers (0: all)", minimum=0),
        Arg("g", ArgKind.SPEC, "output maps per work item: N, or layer:N,... (must divide the maps)"),
    ),
    Program.TRAIN: (
        Arg("layers", ArgKind.INT_LIST, 'layer sizes, input first, classes last: "784,256,128,16"'),
        Arg("batch", ArgKind.INT, "samples per step", minimum=1, maximum=65536),
        Arg("lr", ArgKind.FLOAT, "SGD learning rate", minimum=0.0, maximum=1000.0),
        Arg("steps", ArgKind.INT, "measured training steps (0: --iters)", minimum=0),
        Arg(
            "buffers",
            ArgKind.CHOICE,
            "gpu data movement per step",
            choices=("copy", "resident", "mapped", "device"),
        ),
        Arg("samples", ArgKind.INT, "synthetic dataset size, a multiple of batch (0: 32 batches)", minimum=0),
    ),
    Program.IDLE: (
        Arg(
            "seconds",
            ArgKind.FLOAT,
            "total time to sleep, split over the iterations",
            minimum=0.0,
            maximum=1e6,
        ),
    ),
    Program.GPULOAD: (
        Arg("target", ArgKind.FLOAT, "utilisation to hold, 0..1", minimum=0.0, maximum=1.0),
        Arg("intensity", ArgKind.CHOICE, "kind of load", choices=("compute", "memory")),
        Arg("period_ms", ArgKind.INT, "report period of load events", minimum=10, maximum=600_000),
        Arg("kernel_ms", ArgKind.FLOAT, "duration of one kernel launch", minimum=0.1, maximum=50.0),
        Arg("slot_ms", ArgKind.FLOAT, "duty-cycle slot (kernels then sleep)", minimum=2.0, maximum=1000.0),
        Arg(
            "counter_window_ms",
            ArgKind.INT,
            "window the phone's busy counter averages over",
            minimum=10,
            maximum=60_000,
        ),
        Arg(
            "initial_gain",
            ArgKind.FLOAT,
            "counter change per unit of own duty (0: auto)",
            minimum=0.0,
            maximum=64.0,
        ),
        Arg("kp", ArgKind.FLOAT, "controller proportional gain", minimum=0.0, maximum=10.0),
        Arg("ki", ArgKind.FLOAT, "controller integral gain (1/s)", minimum=0.0, maximum=100.0),
        Arg(
            "duration_s",
            ArgKind.FLOAT,
            "stop after this long (default: measurement.max_seconds)",
            minimum=0.0,
            maximum=1e7,
        ),
    ),
}

# Programs built on kernels/common's benchmark loop: they take --backend, the common arguments
# and the measurement arguments. gpuload is a load generator: it holds --target for
# --duration-s and takes none of those.
BENCH_PROGRAMS = frozenset({Program.GEMM, Program.LSTM, Program.CNN, Program.TRAIN, Program.IDLE})
# Programs without OpenCL (kernels/idle): no --cl-cache.
NO_OPENCL = frozenset({Program.IDLE})


def arguments(program: Program) -> dict[str, Arg]:
    """Every argument `program` accepts through params or sweep, by snake_case name (an external
    program has none farm knows: its factors reach it through placeholders, farm.experiment.external)."""
    if program is Program.EXTERNAL:
        return {}
    if program not in BENCH_PROGRAMS:
        return {arg.name: arg for arg in _SPECIFIC[program]}
    args = {arg.name: arg for arg in _COMMON + _SPECIFIC[program]}
    args[BACKEND] = SPECIAL_FACTORS[BACKEND]
    return args


def factor_arg(program: Program, name: str) -> Arg | None:
    """The Arg behind a params key or sweep factor, or None when `program` has no such thing."""
    if name == GPU_LOAD:
        return SPECIAL_FACTORS[GPU_LOAD]
    return arguments(program).get(name)
