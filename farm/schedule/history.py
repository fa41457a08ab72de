"""Nightly history from the store: the points farm.analysis.regression judges.

A point is the median, over one nightly's DONE repetitions, of one metric of one cell on one phone
(`*` for runs spread over equivalent phones). Nightlies of an experiment are the stored experiments
named `<name>--<stamp>[.<variant>]` (farm.schedule.nightly), ordered by their slot. Only nightlies
measured with the same settings as the newest one are comparable (the spec's settings_digest: an
edited sweep, iteration count or load must not read as a regression); the others are left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from farm.analysis import stats
from farm.analysis.regression import Finding, Point, describe
from farm.experiment.model import Experiment
from farm.schedule.nightly import NightlyName, parse_nightly
from farm.store import Store, events, views
from farm.store.events import EventKind

SAME_SECOND_STEP_S = 1e-3  # orders nightlies that share a slot second by their sequence number


def nightlies(store: Store, base_experiment: str) -> list[tuple[str, NightlyName]]:
    """(stored name, parsed) of every nightly of `base_experiment` that has runs, oldest first."""
    found = []
    for experiment in views.experiments_with_runs(store):
        parsed = parse_nightly(experiment)
        if parsed is not None and parsed.base_qualified_name == base_experiment:
            found.append((experiment, parsed))
    return sorted(found, key=lambda item: (item[1].slot, item[1].seq))


def settings_digest(store: Store, experiment: str) -> str | None:
    """The stored spec's settings digest, or None when the store has no usable spec for it."""
    spec = views.spec_json(store, experiment)
    if spec is None:
        return None
    try:
        return Experiment.model_validate(json.loads(spec)).settings_digest
    except (ValueError, ValidationError):
        return None


def comparable_nightlies(
    store: Store, base_experiment: str
) -> tuple[list[tuple[str, NightlyName]], list[str]]:
    """(nightlies measured like the newest one, oldest first; names of those that were not)."""
    found = nightlies(store, base_experiment)
    if not found:
        return [], []
    digests = {stored: settings_digest(store, stored) for stored, _ in found}
    newest = digests[found[-1][0]]
    kept = [item for item in found if newest is None or digests[item[0]] in (None, newest)]
    kept_names = {stored for stored, _ in kept}
    return kept, [stored for stored, _ in found if stored not in kept_names]


def load_points(
    store: Store,
    base_experiment: str,
    metrics: Sequence[str],
    chosen: Sequence[tuple[str, NightlyName]] | None = None,
) -> list[Point]:
    """Points of `chosen` nightlies (default: the comparable ones)."""
    points: list[Point] = []
    if chosen is None:
        chosen, _changed = comparable_nightlies(store, base_experiment)
    for stored, parsed in chosen:
        values: dict[tuple[str, str, str], list[float]] = {}
        factors: dict[str, Mapping[str, object]] = {}
        for sample in views.done_metric_samples(store, stored, metrics):
            values.setdefault((sample.cell_id, sample.device, sample.name), []).append(sample.value)
            factors[sample.cell_id] = sample.factors
        order = parsed.slot.timestamp() + parsed.seq * SAME_SECOND_STEP_S
        for (cell_id, device, metric), samples in values.items():
            points.append(
                Point(cell_id, device, metric, stats.median(samples), stored, order, factors.get(cell_id, {}))
            )
    return points


def record_regressions(store: Store, nightly: str, flagged: Sequence[Finding]) -> int:
    """Flagged regressions as events of the nightly they were found in (what `farm report` of it
    lists); one already recorded (same line) is not added again. Returns how many were new."""
    known = {message for _, message in events.messages(store, nightly, [EventKind.REGRESSION])}
    added = 0
    for finding in flagged:
        message = describe(finding)
        if message in known:
            continue
        known.add(message)
        events.emit(
            store,
            EventKind.REGRESSION,
            message,
            experiment=nightly,
            device_id=None if finding.device == "*" else finding.device,
            payload=finding,
        )
        added += 1
    return added
