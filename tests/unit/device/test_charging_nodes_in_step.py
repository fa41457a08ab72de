"""The host's charging switches (farm.device.controls) and the probe's (device_agents/probe/
power.c) are one list in one order: the probe offers the node the host then writes."""

from __future__ import annotations

import re
from pathlib import Path

from farm.device.controls import CHARGING_NODES

POWER_C = Path(__file__).parents[3] / "device_agents" / "probe" / "power.c"


def _probe_nodes() -> list[tuple[str, str, str]]:
    text = POWER_C.read_text()
    table = text[text.index("CHARGING_NODES[] = {") : text.index("};", text.index("CHARGING_NODES[] = {"))]
    rows = re.findall(r'\{(PSY )?"([^"]+)", "([^"]*)", "([^"]*)"\}', table)
    return [(("/sys/class/power_supply" if psy else "") + path, on, off) for psy, path, on, off in rows]


def test_probe_and_host_know_the_same_switches_in_the_same_order() -> None:
    probe = _probe_nodes()
    assert len(probe) >= 15
    assert probe == [(path, on, off) for path, (on, off) in CHARGING_NODES.items()]


def test_the_modern_switches_are_known_and_store_mode_is_not_a_switch() -> None:
    for node in (
        "/sys/class/qcom-battery/input_suspend",
        "/sys/devices/platform/soc/soc:google,charger/charge_disable",
        "/sys/class/power_supply/battery/batt_slate_mode",
    ):
        assert node in CHARGING_NODES
    assert not any(path.endswith("/store_mode") for path in CHARGING_NODES)
