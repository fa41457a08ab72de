"""The program registry matches the option tables in kernels/ (read as text), and renders argv."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from farm.experiment import load_text
from farm.experiment.programs import BACKEND, BENCH_PROGRAMS, MEASUREMENT_ARGS, Program, arguments

KERNELS = Path(__file__).parents[3] / "kernels"
OPTION = re.compile(r'\{"([a-z0-9-]+)",\s*FARM_OPT_')


def _options_in(path: Path) -> set[str]:
    return set(OPTION.findall(path.read_text(encoding="utf-8")))


FARM_PROGRAMS = [p for p in Program if p is not Program.EXTERNAL]  # external: the user's own binary


@pytest.mark.parametrize("program", FARM_PROGRAMS, ids=[p.value for p in FARM_PROGRAMS])
def test_every_registered_argument_exists_in_the_program(program: Program) -> None:
    main_c = KERNELS / program.value / "main.c"
    if not main_c.exists():
        pytest.skip(f"{main_c} not written yet")
    flags = _options_in(main_c)
    if program in BENCH_PROGRAMS:
        assert "FARM_OPTS_BENCH" in main_c.read_text(encoding="utf-8")
        flags |= _options_in(KERNELS / "common" / "farm.h")
    for arg in arguments(program).values():
        assert arg.flag.removeprefix("--") in flags, f"{program.value} has no {arg.flag}"


def test_measurement_arguments_are_the_common_ones() -> None:
    common = _options_in(KERNELS / "common" / "farm.h")
    assert {name.replace("_", "-") for name in MEASUREMENT_ARGS} <= common
    assert BACKEND in common


def test_gpuload_gets_its_own_arguments_and_a_duration() -> None:
    experiment = load_text(
        "name: g\nbenchmark: {program: gpuload, params: {intensity: memory}}\n"
        "sweep: {target: [0.3, 0.6]}\nmeasurement: {max_seconds: 10}\n"
    )
    args = [experiment.program_args(cell) for cell in experiment.cells()]
    assert args == [
        ("--intensity=memory", "--target=0.3", "--duration-s=10"),
        ("--intensity=memory", "--target=0.6", "--duration-s=10"),
    ]


def test_booleans_render_as_1_or_0() -> None:
    experiment = load_text("name: v\nbenchmark: {program: gemm, params: {verify: true, m: 8}}\n")
    assert experiment.program_args(experiment.cells()[0])[:2] == ("--m=8", "--verify=1")


CHOICE_TABLE = re.compile(r"static const char \*const (\w+)\[\] = \{([^}]*)\}")


@pytest.mark.parametrize("program", [Program.LSTM, Program.GEMM, Program.GPULOAD], ids=lambda p: p.value)
def test_every_registered_choice_is_one_the_program_takes(program: Program) -> None:
    """A choice the registry offers must be one the program's own table has (lstm's persist
    kernel was added to main.c and not here: an experiment asking for it was refused)."""
    source = (KERNELS / program.value / "main.c").read_text(encoding="utf-8")
    tables = {name: set(re.findall(r'"([^"]+)"', body)) for name, body in CHOICE_TABLE.findall(source)}
    for arg in arguments(program).values():
        if not arg.choices or arg.kind.name != "CHOICE":
            continue
        entry = re.search(rf'\{{"{arg.flag.removeprefix("--")}",\s*FARM_OPT_CHOICE,.*?(\w+)\}}', source, re.S)
        if entry is None or entry.group(1) not in tables:
            continue  # a table in a shared header (precision): checked by the program's --help
        assert set(arg.choices) == tables[entry.group(1)], (program.value, arg.flag)
