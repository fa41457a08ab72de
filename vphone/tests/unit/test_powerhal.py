"""The power HAL model: a boost writes its hint's limits and, when it ends, the defaults (not what
root wrote before); the screen-off mode caps while the screen is off."""

from __future__ import annotations

from pathlib import Path

from vphone.clocks import Knob
from vphone.powerhal import PowerHal
from vphone.profile import HintTrigger
from vphone.profiles import load_profile
from vphone.testing.hypothetical import mode_capping_phone

MS = 1_000_000


def test_a_boost_raises_the_floor_then_restores_the_table_default() -> None:
    profile = load_profile("dimensity9200")
    hal = PowerHal(profile)
    boost = next(h for h in profile.power_hal.hints if h.trigger is HintTrigger.INTERACTION)
    assert boost.cpu_min_khz is not None and boost.duration_ms is not None
    start = hal.start(HintTrigger.INTERACTION, 0)
    assert start == [(Knob.SCALING_MIN, i, str(k)) for i, k in enumerate(boost.cpu_min_khz)]
    assert hal.due(boost.duration_ms * MS - 1) == []
    assert hal.start(HintTrigger.INTERACTION, 100 * MS) == []  # running: extended, not rewritten
    assert hal.due(boost.duration_ms * MS) == []
    ended = hal.due((boost.duration_ms + 100) * MS)
    assert ended == [(Knob.SCALING_MIN, i, str(c.freqs_khz[0])) for i, c in enumerate(profile.cpu.clusters)]


def test_the_screen_off_and_idle_modes_cap_while_they_last_only(tmp_path: Path) -> None:
    profile = load_profile(str(mode_capping_phone(tmp_path)))
    hal = PowerHal(profile)
    assert hal.screen(True) == []
    off = hal.screen(False)
    assert off and all(knob is Knob.SCALING_MAX for knob, _, _ in off)
    assert hal.screen(False) == []
    top = [(Knob.SCALING_MAX, i, str(c.freqs_khz[-1])) for i, c in enumerate(profile.cpu.clusters)]
    assert hal.screen(True) == top
    idle = hal.mode(HintTrigger.IDLE, True)
    assert idle and idle != off and hal.mode(HintTrigger.IDLE, True) == []
    assert hal.mode(HintTrigger.IDLE, False) == top


def test_fixed_performance_asked_again_writes_nothing_and_off_then_on_writes_it_again() -> None:
    """libperfmgr writes a node only when its value changes (FileNode::Update), so a second
    `set-fixed-performance-mode-enabled true` leaves a node root rewrote meanwhile as it is
    (old model: the mode was a state no write could break, so asking again was never needed);
    off then on writes the defaults, then the fixed clocks again."""
    profile = load_profile("mali-tensor")
    fixed = profile.fixed_performance
    assert fixed is not None
    hal = PowerHal(profile)
    pinned = {(Knob.SCALING_MAX, i, str(khz)) for i, khz in enumerate(fixed.cpu_khz)}
    pinned |= {(Knob.SCALING_MIN, i, str(khz)) for i, khz in enumerate(fixed.cpu_khz)}
    assert set(hal.fixed_performance(True)) == pinned
    assert hal.fixed_performance(True) == []  # asked again: nothing is written
    defaults = {(Knob.SCALING_MAX, i, str(c.freqs_khz[-1])) for i, c in enumerate(profile.cpu.clusters)}
    defaults |= {(Knob.SCALING_MIN, i, str(c.freqs_khz[0])) for i, c in enumerate(profile.cpu.clusters)}
    assert set(hal.fixed_performance(False)) == defaults
    assert set(hal.fixed_performance(True)) == pinned


def test_a_boost_that_ends_under_fixed_performance_leaves_the_fixed_clocks() -> None:
    """EndHint gives a node the highest request still outstanding, not its default: a touch
    under fixed performance mode ends with the fixed floor (old model: the default floor)."""
    profile = load_profile("pixel7")
    fixed = profile.fixed_performance
    assert fixed is not None
    hal = PowerHal(profile)
    hal.fixed_performance(True)
    hal.start(HintTrigger.INTERACTION, 0)
    ended = hal.due(10**12)
    assert all(text == str(fixed.cpu_khz[i]) for _knob, i, text in ended), ended
