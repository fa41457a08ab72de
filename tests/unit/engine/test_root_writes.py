"""The root write script's report (pure): read-backs, and which writes the kernel refused."""

from __future__ import annotations

from farm.device.controls import RootWrites, parse_root_writes
from farm.engine.clocks import refused_message

GOV = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"
MIN = "/sys/devices/system/cpu/cpufreq/policy0/scaling_min_freq"


def test_the_last_write_of_a_node_decides_and_readbacks_keep_their_tabs() -> None:
    writes = [(MIN, "300000"), (GOV, "bogus"), (MIN, "1800000"), (GOV, "performance")]
    out = (
        f"{MIN}\trefused\t300000\n{GOV}\trefused\tschedutil\n{MIN}\tok\t1800000\n"
        f"{GOV}\tok\tperf\tx\nstray line\n"
    )
    assert parse_root_writes(out, writes) == RootWrites({MIN: "1800000", GOV: "perf\tx"}, {})
    out = f"{MIN}\tok\t300000\n{GOV}\trefused\tschedutil\n"
    got = parse_root_writes(out, writes[:2])
    assert got.refused == {GOV: "bogus"} and got.readback[GOV] == "schedutil"


def test_the_refusal_names_the_node_and_the_value() -> None:
    assert refused_message({GOV: "bogus"}) == f"the phone refused 'bogus' for {GOV}"
    assert refused_message({GOV: "bogus", MIN: "1"}).endswith("(and 1 more)")
