"""Parse farm-probe's JSON document (device_agents/README.md, "Probe output") into Capabilities.

The probe runs on the phone once per session and says what telemetry the phone offers and with
which conventions (current sign and unit, GPU busy format, frequency unit, temperature unit).
Everything here is pure: text in, frozen values out. A node the shell cannot read stays in the
capabilities with `readable=False` and its errno name, so callers can tell "absent" from "denied".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from farm import safe_json
from farm.telemetry.opencl import OpenClDevice, device_of

SUPPORTED_PROBE_VERSIONS = (1,)


class ProbeOutputError(ValueError):
    """The text is not a farm-probe document; callers wrap it with the phone's serial."""


class GpuFamily(StrEnum):
    ADRENO = "adreno"
    MALI = "mali"
    MEDIATEK = "mediatek"
    UNKNOWN = "unknown"


class CurrentSign(StrEnum):
    """Sign `current_now` has while the battery discharges."""

    NEGATIVE_DISCHARGING = "negative_discharging"  # the 2020 kernel ABI
    POSITIVE_DISCHARGING = "positive_discharging"  # older Qualcomm, some vendors
    UNKNOWN = "unknown"  # status unknown/full, or current read 0

    @property
    def discharge_sign(self) -> int | None:
        """-1 / +1 as farm.analysis.power.BatteryCalibration.discharge_sign, None if unknown."""
        return {CurrentSign.NEGATIVE_DISCHARGING: -1, CurrentSign.POSITIVE_DISCHARGING: 1}.get(self)


@dataclass(frozen=True)
class Node:
    """One sysfs/procfs file as the probe found it."""

    path: str
    present: bool
    readable: bool
    error: str | None  # errno name (EACCES, EINVAL, ...) when not readable
    value: str | None  # its text when readable

    @property
    def usable(self) -> bool:
        return self.present and self.readable


@dataclass(frozen=True)
class Battery:
    dir: str | None
    status: str | None  # Charging / Discharging / Not charging / Full / Unknown
    current: Node | None
    current_unit: str | None  # "uA" | "mA" (hint from magnitude)
    current_sign: CurrentSign
    current_samples: tuple[int, ...]
    voltage: Node | None
    voltage_unit: str | None  # "uV" | "mV" | "V"
    current_avg: Node | None
    charge_counter: Node | None  # uAh
    capacity: Node | None  # %
    temp: Node | None  # 0.1 C


@dataclass(frozen=True)
class ChargingNode:
    node: Node
    writable: bool  # by the probing user (shell unless adbd runs as root)
    enable_value: str
    disable_value: str


@dataclass(frozen=True)
class Gpu:
    family: GpuFamily
    model: str | None
    busy: Node | None
    busy_format: str | None  # kgsl | pct | int | float (the sampler's format names)
    freq: Node | None
    freq_unit: str | None  # Hz | kHz | MHz
    candidates: tuple[Node, ...]  # every busy/freq file present, readable or not


@dataclass(frozen=True)
class ThermalZone:
    zone: str  # thermal_zoneN
    type: str | None
    node: Node  # .../temp
    unit: str | None  # mC | dC | C (hint from magnitude)

    @property
    def celsius(self) -> float | None:
        if not self.node.readable or self.node.value is None or self.unit is None:
            return None
        try:
            raw = float(self.node.value)
        except ValueError:
            return None
        return raw / {"mC": 1000.0, "dC": 10.0, "C": 1.0}[self.unit]


@dataclass(frozen=True)
class CpuPolicy:
    policy: str
    dir: str
    cpus: str | None
    governor: str | None
    cur_khz: int | None
    min_khz: int | None
    max_khz: int | None


@dataclass(frozen=True)
class Root:
    uid: int
    adbd_root: bool
    su_path: str | None
    su_works: bool | None  # None: no su, or not checked

    @property
    def available(self) -> bool:
        return self.adbd_root or bool(self.su_works)


@dataclass(frozen=True)
class Capabilities:
    probe_version: int
    props: tuple[tuple[str, str], ...]
    abi: str | None
    root: Root
    opencl_libraries: tuple[str, ...]
    battery: Battery
    charging: tuple[ChargingNode, ...]
    gpu: Gpu
    thermal: tuple[ThermalZone, ...]
    cpu_online: str | None
    cpu_policies: tuple[CpuPolicy, ...]
    mem_total_kb: int | None
    elapsed_ms: int
    # What a benchmark program listed (farm.engine.lifecycle.read_probe); None: not listed (no
    # build for the phone's ABI), so only the probe's library files speak for OpenCL.
    opencl_devices: tuple[OpenClDevice, ...] | None = None

    @property
    def has_opencl(self) -> bool:
        """Devices listed, when they were listed; else (unverified) a known library file."""
        if self.opencl_devices is not None:
            return bool(self.opencl_devices)
        return bool(self.opencl_libraries)

    def prop(self, key: str) -> str | None:
        return dict(self.props).get(key)

    def charging_switch(self) -> ChargingNode | None:
        """The first charging-control node usable by this phone's user or through root."""
        for c in self.charging:
            if c.node.present and (c.writable or self.root.available):
                return c
        return None


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _node(d: Any) -> Node | None:
    if d is None:
        return None
    if not isinstance(d, Mapping) or "path" not in d:
        raise ProbeOutputError(f"expected a node object with a path, got {d!r}")
    return Node(
        path=str(d["path"]),
        present=bool(d.get("present", True)),
        readable=bool(d.get("readable", False)),
        error=_str_or_none(d.get("error")),
        value=_str_or_none(d.get("value")),
    )


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str | None:
    """A hint from the probe: one of `allowed`, or None when the probe could not tell."""
    if value is None or value in allowed:
        return value
    raise ProbeOutputError(f"{what} {value!r} is not one of {', '.join(allowed)}")


