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
"""

from __future__ import annotations

from vphone.clocks import Knob
from vphone.profile import HintTrigger, PowerHintSpec, Profile

Write = tuple[Knob, int, str]  # knob, policy index, text written as root would


class PowerHal:
    def __init__(self, profile: Profile) -> None:
        self.hints = profile.power_hal.hints
        self.tables = tuple(c.freqs_khz for c in profile.cpu.clusters)
        self._ends_ns: dict[int, int] = {}  # hint index -> when the boost ends
        self._modes: set[HintTrigger] = set()  # modes in force

    def _writes(self, hint: PowerHintSpec) -> list[Write]:
        out: list[Write] = []
        for knob, values in ((Knob.SCALING_MIN, hint.cpu_min_khz), (Knob.SCALING_MAX, hint.cpu_max_khz)):
            if values is not None:
                out += [(knob, i, str(khz)) for i, khz in enumerate(values)]
        return out

    def _defaults(self, hint: PowerHintSpec) -> list[Write]:
        out: list[Write] = []
        if hint.cpu_max_khz is not None:
            out += [(Knob.SCALING_MAX, i, str(t[-1])) for i, t in enumerate(self.tables)]
        if hint.cpu_min_khz is not None:
            out += [(Knob.SCALING_MIN, i, str(t[0])) for i, t in enumerate(self.tables)]
        return out

    def start(self, trigger: HintTrigger, now_ns: int) -> list[Write]:
        """The writes of every timed hint `trigger` starts (a running one is extended)."""
        out: list[Write] = []
        for i, hint in enumerate(self.hints):
            if hint.trigger is trigger and hint.duration_ms is not None:
                if i not in self._ends_ns:
                    out += self._writes(hint)
                self._ends_ns[i] = now_ns + hint.duration_ms * 1_000_000
        return out

    def due(self, now_ns: int) -> list[Write]:
        """The defaults of every boost that has ended by now."""
        out: list[Write] = []
        for i in [i for i, end in self._ends_ns.items() if end <= now_ns]:
            del self._ends_ns[i]
            out += self._defaults(self.hints[i])
        return out

    def mode(self, trigger: HintTrigger, active: bool) -> list[Write]:
        """A mode's writes when it comes on (screen off, deep idle), its defaults when it ends."""
        if (trigger in self._modes) == active:
            return []
        if active:
            self._modes.add(trigger)
        else:
            self._modes.discard(trigger)
        out: list[Write] = []
        for hint in self.hints:
            if hint.trigger is trigger and hint.duration_ms is None:
                out += self._writes(hint) if active else self._defaults(hint)
        return out

    def screen(self, on: bool) -> list[Write]:
        return self.mode(HintTrigger.SCREEN_OFF, not on)
