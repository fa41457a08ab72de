"""What the lifecycle needs to know about a phone, taken from farm-probe's JSON (pure).

farm.telemetry.probe.parse_probe gives the full typed Capabilities; the engine needs only a few
facts (charging node, GPU busy node, thermal zones, battery nodes), read here from the probe
document so a change in the typed model cannot stop runs. Sampler source names follow
farm.analysis.series.SourceNames (battery.current_now, gpu.busy, thermal.battery ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from farm.device.controls import ChargingControl


@dataclass(frozen=True)
class Source:
    """One sampler source: NAME=PATH:FORMAT (formats of farm-sampler: int, float, pct, kgsl)."""

    name: str
    path: str
    format: str = "int"


@dataclass(frozen=True)
class PhoneCaps:
    gpu_family: str
    opencl: bool
    rooted: bool
    charging: ChargingControl | None  # a node farm can write (root), or None
    gpu_busy: Source | None
    gpu_freq: Source | None
    thermal: tuple[Source, ...]
    battery: tuple[Source, ...]

    def sampler_sources(self) -> list[Source]:
        sources = list(self.battery)
        sources += [s for s in (self.gpu_busy, self.gpu_freq) if s is not None]
        return sources + list(self.thermal)

    def temperature_nodes(self) -> list[str]:
        return [s.path for s in self.thermal]


def _readable(node: Any) -> Mapping[str, Any] | None:
    """The probe's node object when the node exists and could be read, else None."""
    ok = isinstance(node, Mapping) and bool(node.get("readable")) and bool(node.get("path"))
    return node if ok else None


def caps_from_probe(doc: Mapping[str, Any]) -> PhoneCaps:
    root = doc.get("root") or {}
    rooted = bool(root.get("adbd_root") or root.get("uid") == 0 or root.get("su_works"))
    charging = None
    for node in doc.get("charging_control") or []:
        usable = isinstance(node, Mapping) and node.get("present", True) and node.get("path")
        if usable and (rooted or node.get("writable")):
            charging = ChargingControl(
                str(node["path"]), str(node.get("enable_value", "1")), str(node.get("disable_value", "0"))
            )
            break
    gpu = doc.get("gpu") or {}
    busy = _readable(gpu.get("busy"))
    gpu_busy = Source("gpu.busy", busy["path"], _busy_format(busy.get("format"))) if busy else None
    freq = _readable(gpu.get("freq"))
    gpu_freq = Source("gpu.freq", freq["path"], "int") if freq else None
    thermal = []
    for item in doc.get("thermal") or []:
        zone = _readable(item)
        if zone:
            kind = str(zone.get("type") or zone.get("zone") or "zone").strip().replace(" ", "_")
            thermal.append(Source(f"thermal.{kind}", zone["path"], "int"))
    battery_doc = doc.get("battery") or {}
    battery = []
    for key in ("current_now", "voltage_now", "temp", "capacity", "charge_counter"):
        node = _readable(battery_doc.get(key))
        if node:
            battery.append(Source(f"battery.{key}", node["path"], "int"))
    if not any(s.name == "thermal.battery" for s in thermal):
        temp = _readable(battery_doc.get("temp"))
        if temp:
            # battery temp is in 0.1 °C; the analysis reads any thermal unit by range.
            thermal.append(Source("thermal.battery", temp["path"], "int"))
    return PhoneCaps(
        gpu_family=str(gpu.get("family") or "unknown"),
        opencl=bool((doc.get("opencl") or {}).get("found")),
        rooted=rooted,
        charging=charging,
        gpu_busy=gpu_busy,
        gpu_freq=gpu_freq,
        thermal=tuple(_unique(thermal)),
        battery=tuple(battery),
    )


def _busy_format(fmt: Any) -> str:
    return str(fmt) if fmt in ("kgsl", "pct", "int", "float") else "int"


def _unique(sources: list[Source]) -> list[Source]:
    seen: set[str] = set()
    out = []
    for source in sources:
        if source.name not in seen:
            seen.add(source.name)
            out.append(source)
    return out
