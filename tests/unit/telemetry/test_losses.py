"""lost_telemetry: sources a phone has but refuses to the shell user (SELinux on a Pixel 7: every
thermal zone, the Mali utilisation node), named with what each costs the run."""

from __future__ import annotations

from typing import Any

from farm.telemetry.losses import LostSource, lost_telemetry
from farm.telemetry.probe import parse_probe
from tests.unit.telemetry.test_probe_parse import ADRENO_GPU, DENIED_GPU, THERMAL, doc, node, zone

MALI = "/sys/devices/platform/28000000.mali"
PIXEL_GPU = {
    "family": "mali",
    "model": "Mali-G710",
    "busy": node(f"{MALI}/utilization", None, "EACCES", format="int"),
    "freq": node(f"{MALI}/devfreq/28000000.mali/cur_freq", None, "EACCES", unit="Hz"),
    "candidates": [
        node(f"{MALI}/utilization", None, "EACCES", role="busy"),
        node("/sys/kernel/gpu/gpu_busy", None, "EACCES", role="busy"),
        node(f"{MALI}/devfreq/28000000.mali/cur_freq", None, "EACCES", role="freq"),
    ],
}
PIXEL_ZONES = [
    zone(n, kind, None, "EACCES") for n, kind in enumerate(("BIG", "G3D", "battery", "skin_therm"))
]
BATTERY: dict[str, Any] = {"current": [-350000], "unit": "uA", "sign": "negative_discharging"}


def test_a_pixel_that_refuses_zones_and_gpu_nodes_loses_each_with_its_cost() -> None:
    caps = parse_probe(doc(gpu=PIXEL_GPU, **BATTERY, thermal=PIXEL_ZONES))
    losses = {loss.source: loss for loss in lost_telemetry(caps)}
    assert set(losses) == {LostSource.THERMAL_ZONES, LostSource.GPU_BUSY, LostSource.GPU_FREQ}
    zones = losses[LostSource.THERMAL_ZONES]
    assert zones.errors == ("EACCES",) and len(zones.paths) == 4
    assert "battery temperature" in zones.note() and "thermal_zone0/temp and 3 more" in zones.note()
    assert "open loop" in losses[LostSource.GPU_BUSY].to_json()["effect"]  # type: ignore[operator]


def test_one_readable_file_of_a_kind_is_no_loss_and_a_missing_kind_is_no_loss() -> None:
    readable = parse_probe(doc(gpu=ADRENO_GPU, **BATTERY, thermal=THERMAL))
    assert lost_telemetry(readable) == ()  # one zone refuses EINVAL, the others read
    nothing = parse_probe(doc(gpu=DENIED_GPU, **BATTERY, thermal=[]))
    assert [loss.source for loss in lost_telemetry(nothing)] == [LostSource.GPU_BUSY]
