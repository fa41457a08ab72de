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


class Outcome(enum.StrEnum):
    """How one firing of a schedule ended (column `outcome` of schedule_firings)."""

    RUNNING = "running"
    OK = "ok"  # every run DONE
    INCOMPLETE = "incomplete"  # some runs failed or could not run
    ERROR = "error"  # the experiment could not start (bad file, no eligible phone...)
    TIMEOUT = "timeout"  # stopped at max_runtime_s (phones restored, runs left PENDING)
    INTERRUPTED = "interrupted"  # SIGTERM / Ctrl-C
    ABANDONED = "abandoned"  # the process running it died (kill -9, power loss); found on the next start
    SKIPPED = "skipped"  # missed slots under catch_up: skip


class Trigger(enum.StrEnum):
    CRON = "cron"
    CATCH_UP = "catch_up"
    MANUAL = "manual"  # `farm schedule run NAME`


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
