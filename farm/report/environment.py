"""A phone's environment for the report, from its probe capabilities and the environment snapshot
the engine stored with its latest attempt (pure: documents in, PhoneInfo out)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from farm.report.model import PhoneInfo

# Identity properties worth showing per phone, when the probe or the snapshot has them.
SHOWN_PROPS: tuple[str, ...] = (
    "ro.product.manufacturer",
    "ro.product.model",
    "ro.board.platform",
    "ro.soc.model",
    "ro.build.version.release",
    "ro.build.version.sdk",
    "ro.build.fingerprint",
    "ro.farm.profile",
)
# Snapshot keys that describe one run rather than the phone: not shown per phone.
PER_RUN_KEYS = frozenset(
    {
        "argv",
        "props",
        "notes",
        "device_id",
        "thermal_raw",
        "temperature_start_c",
        "cooldown_waited_s",
        "gpu_load_achieved",
        "gpu_load_target",
        "charging_restored",
        "charging_node_value",
        "throttle",  # per run: throttled runs are counted in the data-quality notes
        "discharge",  # per run: the proof that the battery powered the phone (energy_valid)
        "screen",  # per run: wakefulness before and after the benchmark
        "sensors",  # per run: which sensor each gate and metric used
    }
)
VIRTUAL_PROP = "ro.farm.virtual"
# Virtual phones stamp their build fingerprint with this (vphone/src/vphone/world.py).
VIRTUAL_FINGERPRINT_MARK = "/FARM."


def props_of(doc: Any) -> dict[str, str]:
    """Props from a probe document or an environment snapshot: a dict or a list of pairs."""
    if not isinstance(doc, Mapping):
        return {}
    props = doc.get("props", {})
    pairs: list[tuple[Any, Any]] = []
    if isinstance(props, Mapping):
        pairs = list(props.items())
    elif isinstance(props, list):
        pairs = [(p[0], p[1]) for p in props if isinstance(p, list | tuple) and len(p) == 2]
    return {str(k): str(v) for k, v in pairs if v is not None and str(v) != ""}


def is_virtual(props: Mapping[str, str], capabilities: Any) -> bool:
    if props.get(VIRTUAL_PROP) == "1" or "ro.farm.profile" in props:
        return True
    if VIRTUAL_FINGERPRINT_MARK in props.get("ro.build.fingerprint", ""):
        return True
    return isinstance(capabilities, Mapping) and bool(capabilities.get("virtual"))


def _summary(key: str, value: Any) -> str:
    """One readable line for a snapshot value (governors and program hashes, not raw JSON)."""
    if key == "cpufreq" and isinstance(value, Mapping):
        parts = []
        for path, policy in value.items():
            if "/policy" in str(path) and isinstance(policy, Mapping):
                parts.append(
                    f"{str(path).rsplit('/', 1)[-1]}: {policy.get('governor')} {policy.get('cur_khz')} kHz"
                )
        return "; ".join(parts) or f"{len(value)} cpufreq nodes"
    if key == "clocks" and isinstance(value, Mapping):
        return clocks_summary(value)
    if key == "programs" and isinstance(value, Mapping):
        return ", ".join(
            f"{name} {str(info.get('sha256', ''))[:12]}" if isinstance(info, Mapping) else str(name)
            for name, info in value.items()
        )
    if isinstance(value, Mapping | list):
        return (
            ", ".join(f"{k}={v}" for k, v in value.items())
            if isinstance(value, Mapping)
            else ", ".join(map(str, value))
        )
    return str(value)


def clocks_summary(clocks: Mapping[str, Any]) -> str:
    """The clock control a phone ran under (env.json `clocks`, farm.engine.clocks), in one line:
    what it got and was asked, whether that is as requested, what the CPU nodes read, affinity."""
    mode, asked = clocks.get("mode"), clocks.get("requested")
    parts = [f"{mode}" + (f" (asked {asked})" if asked != mode else "")]
    if clocks.get("as_requested") is False:
        parts.append("not as requested")
    readback = clocks.get("readback")
    if isinstance(readback, Mapping):
        pinned = sorted(
            {
                str(k).rsplit("/", 2)[-2]: v
                for k, v in readback.items()
                if str(k).endswith("scaling_max_freq")
            }.items()
        )
        if pinned:
            parts.append("pinned " + ", ".join(f"{policy} {khz} kHz" for policy, khz in pinned))
    affinity = clocks.get("affinity")
    if affinity and affinity != "all":
        parts.append(f"affinity {affinity} (cpus {clocks.get('affinity_cpus')})")
    notes = clocks.get("notes")
    if isinstance(notes, list) and notes:
        parts.append("; ".join(map(str, notes)))
    return "; ".join(parts)


def phone_info(
    device_id: str, model: str | None, abi: str | None, capabilities: Any, environment: Any
) -> PhoneInfo:
    props = {**props_of(capabilities), **props_of(environment)}
    shown = [(key, props[key]) for key in SHOWN_PROPS if key in props]
    if isinstance(environment, Mapping):
        shown += [
            (str(k), _summary(str(k), v))
            for k, v in environment.items()
            if k not in PER_RUN_KEYS and v not in (None, "", [], {})
        ]
    return PhoneInfo(
        device_id=device_id,
        model=model or props.get("ro.product.model"),
        virtual=is_virtual(props, capabilities),
        abi=abi or props.get("ro.product.cpu.abi"),
        properties=tuple(shown),
    )
