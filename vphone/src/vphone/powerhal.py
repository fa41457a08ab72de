"""The phone's power HAL: hints that rewrite cpufreq limits (pure state, no I/O).

Android's framework sends the power HAL a boost on every touch (Boost.INTERACTION) and modes on
screen and idle changes (INTERACTIVE, DISPLAY_INACTIVE, DEVICE_IDLE). Pixel's libperfmgr turns
each into HintManager::DoHint: the sysfs nodes its powerhint.json names (cpufreq scaling_min/
max_freq, GPU limits) are written for the hint's duration, and when it ends (EndHint) each node
goes back to its default value, not to what root wrote before (LineageOS/android_hardware_
google_pixel power-libperfmgr/aidl/Power.cpp; Qualcomm's perf HAL, MediaTek's powerscntbl and
Samsung's SIOP behave alike). So a clock pin read back once can be gone a second later; farm has
to watch its pinned nodes through the run (farm.engine.clockhold).

    hal = PowerHal(profile)
    hal.start(HintTrigger.INTERACTION, now_ns) -> [(Knob, policy, text), ...]   # DoHint
    hal.due(now_ns) -> [...]                                                    # EndHint, once due
    hal.mode(HintTrigger.IDLE, True) -> [...]                                   # a mode comes on
    hal.fixed_performance(True) -> [...]                       # cmd power set-fixed-performance...
"""

from __future__ import annotations

from vphone.clocks import Knob
from vphone.profile import HintTrigger, PowerHintSpec, Profile

Write = tuple[Knob, int, str]  # knob, policy index, text written as root would


class PowerHal:
    """libperfmgr's bookkeeping, per node: each hint on (a running boost, a mode in force, fixed
    performance mode) is a request for a value; the node gets the highest-priority request (the
    highest frequency: Pixel's powerhint.json lists each cpufreq node's values from high to low),
    its default (the table's end) when none is left, and is written only when that value changes
    (FileNode::Update, "Update node only if request index changes"; GrapheneOS/
    platform_system_extras libperfmgr/FileNode.cc). So a hint asked for again while it is on
    writes nothing, and a node someone else wrote keeps that value until the HAL's value for it
    changes: `cmd power set-fixed-performance-mode-enabled true` sent twice does not repair a pin
    root broke in between; turning the mode off and on again does (EndHint writes the default,
    DoHint the fixed value)."""

    def __init__(self, profile: Profile) -> None:
        self.hints = profile.power_hal.hints
        self.tables = tuple(c.freqs_khz for c in profile.cpu.clusters)
        fixed = profile.fixed_performance
        self.fixed_khz = fixed.cpu_khz if fixed is not None else None
        self._ends_ns: dict[int, int] = {}  # hint index -> when the boost ends
        self._modes: set[HintTrigger] = set()  # modes in force
        self._fixed_on = False
        self._written: dict[tuple[Knob, int], int | None] = {}  # the HAL's last write; None: default

    def _default(self, knob: Knob, i: int) -> int:
        return self.tables[i][-1] if knob is Knob.SCALING_MAX else self.tables[i][0]

    def _on(self, n: int, hint: PowerHintSpec) -> bool:
        return n in self._ends_ns if hint.duration_ms is not None else hint.trigger in self._modes

    def _requests(self, knob: Knob, i: int) -> list[int]:
        on = [h for n, h in enumerate(self.hints) if self._on(n, h)]
        out = [
            v[i]
            for h in on
            if (v := h.cpu_max_khz if knob is Knob.SCALING_MAX else h.cpu_min_khz) is not None
        ]
        if self._fixed_on and self.fixed_khz is not None:
            out.append(self.fixed_khz[i])
        return out

    def _update(self) -> list[Write]:
        """The writes that bring each node the HAL drives to its value now, where it changed.
        A request equal to the default is still another value (libperfmgr compares indices in
        the node's value list, whose default is its own entry)."""
        out: list[Write] = []
        for knob in (Knob.SCALING_MAX, Knob.SCALING_MIN):
            for i in range(len(self.tables)):
                requests = self._requests(knob, i)
                value = max(requests) if requests else None  # None: the default
                if value != self._written.get((knob, i)):
                    self._written[(knob, i)] = value
                    out.append((knob, i, str(self._default(knob, i) if value is None else value)))
        return out

    def start(self, trigger: HintTrigger, now_ns: int) -> list[Write]:
        """DoHint of every timed hint `trigger` starts (a running one is extended)."""
        for i, hint in enumerate(self.hints):
            if hint.trigger is trigger and hint.duration_ms is not None:
                self._ends_ns[i] = now_ns + hint.duration_ms * 1_000_000
        return self._update()

    def due(self, now_ns: int) -> list[Write]:
        """EndHint of every boost that has ended by now."""
        ended = [i for i, end in self._ends_ns.items() if end <= now_ns]
        for i in ended:
            del self._ends_ns[i]
        return self._update() if ended else []

    def mode(self, trigger: HintTrigger, active: bool) -> list[Write]:
        """A mode comes on (screen off, deep idle) or ends."""
        if active:
            self._modes.add(trigger)
        else:
            self._modes.discard(trigger)
        return self._update()

    def screen(self, on: bool) -> list[Write]:
        return self.mode(HintTrigger.SCREEN_OFF, not on)

    def fixed_performance(self, enabled: bool) -> list[Write]:
        """Mode.FIXED_PERFORMANCE set (again or not): Pixel's Power::setMode makes it DoHint /
        EndHint("FIXED_PERFORMANCE") each time (LineageOS/android_hardware_google_pixel
        power-libperfmgr/aidl/Power.cpp); what that writes is `_update`'s."""
        self._fixed_on = enabled and self.fixed_khz is not None
        return self._update()
