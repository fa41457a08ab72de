"""SoC profiles of virtual phones: identity, telemetry paths and quirks, power and thermal models.

A profile is a YAML file in farm/virtual/profiles/. It is parsed once, at the edge, into frozen
pydantic models; a bad file gives one ConfigError line `FILE:LINE: key.path: what is wrong`.
The physics and the sandbox read only these models, never the YAML.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from farm import safe_yaml
from farm.errors import ConfigError

_IDENTITY_KEYS = (
    "ro.product.model",
    "ro.product.manufacturer",
    "ro.product.brand",
    "ro.product.name",
    "ro.product.device",
    "ro.board.platform",
    "ro.build.version.sdk",
    "ro.build.version.release",
)


class GpuKind(enum.StrEnum):
    ADRENO = "adreno"  # /sys/class/kgsl/kgsl-3d0/{gpubusy,gpu_busy_percentage,devfreq/...}
    MALI = "mali"  # /sys/class/misc/mali0/device/utilization, /sys/kernel/gpu/gpu_busy "N %"


class CurrentUnit(enum.StrEnum):
    UA = "uA"
    MA = "mA"


class DischargeSign(enum.StrEnum):
    NEGATIVE = "negative"  # the 2020 ABI: current_now < 0 while discharging
    POSITIVE = "positive"  # older Qualcomm/Nexus kernels: > 0 while discharging


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuSpec(_Frozen):
    kind: GpuKind
    model: str
    # PoCL worker threads that stand for the GPU; also POCL_MAX_PTHREAD_COUNT of the shells.
    cores: int = Field(default=1, ge=1, le=64)
    freqs_hz: tuple[int, ...] = Field(min_length=1)
    # Mali devfreq device name under /sys/class/devfreq/ (Mali only).
    devfreq_name: str = "1f000000.mali"

    @field_validator("freqs_hz")
    @classmethod
    def _sorted(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(f <= 0 for f in v) or list(v) != sorted(v):
            raise ValueError("must be positive frequencies in ascending order")
        return v


class OpenClSpec(_Frozen):
    # Phone path of the vendor OpenCL library; None: a phone without OpenCL (the ICD is hidden).
    library: str | None = "/vendor/lib64/libOpenCL.so"
    install: str = Field(default="symlink", pattern="^(symlink|copy)$")


class BatterySpec(_Frozen):
    capacity_mah: int = Field(gt=0)
    current_unit: CurrentUnit = CurrentUnit.UA
    discharge_sign: DischargeSign = DischargeSign.NEGATIVE
    # Real fuel gauges refresh current_now only every so often (Nexus 6P: ~10 s).
    fuel_gauge_interval_s: float = Field(default=1.0, gt=0)
    voltage_full_mv: int = 4400
    voltage_empty_mv: int = 3400
    charge_current_ma: int = Field(default=1500, ge=0)
    initial_level: int = Field(default=80, ge=0, le=100)
    # Level drains this many times faster than the true integrated energy, so it moves in minutes.
    level_time_scale: float = Field(default=60.0, gt=0)
    # Root-only vendor node that really stops charging; value written to stop / to resume.
    charging_node: str | None = "/sys/class/power_supply/battery/input_suspend"
    charging_node_stop: str = "1"
    charging_node_resume: str = "0"


class PowerSpec(_Frozen):
    """power_mw = idle_mw + cpu_core_mw * busy_cores + gpu_busy_mw * gpu_busy + screen_mw * screen_on."""

    idle_mw: float = Field(ge=0)
    cpu_core_mw: float = Field(ge=0)
    gpu_busy_mw: float = Field(ge=0)
    screen_mw: float = Field(default=0.0, ge=0)


class ThermalSpec(_Frozen):
    """First-order model: dT/dt = (P * r_c_per_w - (T - ambient_c)) / (r_c_per_w * c_j_per_c)."""

    r_c_per_w: float = Field(gt=0)
    c_j_per_c: float = Field(gt=0)
    ambient_c: float = 25.0
    # Zone types, in thermal_zoneN order; every zone shows the same modelled die temperature.
    zones: tuple[str, ...] = ("cpu-0-0-usr", "gpuss-0-usr", "battery", "skin-therm")


class CpuSpec(_Frozen):
    freqs_khz: tuple[int, ...] = Field(min_length=1)
    governor: str = "schedutil"


class Profile(_Frozen):
    name: str
    description: str = ""
    props: dict[str, str]
    rooted: bool = False
    ram_mb: int = Field(gt=0)
    gpu: GpuSpec | None = None
    opencl: OpenClSpec = OpenClSpec()
    battery: BatterySpec
    power: PowerSpec
    thermal: ThermalSpec
    cpu: CpuSpec
    # Phone paths created with mode 000 (root-only), e.g. devfreq nodes hidden by SELinux.
    unreadable: tuple[str, ...] = ()

    @field_validator("props", mode="before")
    @classmethod
    def _props_are_strings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): str(x).lower() if isinstance(x, bool) else str(x) for k, x in v.items()}
        return v

    @model_validator(mode="after")
    def _identity_present(self) -> Profile:
        missing = [k for k in _IDENTITY_KEYS if k not in self.props]
        if missing:
            raise ValueError(f"props: missing identity keys {', '.join(missing)}")
        if self.opencl.library is not None and self.gpu is None:
            raise ValueError("opencl.library needs a gpu section")
        if self.opencl.library is not None and not self.opencl.library.startswith("/vendor/"):
            raise ValueError("opencl.library must be a path under /vendor/")
        return self

    @property
    def has_opencl(self) -> bool:
        return self.opencl.library is not None


# -- YAML with line numbers ----------------------------------------------------------------------


def _construct(node: yaml.Node, lines: dict[tuple[str, ...], int], path: tuple[str, ...]) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(safe_yaml.construct(key_node))
            lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, lines, (*path, key))
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(v, lines, (*path, str(i))) for i, v in enumerate(node.value)]
    return safe_yaml.construct(node)


def _line_of(lines: dict[tuple[str, ...], int], loc: tuple[str, ...]) -> int:
    while loc and loc not in lines:
        loc = loc[:-1]
    return lines.get(loc, 1)


def parse_profile(text: str, source: str) -> Profile:
    """Parse one profile's YAML text; `source` names the file in errors."""
    node = safe_yaml.compose(text, source)
    if node is None or not isinstance(node, yaml.MappingNode):
        raise ConfigError("a profile must be a mapping of keys", location=f"{source}:1")
    lines: dict[tuple[str, ...], int] = {}
    data = _construct(node, lines, ())
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(str(p) for p in err["loc"])
        # props keys contain dots; show them as one key.
        key = ".".join(loc) if loc else "(top)"
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(
            f"{key}: {msg}", location=f"{source}:{_line_of(lines, loc)}", hint="see farm/virtual/profiles/"
        ) from None


def load_profile_file(path: Path) -> Profile:
    return parse_profile(safe_yaml.read_text(path, "profile"), str(path))
