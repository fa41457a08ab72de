"""Whether the clock pins held through a run (pure).

A pin is read back once when it is applied (farm.engine.clocks), but the phone's power HAL
rewrites the same nodes on its hints: Pixel's libperfmgr turns INTERACTIVE, DISPLAY_INACTIVE,
DEVICE_IDLE, LAUNCH and every boost into writes of the cpufreq and GPU nodes of powerhint.json,
and restores their defaults (not farm's pin) when the hint ends; Qualcomm's perf HAL, MediaTek's
and Samsung's do the same. So the run script reads every pinned node (scaling_min/max_freq,
scaling_governor, the GPU's devfreq min/max/governor, kgsl levels) with each throttle sample, and
a run's clocks held only if every sample read what was pinned. A maximum below its pin is also a
thermal cap (farm.engine.thermal flags that as throttling); here it is a pin that did not hold.

    hold = clocks_held(report.throttle_samples, applied.readback)  # None: nothing pinned or read
    hold.held, hold.drifts, hold.to_json()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from farm.engine.thermal import ThrottleSample


@dataclass(frozen=True)
class Drift:
    """The first sample in which a pinned node read something else."""

    node: str
    pinned: str
    seen: str
    at_s: float

    def describe(self) -> str:
        return f"{self.node} read {self.seen or 'nothing'} (pinned {self.pinned}) at {self.at_s:g} s"


@dataclass(frozen=True)
class Reapplied:
    """The run script wrote the broken pins again (until they held, at most three tries a run):
    its last try's when, how and which nodes, and how many tries it took."""

    at_s: float  # since the benchmark began
    how: str  # the root way, fixed (performance mode asked again) or failed
    nodes: tuple[str, ...]
    tries: int = 1

    def to_json(self) -> dict[str, object]:
        return {"at_s": self.at_s, "how": self.how, "nodes": list(self.nodes), "tries": self.tries}

    def describe(self) -> str:
        tries = f", {self.tries} tries" if self.tries > 1 else ""
        if self.how == "failed":
            return f"re-applying the clock pins at {self.at_s:g} s failed{tries} ({', '.join(self.nodes)})"
        return f"clock pins re-applied at {self.at_s:g} s ({self.how}{tries}): {', '.join(self.nodes)}"


@dataclass(frozen=True)
class ClockHold:
    samples: int  # samples that read the pinned nodes
    drifts: tuple[Drift, ...]  # one per node that did not hold, first time seen
    # Broken pins written again; the run stays flagged: the drift was seen while it measured.
    reapplied: Reapplied | None = None

    @property
    def held(self) -> bool:
        return not self.drifts

    def to_json(self) -> dict[str, object]:
        """As env.json's `clocks_held` carries it."""
        return {
            "held": self.held,
            "samples": self.samples,
            "drifts": [
                {"node": d.node, "pinned": d.pinned, "seen": d.seen, "at_s": d.at_s} for d in self.drifts
            ],
        } | ({"reapplied": self.reapplied.to_json()} if self.reapplied is not None else {})


def clocks_held(
    samples: Sequence[tuple[float, ThrottleSample]], pinned: Mapping[str, str]
) -> ClockHold | None:
    """Each pinned node against every sample that read it (seconds since the start, sample).
    None when nothing was pinned or no sample read a pinned node (nothing to judge)."""
    if not pinned:
        return None
    first: dict[str, Drift] = {}
    read = 0
    for at_s, sample in samples:
        seen = {node: sample.nodes[node] for node in pinned if node in sample.nodes}
        if not seen:
            continue
        read += 1
        for node, value in seen.items():
            if value.strip() != pinned[node].strip() and node not in first:
                first[node] = Drift(node, pinned[node].strip(), value.strip(), round(at_s, 3))
    if read == 0:
        return None
    return ClockHold(read, tuple(first.values()))
