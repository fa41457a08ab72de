"""The virtual phone's ground-truth log (vphone/src/vphone/groundtruth.py) as a trace, for comparison.

Feeding it to `compute_run_metrics` gives what farm should have measured: true power (already mW,
so no calibration), true GPU busy and modelled temperature on the phone's clock. Each row describes
the physics tick that ends at its t_ns, hence a trailing hold for its power.

    truth = compute_run_metrics(events, truth_trace(read_ground_truth(path)), TRUTH_CALIBRATION,
                                idle_power_mw, target_gpu_load)
    # compare truth["energy_total_mj"] with what farm stored for the run

The truth's power_mw is what the phone consumes; the battery only supplies all of it while it is
not charging. Compare energy only for runs with charging disabled (a profile with a charging node
the phone's user can write, e.g. the rooted adreno-nexus6p), and runs that span at least a few
fuel-gauge updates (power_readings).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from farm.analysis.power import BatteryCalibration
from farm.analysis.series import DEFAULT_SOURCES, Series, SeriesTrace, SourceNames

# Pass this as the calibration with a ground-truth trace: power is direct, ticks are trailing.
TRUTH_CALIBRATION = BatteryCalibration(gauge_trailing=True)


class TruthRowLike(Protocol):
    @property
    def t_ns(self) -> int: ...
    @property
    def power_mw(self) -> float: ...
    @property
    def gpu_busy(self) -> float: ...
    @property
    def temp_c(self) -> float: ...


def truth_trace(rows: Sequence[TruthRowLike], sources: SourceNames = DEFAULT_SOURCES) -> SeriesTrace:
    times = [row.t_ns for row in rows]
    return SeriesTrace(
        {
            sources.battery_power: Series.of(times, [row.power_mw for row in rows]),
            sources.gpu_busy: Series.of(times, [row.gpu_busy for row in rows]),
            sources.temperature: Series.of(times, [row.temp_c for row in rows]),
        }
    )
