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

The file is found exactly as for lab hosts (farm.remote.config.find_config); every mistake is one
ConfigError naming FILE:LINE.
"""

from __future__ import annotations

import re
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from yaml.nodes import Node, ScalarNode, SequenceNode

from farm.errors import ConfigError
from farm.remote.config import find_config
from farm.safe_yaml import read_text
from farm.schedule import cron
from farm.schedule.model import CatchUp, Schedule
from farm.spec.loader import compose, config_entry, to_python

SECTION = "schedules"
SCHEDULE_KEYS = ("name", "experiment", "variant", "cron", "timezone", "devices", "catch_up", "max_runtime_s")
_REQUIRED = ("name", "experiment", "cron")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")


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
    section: Node | None = None
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value == SECTION:
            section = value
    if section is None or (isinstance(section, ScalarNode) and to_python(section) is None):
        return ()
    if not isinstance(section, SequenceNode):
        raise ConfigError(
            f"{SECTION}: expected a list of schedules (- name: nightly ...)",
            location=f"{filename}:{section.start_mark.line + 1}",
        )
    base = Path(filename).parent
    schedules = [_schedule(item, filename, index, base) for index, item in enumerate(section.value)]
    seen: dict[str, str] = {}
    for schedule in schedules:
        if schedule.name in seen:
            raise ConfigError(
                f"{SECTION}: schedule name {schedule.name!r} used twice (first at {seen[schedule.name]})",
                location=schedule.location,
            )
        seen[schedule.name] = schedule.location
    return tuple(schedules)


def _schedule(node: Node, filename: str, index: int, base: Path) -> Schedule:
    entry = config_entry(
        node, filename, f"{SECTION}[{index}]", SCHEDULE_KEYS, "name:, experiment:, cron: ..."
    )
    values, lines, where = entry.values, entry.lines, entry.location
    for required in _REQUIRED:
        if values.get(required) in (None, ""):
            raise ConfigError(f"{SECTION}[{index}]: {required} is missing", location=where)
    name = values["name"]
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{SECTION}[{index}].name: expected a short name (lower-case letters, digits, _ -), got {name!r}",
            location=lines["name"],
        )
    label = f"{SECTION}.{name}"

    def text(key: str) -> str | None:
        value = values.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{label}.{key}: expected text, got {value!r}", location=lines[key])
        return value.strip()

    expression = text("cron") or ""
    if not cron.is_valid(expression):
        raise ConfigError(
            f"{label}.cron: {expression!r} is not a cron expression of five fields",
            location=lines["cron"],
            hint='e.g. "0 2 * * *" for 02:00 every day',
        )
    zone = text("timezone") or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{label}.timezone: unknown time zone {zone!r}",
            location=lines["timezone"],
            hint="e.g. Europe/Zurich",
        ) from None
    catch_up_text = text("catch_up") or CatchUp.SKIP.value
    try:
        catch_up = CatchUp(catch_up_text)
    except ValueError:
        raise ConfigError(
            f"{label}.catch_up: expected skip or run_once, got {catch_up_text!r}", location=lines["catch_up"]
        ) from None
    max_runtime = values.get("max_runtime_s")
    if max_runtime is not None and (
        isinstance(max_runtime, bool) or not isinstance(max_runtime, int | float) or max_runtime <= 0
    ):
        raise ConfigError(
            f"{label}.max_runtime_s: expected a positive number of seconds, got {max_runtime!r}",
            location=lines["max_runtime_s"],
        )
    experiment = Path(text("experiment") or "").expanduser()
    return Schedule(
        name=name,
        experiment=experiment if experiment.is_absolute() else base / experiment,
        cron=expression,
        variant=text("variant"),
        devices=_devices(values.get("devices"), label, lines.get("devices", where)),
        catch_up=catch_up,
        max_runtime_s=float(max_runtime) if max_runtime is not None else None,
        timezone=zone,
        location=where,
    )


def _devices(value: object, label: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) and item.strip() for item in items):
        raise ConfigError(
            f"{label}.devices: expected selectors (host/serial, serial or model; globs), got {value!r}",
            location=where,
        )
    return tuple(part.strip() for item in items for part in str(item).split(",") if part.strip())
