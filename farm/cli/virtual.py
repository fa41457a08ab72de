"""`farm virtual ...`: the simulator's own command line (the separate `vphone` distribution), run as a
program so that farm imports nothing from it. Every argument, `--help` included, goes through."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import click

from farm.errors import EnvironmentProblem

SIMULATOR_MODULE = "vphone"


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def virtual(args: tuple[str, ...]) -> None:
    """Virtual phones (up, list, down, fault): real ADB on TCP ports, an Android-shaped sandbox.

    \b
    Example:
      farm virtual up --count 4 --profile adreno-sd8gen2 --profile mali-tensor
      farm virtual --help
    """
    if importlib.util.find_spec(SIMULATOR_MODULE) is None:
        raise EnvironmentProblem(
            "virtual phones need the simulator, which is not installed",
            hint="pip install ./vphone (make setup does it)",
        )
    env = {**os.environ, "VPHONE_PROG_NAME": "farm virtual"}
    try:
        code = subprocess.call([sys.executable, "-m", SIMULATOR_MODULE, *args], env=env)
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
