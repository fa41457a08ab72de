"""Build farm-sampler's command line from typed sources, and pick default sources for a phone.

Source names follow farm.analysis.series.SourceNames (`battery.current_now`, `gpu.busy`,
`gpu.freq`, `cpu.freq.<policy>`, `thermal.<zone type>`, ...), so a parsed trace feeds the
metrics without renaming.
Units are not converted on the phone: each Source carries the raw unit its values arrive in, and
the probe's capabilities say which. Pure: no processes, no phone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from farm.analysis.series import DEFAULT_SOURCES
from farm.errors import ConfigError
from farm.telemetry.probe import Capabilities, CurrentSign, Node, ThermalZone

MIN_RATE_HZ = 1.0
MAX_RATE_HZ = 1000.0
# Fuel gauges refresh about once a second (some every 10 s) and thermal sensors a few times a
# second: 20 Hz places their update points within 50 ms without reading them at 1 kHz.
SLOW_SOURCE_RATE_HZ = 20.0
# A name the sampler accepts: it also becomes a JSON key and a column name.
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# Which thermal zones matter for GPU benchmarks, best first (substring of the zone type).
_GPU_ZONE_HINTS = ("gpu", "g3d", "mali", "gpuss")
_CPU_ZONE_HINTS = ("cpu", "big", "tsens", "soc", "mtktscpu")
_BODY_ZONE_HINTS = ("battery", "skin", "xo-therm", "pa_therm")


class SourceFormat(StrEnum):
    INT = "int"  # one integer
    FLOAT = "float"  # one decimal number
    PCT = "pct"  # "NN %" -> NN
    KGSL = "kgsl"  # "busy total" -> busy / total (0..1)
    PAIR = "pair"  # two numbers -> two columns


@dataclass(frozen=True)
class Source:
    """One file to sample. `unit` is the raw unit of the values in the trace."""

    name: str
    path: str
    format: SourceFormat = SourceFormat.INT
    unit: str = ""
    discharge_sign: int | None = None  # battery current only: sign while discharging
    rate_hz: float | None = None  # read less often than the sampler's tick rate (None: every tick)

    def arg(self, tick_rate_hz: float) -> str:
        """The --source argument; a source rate at or above the tick rate means every tick."""
        slower = self.rate_hz is not None and self.rate_hz < tick_rate_hz
        rate = f"@{self.rate_hz:g}" if slower else ""
        return f"--source={self.name}={self.path}:{self.format.value}{rate}"


def _check(sources: Sequence[Source], rate_hz: float) -> None:
    if not MIN_RATE_HZ <= rate_hz <= MAX_RATE_HZ:
        raise ConfigError(f"sampler rate {rate_hz:g} Hz is outside {MIN_RATE_HZ:g}..{MAX_RATE_HZ:g} Hz")
    seen: set[str] = set()
    for s in sources:
        if not _NAME_RE.match(s.name):
            raise ConfigError(f"sampler source name {s.name!r}: use letters, digits, '_', '.', '-'")
        if s.name in seen:
            raise ConfigError(f"sampler source {s.name!r} is given twice")
        seen.add(s.name)
        if s.rate_hz is not None and not s.rate_hz > 0:
            raise ConfigError(f"sampler source {s.name!r}: rate {s.rate_hz:g} Hz must be > 0")
        if not s.path.startswith("/") or any(c in s.path for c in "\n\0 '\""):
            raise ConfigError(
                f"sampler source {s.name!r}: path {s.path!r} must be absolute, without spaces or quotes"
            )


def sampler_argv(
    binary: str,
    sources: Sequence[Source],
    rate_hz: float,
    out_path: str,
    watch_pid: int | None = None,
    *,
    duration_s: float | None = None,
    linger_s: float | None = None,
    mem_rate_hz: float | None = None,
    flush_ms: int | None = None,
) -> list[str]:
    """argv for farm-sampler. Raises ConfigError for a rate, name or path it would refuse."""
    _check(sources, rate_hz)
    if not sources and watch_pid is None:
        raise ConfigError("sampler needs at least one source or a pid to watch")
    if linger_s is not None and watch_pid is None:
        raise ConfigError("sampler linger_s only makes sense with watch_pid")
    argv = [binary, f"--out={out_path}", f"--rate-hz={rate_hz:g}"]
    argv += [s.arg(rate_hz) for s in sources]
    if watch_pid is not None:
        argv.append(f"--watch-pid={int(watch_pid)}")
    if mem_rate_hz is not None:
        argv.append(f"--mem-rate-hz={mem_rate_hz:g}")
    if duration_s is not None:
        argv.append(f"--duration-s={duration_s:g}")
    if linger_s is not None:
        argv.append(f"--linger-s={linger_s:g}")
    if flush_ms is not None:
        argv.append(f"--flush-ms={int(flush_ms)}")
    return argv


CPU_FREQ_PREFIX = DEFAULT_SOURCES.cpu_freq_prefix  # + the policy's folder (policy0; cpu0 on old kernels)


def cpu_freq_source_name(policy: str) -> str:
    return f"{CPU_FREQ_PREFIX}{re.sub(r'[^A-Za-z0-9_.-]', '_', policy)}"


def _usable(node: Node | None) -> Node | None:
    return node if node is not None and node.usable else None


def _zone_name(zone: ThermalZone) -> str:
    kind = re.sub(r"[^A-Za-z0-9_.-]", "_", zone.type or zone.zone)
    return f"thermal.{kind}"


def _pick_zones(zones: Sequence[ThermalZone], max_zones: int) -> list[ThermalZone]:
    """The GPU zone, the hottest CPU zone, then battery/skin: what a GPU benchmark heats."""
    readable = [z for z in zones if z.node.usable and z.celsius is not None]
    picked: list[ThermalZone] = []
    for hints in (_GPU_ZONE_HINTS, _CPU_ZONE_HINTS, _BODY_ZONE_HINTS):
        matching = [
            z for z in readable if any(h in (z.type or "").lower() for h in hints) and z not in picked
        ]
        matching.sort(key=lambda z: -(z.celsius or 0.0))
        take = 2 if hints is _BODY_ZONE_HINTS else 1  # battery and skin both matter for power
        picked += matching[:take]
    names: set[str] = set()
    unique = []
    for z in picked:
        if _zone_name(z) not in names:
            names.add(_zone_name(z))
            unique.append(z)
    return unique[:max_zones]


def default_sources(
    caps: Capabilities, *, max_thermal_zones: int = 4, slow_rate_hz: float | None = SLOW_SOURCE_RATE_HZ
) -> tuple[Source, ...]:
    """Battery current/voltage/charge counter, GPU busy and frequency, each CPU policy's current
    frequency (scaling_cur_freq, kHz), the relevant thermal zones.

    Only readable nodes are chosen: an unreadable one would give a column of NaN. Battery and
    thermal nodes are read at `slow_rate_hz` (None: every tick; a sampler rate below it also
    means every tick): fuel gauges and thermal sensors update a few times a second at most, and
    each read can be a slow PMIC/I2C transaction. CPU clocks are read at every tick like the
    GPU's: a governor moves them within milliseconds, and the nodes are cheap to read.
    """
    out: list[Source] = []
    bat = caps.battery
    if cur := _usable(bat.current):
        sign = bat.current_sign.discharge_sign if bat.current_sign is not CurrentSign.UNKNOWN else None
        out.append(
            Source(
                "battery.current_now",
                cur.path,
                SourceFormat.INT,
                bat.current_unit or "uA",
                sign,
                slow_rate_hz,
            )
        )
    if volt := _usable(bat.voltage):
        unit = bat.voltage_unit or "uV"
        out.append(Source("battery.voltage_now", volt.path, SourceFormat.INT, unit, rate_hz=slow_rate_hz))
    if cc := _usable(bat.charge_counter):
        out.append(Source("battery.charge_counter", cc.path, SourceFormat.INT, "uAh", rate_hz=slow_rate_hz))
    gpu = caps.gpu
    if (busy := _usable(gpu.busy)) and gpu.busy_format:
        fmt = SourceFormat(gpu.busy_format)
        out.append(Source("gpu.busy", busy.path, fmt, "fraction" if fmt is SourceFormat.KGSL else "percent"))
    if (freq := _usable(gpu.freq)) and gpu.freq_unit:
        out.append(Source("gpu.freq", freq.path, SourceFormat.INT, gpu.freq_unit))
    for policy in caps.cpu_policies:
        if policy.cur_khz is not None:  # the probe read it: readable for us too
            out.append(
                Source(
                    cpu_freq_source_name(policy.policy),
                    f"{policy.dir}/scaling_cur_freq",
                    SourceFormat.INT,
                    "kHz",
                )
            )
    for zone in _pick_zones(caps.thermal, max_thermal_zones):
        out.append(
            Source(
                _zone_name(zone), zone.node.path, SourceFormat.INT, zone.unit or "mC", rate_hz=slow_rate_hz
            )
        )
    return tuple(out)


__all__ = [
    "CPU_FREQ_PREFIX",
    "Source",
    "SourceFormat",
    "cpu_freq_source_name",
    "default_sources",
    "sampler_argv",
]
