"""clocks_held: a pin read back once is not a pin held; every throttle sample reads the pinned
nodes and the first that reads something else breaks the run's clocks (a power HAL's boost)."""

from __future__ import annotations

from farm.engine.clockhold import clocks_held
from farm.engine.thermal import ThrottleSample, parse_sample

MIN = "/sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq"
GOV = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"
PINNED = {MIN: "1800000", GOV: "performance"}


def sample(min_khz: str, governor: str = "performance") -> ThrottleSample:
    return parse_sample(
        f"cpu /sys/devices/system/cpu/cpufreq/policy0 1800000\nnode {MIN} {min_khz}\nnode {GOV} {governor}\n"
    )


def test_every_sample_reading_the_pins_holds() -> None:
    hold = clocks_held([(0.0, sample("1800000")), (1.0, sample("1800000"))], PINNED)
    assert hold is not None and hold.held and hold.samples == 2
    assert hold.to_json() == {"held": True, "samples": 2, "drifts": []}


def test_a_rewritten_min_breaks_the_hold_at_its_first_sample_even_if_it_comes_back() -> None:
    samples = [
        (0.0, sample("1800000")),
        (1.0, sample("1200000")),
        (2.0, sample("300000")),
        (3.0, sample("1800000")),
    ]
    hold = clocks_held(samples, PINNED)
    assert hold is not None and not hold.held
    (drift,) = hold.drifts
    assert (drift.node, drift.pinned, drift.seen, drift.at_s) == (MIN, "1800000", "1200000", 1.0)
    assert "read 1200000 (pinned 1800000)" in drift.describe()


def test_nothing_pinned_or_nothing_read_is_no_judgement() -> None:
    assert clocks_held([(0.0, sample("1800000"))], {}) is None
    assert clocks_held([(0.0, parse_sample("cpu /x 1800000\n"))], PINNED) is None
    assert parse_sample(f"node {MIN} \n").nodes == {MIN: ""}  # an unreadable node reads as nothing


def test_a_pin_written_again_is_parsed_recorded_and_described() -> None:
    from farm.engine.clockhold import ClockHold, Reapplied
    from farm.engine.steering import Repinned, parse_line

    event = parse_line("repin 3000 su-c /sys/p0/scaling_min_freq /sys/p4/scaling_min_freq")
    assert event == Repinned(3000, "su-c", ("/sys/p0/scaling_min_freq", "/sys/p4/scaling_min_freq"))
    again = Reapplied(3.0, "su-c", event.nodes)
    hold = ClockHold(4, (), reapplied=again)
    assert hold.to_json()["reapplied"] == {"at_s": 3.0, "how": "su-c", "nodes": list(event.nodes), "tries": 1}
    assert again.describe().startswith("clock pins re-applied at 3 s (su-c): /sys/p0/scaling_min_freq")
    assert Reapplied(1.0, "failed", ("/n",)).describe() == "re-applying the clock pins at 1 s failed (/n)"
    # The script tries again at the next sample while the pin does not hold (at most three).
    second = Reapplied(2.0, "direct", ("/n",), tries=2)
    assert second.describe() == "clock pins re-applied at 2 s (direct, 2 tries): /n"
    assert Reapplied(3.0, "failed", ("/n",), tries=3).describe().endswith("failed, 3 tries (/n)")
