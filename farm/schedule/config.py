"""The `schedules:` section of the farm config file (farm.yaml), parsed into Schedule values.

    schedules:
      - name: lstm-nightly
        experiment: experiments/lstm_gpu_load.yaml   # relative to this file's folder
        variant: quick                               # optional
        cron: "0 2 * * *"                            # five cron fields (croniter)
        timezone: Europe/Zurich                      # optional, default UTC
        devices: ["local/*"]                         # optional --devices selectors
        catch_up: run_once                           # skip (default) | run_once
        max_runtime_s: 7200                          # optional: stop the nightly after this long

The file is found exactly as for lab hosts (farm.fleet.farm_yaml.find_config) and validated the same
way (ScheduleEntry, a pydantic model, through farm.fleet.farm_yaml.validate_file): every mistake is one
ConfigError naming FILE:LINE.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BeforeValidator, ConfigDict

from farm.errors import ConfigError
from farm.experiment.loader import compose
from farm.experiment.sections import Frozen
from farm.fleet.farm_yaml import PositiveSeconds, Text, entry_location, find_config, text_value, validate_file
from farm.safe_yaml import read_text
from farm.schedule import cron
from farm.schedule.model import CatchUp, Schedule

SECTION = "schedules"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(f"expected a short name (lower-case letters, digits, _ -), got {value!r}")
    return value


def _cron(value: Any) -> str:
    expression = value.strip() if isinstance(value, str) else value
    if not isinstance(expression, str) or not cron.is_valid(expression):
        raise ValueError(f'{value!r} is not a cron expression of five fields (e.g. "0 2 * * *" for 02:00)')
    return expression


def _timezone(value: Any) -> str:
    zone = text_value(value)
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone!r} (e.g. Europe/Zurich)") from None
    return zone


def _catch_up(value: Any) -> CatchUp:
    try:
        return CatchUp(text_value(value))
    except ValueError:
        raise ValueError(f"expected skip or run_once, got {value!r}") from None


def _devices(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) and item.strip() for item in items):
        raise ValueError(f"expected selectors (host/serial, serial or model; globs), got {value!r}")
    return tuple(part.strip() for item in items for part in str(item).split(",") if part.strip())


def _schedule_list(value: Any) -> Any:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError("expected a list of schedules (- name: nightly ...)")
    return value


class ScheduleEntry(Frozen):
    """One `schedules:` item as written (farm.yaml's keys and their checks)."""

    name: Annotated[str, BeforeValidator(_name)]
    experiment: Text
    cron: Annotated[str, BeforeValidator(_cron)]
    variant: Text | None = None
    timezone: Annotated[str, BeforeValidator(_timezone)] = "UTC"
    devices: Annotated[tuple[str, ...], BeforeValidator(_devices)] = ()
    catch_up: Annotated[CatchUp, BeforeValidator(_catch_up)] = CatchUp.SKIP
    max_runtime_s: PositiveSeconds | None = None


class _SchedulesFile(Frozen):
    """farm.yaml as the schedules parser sees it: the other sections are farm.fleet.farm_yaml's."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schedules: Annotated[tuple[ScheduleEntry, ...], BeforeValidator(_schedule_list)] = ()


def load_schedules(explicit: Path | None = None) -> tuple[Schedule, ...]:
    """The schedules of the config file farm would use (none when there is no file)."""
    path = find_config(explicit)
    if path is None:
        return ()
    text = read_text(path, "config file")
    return parse_schedules(text, str(path))


def find_schedule(schedules: tuple[Schedule, ...], name: str) -> Schedule:
    for schedule in schedules:
        if schedule.name == name:
            return schedule
    known = ", ".join(s.name for s in schedules) or "none"
    raise ConfigError(
        f"no schedule named {name!r} (schedules: {known})",
        hint="add it under schedules: in farm.yaml; `farm schedule list` shows them",
    )


def parse_schedules(text: str, filename: str) -> tuple[Schedule, ...]:
    """Config text -> its schedules (pure; other sections are left to their own parsers)."""
    root = compose(text, filename)
    parsed = validate_file(root, filename, _SchedulesFile, entries=SECTION)
    base = Path(filename).parent
    schedules = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(parsed.schedules):
        location = entry_location(root, filename, SECTION, index)
        if entry.name in seen:
            raise ConfigError(
                f"{SECTION}: schedule name {entry.name!r} used twice (first at {seen[entry.name]})",
                location=location,
            )
        seen[entry.name] = location
        experiment = Path(entry.experiment).expanduser()
        schedules.append(
            Schedule(
                name=entry.name,
                experiment=experiment if experiment.is_absolute() else base / experiment,
                cron=entry.cron,
                variant=entry.variant,
                devices=entry.devices,
                catch_up=entry.catch_up,
                max_runtime_s=entry.max_runtime_s,
                timezone=entry.timezone,
                location=location,
            )
        )
    return tuple(schedules)