def _required_node(d: Any) -> Node:
    node = _node(d)
    if node is None:
        raise ProbeOutputError("expected a node object, got null")
    return node


def _int_or_none(text: Any) -> int | None:
    try:
        return int(str(text).split()[0])
    except (ValueError, IndexError):
        return None


def _battery(b: Mapping[str, Any]) -> Battery:
    cur = b.get("current_now") or {}
    volt = b.get("voltage_now") or {}
    sign = cur.get("sign_hint")
    return Battery(
        dir=b.get("dir"),
        status=b.get("status"),
        current=_node(b.get("current_now")),
        current_unit=_choice(cur.get("unit_hint"), ("uA", "mA"), "battery current unit"),
        current_sign=CurrentSign(sign) if sign else CurrentSign.UNKNOWN,
        current_samples=tuple(int(x) for x in cur.get("samples", ())),
        voltage=_node(b.get("voltage_now")),
        voltage_unit=_choice(volt.get("unit_hint"), ("uV", "mV", "V"), "battery voltage unit"),
        current_avg=_node(b.get("current_avg")),
        charge_counter=_node(b.get("charge_counter")),
        capacity=_node(b.get("capacity")),
        temp=_node(b.get("temp")),
    )


def _gpu(g: Mapping[str, Any]) -> Gpu:
    busy, freq = g.get("busy"), g.get("freq")
    return Gpu(
        family=GpuFamily(g.get("family", "unknown")),
        model=g.get("model"),
        busy=_node(busy),
        busy_format=_choice(
            busy.get("format") if busy else None, ("kgsl", "pct", "int", "float"), "GPU busy format"
        ),
        freq=_node(freq),
        freq_unit=_choice(freq.get("unit") if freq else None, ("Hz", "kHz", "MHz"), "GPU frequency unit"),
        candidates=tuple(n for n in (_node(c) for c in g.get("candidates", ())) if n is not None),
    )


def _thermal(t: Mapping[str, Any]) -> ThermalZone:
    node = _required_node(t)
    unit = _choice(t.get("unit_hint"), ("mC", "dC", "C"), "thermal unit")
    return ThermalZone(zone=str(t.get("zone", "")), type=_str_or_none(t.get("type")), node=node, unit=unit)


def _policy(p: Mapping[str, Any]) -> CpuPolicy:
    return CpuPolicy(
        policy=str(p["policy"]),
        dir=str(p["dir"]),
        cpus=p.get("related_cpus"),
        governor=p.get("scaling_governor"),
        cur_khz=_int_or_none(p.get("scaling_cur_freq")),
        min_khz=_int_or_none(p.get("scaling_min_freq")),
        max_khz=_int_or_none(p.get("scaling_max_freq") or p.get("cpuinfo_max_freq")),
    )


def _charging(c: Mapping[str, Any]) -> ChargingNode:
    node = _required_node(c)
    return ChargingNode(node, bool(c.get("writable")), str(c["enable_value"]), str(c["disable_value"]))


# The key farm adds to the stored probe document: the devices a program listed (None: not listed).
OPENCL_DEVICES_KEY = "opencl_devices"


def _listed(devices: Any) -> tuple[OpenClDevice, ...] | None:
    if devices is None:
        return None
    return tuple(device_of(d) for d in devices)


def parse_probe(text: str) -> Capabilities:
    """Parse farm-probe's stdout. Raises ProbeOutputError with what was wrong."""
    try:
        doc = safe_json.loads(text)
    except ValueError as exc:
        first = text.strip().splitlines()[0][:120] if text.strip() else "(empty output)"
        raise ProbeOutputError(f"farm-probe output is not JSON ({exc}): {first}") from exc
    return capabilities_of(doc)


def capabilities_of(doc: object) -> Capabilities:
    """farm-probe's document, already decoded from JSON (as stored), into Capabilities. Raises
    ProbeOutputError with what was wrong."""
    if not isinstance(doc, Mapping):
        raise ProbeOutputError("farm-probe output is not a JSON object")
    version = doc.get("probe_version")
    if version not in SUPPORTED_PROBE_VERSIONS:
        raise ProbeOutputError(
            f"farm-probe version {version!r} is not supported (this farm reads "
            f"{SUPPORTED_PROBE_VERSIONS}); redeploy the matching device agents"
        )
    try:
        root = doc["root"]
        mem = doc.get("memory") or {}
        cpu = doc.get("cpu") or {}
        return Capabilities(
            probe_version=int(version),
            props=tuple(sorted((str(k), str(v)) for k, v in (doc.get("props") or {}).items())),
            abi=doc.get("abi"),
            root=Root(int(root["uid"]), bool(root["adbd_root"]), root.get("su_path"), root.get("su_works")),
            opencl_libraries=tuple(str(p) for p in (doc.get("opencl") or {}).get("libraries", ())),
            battery=_battery(doc.get("battery") or {}),
            charging=tuple(_charging(c) for c in doc.get("charging_control", ())),
            gpu=_gpu(doc.get("gpu") or {}),
            thermal=tuple(_thermal(t) for t in doc.get("thermal", ())),
            cpu_online=cpu.get("online"),
            cpu_policies=tuple(_policy(p) for p in cpu.get("policies", ())),
            mem_total_kb=_int_or_none(mem.get("total_kb")) if mem.get("total_kb") is not None else None,
            elapsed_ms=int(doc.get("elapsed_ms", 0)),
            opencl_devices=_listed(doc.get(OPENCL_DEVICES_KEY)),
        )
    except ProbeOutputError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProbeOutputError(f"farm-probe document is malformed: {type(exc).__name__}: {exc}") from exc
