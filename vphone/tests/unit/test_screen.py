"""The screen's user-activity timeout and stay-on hold (vphone.screen), as PowerManagerService."""

from __future__ import annotations

from vphone.screen import STAY_ON_USB, PowerInputs, screen_on_now, timeout_ms_of

MS = 1_000_000


def _inputs(*, stay_on: int = 0, usb: bool = True, on: bool = True) -> PowerInputs:
    return PowerInputs(screen_on=on, activity_ns=0, stay_on_mask=stay_on, timeout_ms=1000, usb_powered=usb)


def test_the_screen_times_out_after_the_last_activity_unless_held() -> None:
    assert screen_on_now(_inputs(), 999 * MS)
    assert not screen_on_now(_inputs(), 1000 * MS)
    assert screen_on_now(_inputs(stay_on=STAY_ON_USB), 10_000 * MS)  # svc power stayon, on USB


def test_stay_on_does_not_hold_without_usb_power() -> None:
    # `dumpsys battery unplug` or an input-suspend switch: BatteryService sees no USB power
    assert not screen_on_now(_inputs(stay_on=7, usb=False), 1000 * MS)


def test_an_off_screen_stays_off_and_a_bad_setting_is_the_default() -> None:
    assert not screen_on_now(_inputs(on=False, stay_on=STAY_ON_USB), 0)
    assert timeout_ms_of(None) == 60_000 and timeout_ms_of("x") == 60_000 and timeout_ms_of("15000") == 15_000
