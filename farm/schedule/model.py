"""A nightly schedule: which experiment to re-run, when (cron), on which phones, and what to do
about slots missed while no daemon was running. Frozen values, built by farm.schedule.config."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path


class CatchUp(enum.StrEnum):
    """What the daemon does with cron slots that passed while it was not running (downtime)."""

    SKIP = "skip"  # missed slots are recorded as skipped; the next run is the next slot
    RUN_ONCE = "run_once"  # one run for the latest missed slot, however many were missed


@dataclass(frozen=True)
class Schedule:
    name: str
    experiment: Path  # the experiment file (relative paths: to the config file's folder)
    cron: str  # five-field cron expression, read by croniter
    variant: str | None = None
    devices: tuple[str, ...] = ()  # --devices selectors; empty: every phone the experiment selects
    catch_up: CatchUp = CatchUp.SKIP
    max_runtime_s: float | None = None  # stop the nightly (cleanly) after this long
    timezone: str = "UTC"  # the cron expression's clock
    location: str = "<schedule>"  # FILE:LINE of its entry, for messages
