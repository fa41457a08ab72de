"""Options several commands share, defined once so their names, types and help agree."""

from __future__ import annotations

from pathlib import Path

import click

results_option = click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results folder holding farm.db (default $FARM_RESULTS or ./results).",
)
