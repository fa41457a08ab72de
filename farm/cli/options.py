"""Options several commands share, defined once so their names, types and help agree."""

from __future__ import annotations

import os
from pathlib import Path

import click

from farm.store.location import RESULTS_ENV, StoreLocation, resolve

results_option = click.option(
    "--results",
    type=str,
    default=None,
    metavar="DIR|URL",
    help=(
        "Where results live: a folder holding farm.db (SQLite) and the run folders, or a shared "
        "postgresql://USER@HOST[:PORT]/DATABASE store (password from ~/.pgpass or $PGPASSWORD), "
        "whose run folders still go to a local folder: $FARM_RESULTS if it is one, else ./results. "
        "Default: $FARM_RESULTS, else `store:` in farm.yaml, else ./results."
    ),
)

config_option = click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="farm config with lab hosts (default ./farm.yaml, then ~/.config/farm/farm.yaml).",
)
adb_port_option = click.option(
    "--adb-port", type=int, default=None, help="adb server port (default $ANDROID_ADB_SERVER_PORT or 5037)."
)


def store_location(results: str | None, config: Path | None = None) -> StoreLocation:
    """The store a command uses: --results, else $FARM_RESULTS, else farm.yaml `store:` (read only
    when the first two are unset), else ./results."""
    # Imported here: the farm.yaml reader pulls in the remote-host stack (adbutils, ssh), which
    # commands given --results or $FARM_RESULTS never need (a second per start on a small host).
    from farm.fleet.farm_yaml import find_config, load_config

    if results or os.environ.get(RESULTS_ENV) or find_config(config) is None:
        return resolve(results)
    farm_config = load_config(config)
    return resolve(
        None, configured=farm_config.store, configured_at=farm_config.store_location or "farm.yaml"
    )
