"""A run as stored, with its metrics: the row that reports (farm.report) and models fitted on
stored runs (farm.analysis.resource_data) read. Pure data; farm.report.query fills it from the
runs and metrics tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from farm.store.runs import RunState

DEVICE = "device"  # the pseudo-factor naming the phone a run ran on


@dataclass(frozen=True)
class StoredResult:
    run_id: str
    cell_id: str
    factors: Mapping[str, Any]
    repetition: int
    device_id: str | None
    state: RunState
    reason: str | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)

    def factor(self, name: str) -> Any:
        return self.device_id if name == DEVICE else self.factors.get(name)
