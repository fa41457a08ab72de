"""SoC profiles of virtual phones: identity, telemetry paths and quirks, power and thermal models.

A profile is a YAML file in vphone/src/vphone/profiles/. It is parsed once, at the edge, into frozen
pydantic models; a bad file gives one ConfigError line `FILE:LINE: key.path: what is wrong`.
The physics and the sandbox read only these models, never the YAML.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from vphone.adb.link import LinkKind
from vphone.errors import ConfigError
from vphone.profileyaml import compose_profile, read_profile_text, scalar_value

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


class ChargingEffect(enum.StrEnum):
    """What the phone's charging switch does when it stops charging (acc/ctrl-files.sh, README:
    switches that "support battery idle mode" let the phone "draw power directly from the external
    power supply when charging is paused")."""

    # Input suspended (qcom smb5 `input_suspend`: the USER ICL vote of 0 makes usb online 0 in
    # smblib_get_prop_usb_online): the battery feeds the phone, status Discharging.
    INPUT_SUSPEND = "input_suspend"
    # Charging disabled with the power path kept (qcom `battery_charging_enabled=0`, Pixel
    # `charge_disable`): USB powers the phone, the battery idles at ~0 mA, status Not charging.
    BATTERY_IDLE = "battery_idle"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _ascending(v: tuple[int, ...]) -> tuple[int, ...]:
    if any(f <= 0 for f in v) or list(v) != sorted(set(v)):
        raise ValueError("must be positive frequencies in ascending order, each once")
    return v


def _governor_list(listed: tuple[str, ...], boot: str, extra: str) -> tuple[str, ...]:
    """The governors a node lists: the profile's, or the boot one plus the stock ones."""
    return tuple(dict.fromkeys((*(listed or (boot, "performance", "powersave", extra)), boot)))


class GpuSpec(_Frozen):
    kind: GpuKind
    model: str
    # PoCL worker threads that stand for the GPU; also POCL_MAX_PTHREAD_COUNT of the shells.
    cores: int = Field(default=1, ge=1, le=64)
    freqs_hz: tuple[int, ...] = Field(min_length=1)
    # Mali devfreq device name under /sys/class/devfreq/ (Mali only).
    devfreq_name: str = "1f000000.mali"
    # devfreq governor at boot and the ones `available_governors` lists (writable as root).
    governor: str | None = None
    governors: tuple[str, ...] = ()
    # Host CPU cores the PoCL workers may use at the top GPU clock (their CFS quota); None: `cores`.
    budget_cores: float | None = Field(default=None, gt=0, le=64)

    @field_validator("freqs_hz")
    @classmethod
    def _sorted(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return _ascending(v)

    @property
    def boot_governor(self) -> str:
        return self.governor or ("msm-adreno-tz" if self.kind is GpuKind.ADRENO else "dummy")

    @property
    def available_governors(self) -> tuple[str, ...]:
        return _governor_list(self.governors, self.boot_governor, "simple_ondemand")

    @property
    def host_budget_cores(self) -> float:
        return self.budget_cores if self.budget_cores is not None else float(self.cores)


class OpenClLoader(enum.StrEnum):
    """How a program reaches the vendor library's OpenCL functions."""

    # The library exports them (dlsym, or DT_NEEDED when it is libOpenCL.so on the linker's path).
    DLSYM = "dlsym"
    # Pixel 6+ libOpenCL-pixel.so: exports only enableOpenCL() and loadOpenCLPointer(name).
    PIXEL = "pixel"


# Where Android's linker finds a DT_NEEDED libOpenCL.so for a program in /data/local/tmp (the
# unrestricted linker namespace searches the vendor and system library directories).
LINKER_VISIBLE_OPENCL = ("/vendor/lib64/libOpenCL.so", "/system/lib64/libOpenCL.so")


def _under_vendor(path: str) -> str:
    # layout.py installs vendor libraries only; /system is the simulator's own tree of tools.
    if not path.startswith("/vendor/"):
        raise ValueError("must be under /vendor/ (the simulator lays out no other library tree)")
    return path


VendorPath = Annotated[str, AfterValidator(_under_vendor)]


class OpenClLibrary(_Frozen):
    """One vendor OpenCL library file: `opencl.library` (with its install and loader) or one of
    `opencl.extra_libraries` (a Pixel 7 has both libOpenCL.so and libOpenCL-pixel.so)."""

    path: VendorPath
    install: str = Field(default="symlink", pattern="^(symlink|copy)$")
    loader: OpenClLoader = OpenClLoader.DLSYM

    @property
    def linker_visible(self) -> bool:
        """Whether Android's linker resolves a DT_NEEDED libOpenCL.so to this file: only a library
        that exports the OpenCL functions, at one of the paths its namespace searches."""
        return self.loader is OpenClLoader.DLSYM and self.path in LINKER_VISIBLE_OPENCL


class OpenClSpec(_Frozen):
    # Phone path of the vendor OpenCL library; None: a phone without OpenCL (the ICD is hidden).
    library: VendorPath | None = "/vendor/lib64/libOpenCL.so"
    install: str = Field(default="symlink", pattern="^(symlink|copy)$")
    loader: OpenClLoader = OpenClLoader.DLSYM
    # Further OpenCL libraries of the same vendor image, each installed like `library`.
    extra_libraries: tuple[OpenClLibrary, ...] = ()

    @model_validator(mode="after")
    def _libraries_agree(self) -> OpenClSpec:
        if self.extra_libraries and self.library is None:
            raise ValueError("extra_libraries needs a library (a phone without OpenCL ships none)")
        paths = [lib.path for lib in self.libraries]
        if len(set(paths)) != len(paths):
            raise ValueError(f"every library path must differ, got {paths}")
        if not self.linker_visible:
            # The sandbox hides the host's ICD loader on such a phone: a link to it would be empty.
            linked = [
                lib.path
                for lib in self.libraries
                if lib.loader is OpenClLoader.DLSYM and lib.install != "copy"
            ]
            if linked:
                raise ValueError(f"with no libOpenCL.so the linker finds, {linked} need install: copy")
        return self

    @property
    def libraries(self) -> tuple[OpenClLibrary, ...]:
        """Every OpenCL library the phone ships, `library` first; () on a phone without OpenCL."""
        if self.library is None:
            return ()
        first = OpenClLibrary(path=self.library, install=self.install, loader=self.loader)
        return (first, *self.extra_libraries)

    @property
    def linker_visible(self) -> bool:
        """Whether a program linked with -lOpenCL starts on this phone (else the linker kills it
        before main, as Android's does when libOpenCL.so is on none of its paths)."""
        return any(lib.linker_visible for lib in self.libraries)


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
    charging_effect: ChargingEffect = ChargingEffect.INPUT_SUSPEND


class PowerSpec(_Frozen):
    """power_mw = idle_mw + cpu_core_mw * busy_cores + gpu_busy_mw * gpu_busy + screen_mw * screen_on."""

    idle_mw: float = Field(ge=0)
    cpu_core_mw: float = Field(ge=0)
    gpu_busy_mw: float = Field(ge=0)
    screen_mw: float = Field(default=0.0, ge=0)


class TripType(enum.StrEnum):
    """Linux thermal trip types (trip_point_N_type)."""

    ACTIVE = "active"
    PASSIVE = "passive"  # step_wise throttles the zone's cooling devices past it
    HOT = "hot"
    CRITICAL = "critical"


class SensorType(enum.StrEnum):
    """The thermal HAL's sensor types (android.os.Temperature TYPE_*), as `dumpsys thermalservice`
    prints them (mType=N)."""

    UNKNOWN = "unknown"
    CPU = "cpu"
    GPU = "gpu"
    BATTERY = "battery"
    SKIN = "skin"
    USB_PORT = "usb_port"
    POWER_AMPLIFIER = "power_amplifier"
    NPU = "npu"

    @property
    def hal_type(self) -> int:
        return _HAL_SENSOR_TYPES[self]


_HAL_SENSOR_TYPES = {
    SensorType.UNKNOWN: -1,
    SensorType.CPU: 0,
    SensorType.GPU: 1,
    SensorType.BATTERY: 2,
    SensorType.SKIN: 3,
    SensorType.USB_PORT: 4,
    SensorType.POWER_AMPLIFIER: 5,
    SensorType.NPU: 9,
}


class Cooled(enum.StrEnum):
    """What a zone's passive trips throttle: every cpufreq policy, or the GPU's devfreq."""

    CPU = "cpu"
    GPU = "gpu"


class TripSpec(_Frozen):
    temp_c: float = Field(gt=-40, lt=200)
    type: TripType = TripType.PASSIVE
    hyst_c: float = Field(default=2.0, ge=0, le=20)


# IThermalService throttling levels above NONE, in order (the thermal HAL's hot thresholds).
HAL_STATUS_NAMES = ("LIGHT", "MODERATE", "SEVERE", "CRITICAL", "EMERGENCY", "SHUTDOWN")


class ZoneSpec(_Frozen):
    """One thermal_zoneN. Every zone follows the one modelled die temperature T:
    zone temp = ambient + gain * (T - ambient) (the skin and the battery run cooler than the die)."""

    type: str = Field(min_length=1)
    sensor: SensorType = SensorType.UNKNOWN
    gain: float = Field(default=1.0, gt=0, le=2)
    trips: tuple[TripSpec, ...] = ()
    cools: tuple[Cooled, ...] = ()
    # The thermal HAL's hot throttling thresholds LIGHT..SHUTDOWN (up to 6, ascending); the zone's
    # status in `dumpsys thermalservice` is how many it exceeds. Thermal Status = max over SKIN zones.
    status_c: tuple[float, ...] = Field(default=(), max_length=6)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, v: Any) -> Any:
        return {"type": v} if isinstance(v, str) else v

    @field_validator("trips")
    @classmethod
    def _trips_in_order(cls, v: tuple[TripSpec, ...]) -> tuple[TripSpec, ...]:
        temps = [t.temp_c for t in v]
        if temps != sorted(temps) or len(set(temps)) != len(temps):
            raise ValueError(f"trip points must rise strictly in temperature, got {temps}")
        return v

    @field_validator("status_c")
    @classmethod
    def _status_in_order(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if list(v) != sorted(v) or len(set(v)) != len(v):
            raise ValueError(f"thresholds must rise strictly ({', '.join(HAL_STATUS_NAMES)}), got {list(v)}")
        return v


DEFAULT_ZONES = ("cpu-0-0-usr", "gpuss-0-usr", "battery", "skin-therm")


class ThermalSpec(_Frozen):
    """First-order model: dT/dt = (P * r_c_per_w - (T - ambient_c)) / (r_c_per_w * c_j_per_c)."""

    r_c_per_w: float = Field(gt=0)
    c_j_per_c: float = Field(gt=0)
    ambient_c: float = 25.0
    zones: tuple[ZoneSpec, ...] = tuple(ZoneSpec(type=z) for z in DEFAULT_ZONES)
    # The thermal core re-evaluates passive trips this often (step_wise moves one step per poll).
    polling_ms: int = Field(default=250, ge=50, le=10_000)


class ClusterSpec(_Frozen):
    """CPUs sharing one cpufreq policy (policyN, N = its first CPU)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    cpus: int = Field(ge=1, le=16)
    freqs_khz: tuple[int, ...] = Field(min_length=1)
    # Linux cpu_capacity of one of its CPUs at its top clock (1024 = the fastest core of the SoC).
    capacity: int = Field(default=1024, ge=1, le=1024)

    @field_validator("freqs_khz")
    @classmethod
    def _sorted(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        return _ascending(v)


class CpuSpec(_Frozen):
    clusters: tuple[ClusterSpec, ...] = Field(min_length=1, max_length=8)
    governor: str = "schedutil"
    governors: tuple[str, ...] = ()  # scaling_available_governors; default: governor + the stock four
    scaling_driver: str = "qcom-cpufreq-hw"
    transition_latency_ns: int = Field(default=1_000_000, ge=0)
    # Whether the kernel keeps cpufreq/devfreq limits as PM QoS requests (Linux 5.3+ cpufreq,
    # 5.5+ devfreq): a min above the max is then stored and the max wins. Older kernels (the
    # 4.19 and 3.10 of the rooted profiles here) refuse that write with EINVAL.
    limits_qos: bool = True
    # Host CPU cores the phone's CPU work may use at once. Each of its threads runs at most at
    # the speed of the phone's fastest online core (clock / top clock x capacity), so the CFS
    # quota of its cgroup is that speed x the threads that want a core, up to this budget.
    budget_cores: float = Field(default=2.0, gt=0, le=64)

    @property
    def available_governors(self) -> tuple[str, ...]:
        return _governor_list(self.governors, self.governor, "userspace")

    @property
    def ncpu(self) -> int:
        return sum(c.cpus for c in self.clusters)

    def first_cpus(self) -> tuple[int, ...]:
        """First CPU of each cluster: the N of its policyN."""
        firsts, n = [], 0
        for c in self.clusters:
            firsts.append(n)
            n += c.cpus
        return tuple(firsts)


class FixedPerformanceSpec(_Frozen):
    """Android 11+ `cmd power set-fixed-performance-mode-enabled true`: the power HAL holds every
    CPU policy (one frequency per cluster, from its table) and maybe the GPU at a fixed point: the
    device's hint table says where (Pixel 7's powerhint: every cluster's top clock, no GPU)."""

    cpu_khz: tuple[int, ...] = Field(min_length=1)
    gpu_hz: int | None = None


class HintTrigger(enum.StrEnum):
    """What makes the power HAL act (android.hardware.power Boost / Mode)."""

    INTERACTION = "interaction"  # Boost.INTERACTION: every touch and key (`input ...`)
    SCREEN_OFF = "screen_off"  # Mode.DISPLAY_INACTIVE / INTERACTIVE off: while the screen is off
    IDLE = "idle"  # Mode.DEVICE_IDLE: while the device is in deep Doze (`cmd deviceidle force-idle`)


class PowerHintSpec(_Frozen):
    """One hint of the power HAL (Pixel's libperfmgr powerhint.json, Qualcomm's perf HAL): while
    it is on, it writes each cpufreq policy's limits; when it ends, the nodes go back to their
    defaults (the table's ends), not to what root had written before."""

    trigger: HintTrigger  # (not `on`: YAML 1.1 reads that key as true)
    # How long a boost holds (interaction); a mode (screen_off) holds while its state lasts.
    duration_ms: int | None = Field(default=None, ge=1, le=60_000)
    cpu_min_khz: tuple[int, ...] | None = None  # one per cluster, from its table
    cpu_max_khz: tuple[int, ...] | None = None


class PowerHalSpec(_Frozen):
    hints: tuple[PowerHintSpec, ...] = ()


class CgroupSpec(_Frozen):
    # Tasks (threads) the phone may have at once: its pids cgroup's pids.max.
    pids_max: int = Field(default=1024, ge=16, le=1_000_000)


class Cited(_Frozen):
    """One published number and where it comes from (a datasheet, a vendor guide, a measurement)."""

    value: float = Field(gt=0)
    source: str = Field(min_length=8)


class ClusterThroughput(_Frozen):
    """Peak arithmetic of one core of a cluster at its top clock."""

    fp32_gflops_per_core: Cited
    fp16_gflops_per_core: Cited | None = None  # None: no fp16 arithmetic (Armv8.0 cores)


class GpuThroughput(_Frozen):
    fp32_gflops: Cited
    fp16_gflops: Cited | None = None


class ThroughputSpec(_Frozen):
    """The SoC's published throughput: what the simulator keeps in proportion (socspeed.py).
    `clusters` names every CPU cluster of `cpu.clusters`."""

    clusters: dict[str, ClusterThroughput] = Field(min_length=1)
    gpu: GpuThroughput | None = None
    memory_bandwidth_gbs: Cited


# Android releases farm knows: ro.build.version.release (major[.minor]) -> API levels it may carry.
ANDROID_SDK_LEVELS: dict[str, tuple[int, ...]] = {
    "4.4": (19, 20),
    "5.0": (21,),
    "5.1": (22,),
    "6.0": (23,),
    "7.0": (24,),
    "7.1": (25,),
    "8.0": (26,),
    "8.1": (27,),
    "9": (28,),
    "10": (29,),
    "11": (30,),
    "12": (31, 32),
    "13": (33,),
    "14": (34,),
    "15": (35,),
    "16": (36,),
}
FIXED_PERFORMANCE_MIN_SDK = 30
THERMALSERVICE_MIN_SDK = 29


def android_release_key(release: str) -> str | None:
    """'8.1.0' -> '8.1', '12' -> '12', '6.0.1' -> '6.0'; None when farm does not know the release."""
    parts = release.strip().split(".")
    if not all(p.isdigit() for p in parts):
        return None
    major, minor = parts[0], parts[1] if len(parts) > 1 else "0"
    for key in (f"{major}.{minor}", major):
        if key in ANDROID_SDK_LEVELS:
            return key
    return None


class Profile(_Frozen):
    name: str
    description: str = ""
    props: dict[str, str]
    rooted: bool = False
    # Magisk asks on screen the first time a uid wants root (its default request timeout is 10 s,
    # topjohnwu/Magisk #7769); the lab's operator grants shell after this long, and the grant is
    # kept. 0: shell was granted before (or the root solution does not ask).
    su_prompt_s: float = Field(default=0.0, ge=0, le=30)
    ram_mb: int = Field(gt=0)
    # The phone's storage: the size of its userdata partition (/data, /sdcard), scaled to the
    # host (userdata.py). 32 GB where a profile does not say: the smallest of today's phones.
    storage_mb: int = Field(default=32768, ge=32)
    gpu: GpuSpec | None = None
    opencl: OpenClSpec = OpenClSpec()
    battery: BatterySpec
    power: PowerSpec
    thermal: ThermalSpec
    cpu: CpuSpec
    fixed_performance: FixedPerformanceSpec | None = None
    power_hal: PowerHalSpec = PowerHalSpec()
    cgroups: CgroupSpec = CgroupSpec()
    # Published throughput of the CPU clusters, GPU and memory; None: the budgets above stand as
    # given (no proportions to keep).
    throughput: ThroughputSpec | None = None
    # The cable to the host (vphone.adb.link); `farm virtual up --link` overrides it.
    link: LinkKind = LinkKind.NONE
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
        if self.su_prompt_s > 0 and not self.rooted:
            raise ValueError("su_prompt_s needs a rooted profile")
        if self.opencl.library is not None and self.gpu is None:
            raise ValueError("opencl.library needs a gpu section")
        return self

    @property
    def has_opencl(self) -> bool:
        return self.opencl.library is not None

    @property
    def sdk(self) -> int:
        return int(self.props["ro.build.version.sdk"])

    @property
    def host_budget_cores(self) -> float:
        """Host CPU cores the whole phone may use at top clocks (CPU work + the PoCL "GPU")."""
        return self.cpu.budget_cores + (self.gpu.host_budget_cores if self.gpu is not None else 0.0)


Problem = tuple[tuple[str, ...], str]  # (key path, message)


def check_profile(profile: Profile) -> Problem | None:
    """Cross-field checks that need the whole profile: the first problem, or None. Kept apart
    from pydantic so that the message points at the offending key's own line."""
    release = profile.props["ro.build.version.release"]
    key = android_release_key(release)
    if key is None:
        known = ", ".join(ANDROID_SDK_LEVELS)
        return ("props", "ro.build.version.release"), f"unknown Android release {release!r} (known: {known})"
    sdk = profile.props["ro.build.version.sdk"]
    if not sdk.isdigit() or int(sdk) not in ANDROID_SDK_LEVELS[key]:
        levels = "/".join(str(s) for s in ANDROID_SDK_LEVELS[key])
        return ("props", "ro.build.version.sdk"), f"{sdk!r} is not the API level of Android {key} ({levels})"
    cpu = profile.cpu
    if cpu.governors and cpu.governor not in cpu.governors:
        return ("cpu", "governor"), f"governor {cpu.governor!r} is not in governors {list(cpu.governors)}"
    names = [c.name for c in cpu.clusters]
    if len(set(names)) != len(names):
        return ("cpu", "clusters"), f"cluster names must differ, got {names}"
    throughput = profile.throughput
    if throughput is not None and sorted(throughput.clusters) != sorted(names):
        return ("throughput", "clusters"), f"must name each CPU cluster once ({', '.join(names)})"
    if throughput is not None and throughput.gpu is not None and profile.gpu is None:
        return ("throughput", "gpu"), "a GPU's throughput needs a gpu section"
    gpu = profile.gpu
    if gpu is not None and gpu.governors and gpu.boot_governor not in gpu.governors:
        return ("gpu", "governor"), f"governor {gpu.boot_governor!r} is not in governors"
    hint_problem = _check_hints(profile)
    if hint_problem is not None:
        return hint_problem
    fixed = profile.fixed_performance
    if fixed is None:
        return None
    if profile.sdk < FIXED_PERFORMANCE_MIN_SDK:
        return ("fixed_performance",), f"needs Android 11 (API 30) or later, this profile is API {sdk}"
    clusters = profile.cpu.clusters
    if len(fixed.cpu_khz) != len(clusters):
        return ("fixed_performance", "cpu_khz"), f"needs one frequency per cluster ({len(clusters)})"
    for i, (khz, cluster) in enumerate(zip(fixed.cpu_khz, clusters, strict=True)):
        if khz not in cluster.freqs_khz:
            return (
                "fixed_performance",
                "cpu_khz",
                str(i),
            ), f"{khz} kHz is not in cluster {cluster.name}'s table"
    if fixed.gpu_hz is not None and (gpu is None or fixed.gpu_hz not in gpu.freqs_hz):
        return ("fixed_performance", "gpu_hz"), f"{fixed.gpu_hz} Hz is not in the GPU's freqs_hz"
    return None


def _check_hints(profile: Profile) -> Problem | None:
    clusters = profile.cpu.clusters
    for i, hint in enumerate(profile.power_hal.hints):
        at = ("power_hal", "hints", str(i))
        if (hint.trigger is HintTrigger.INTERACTION) != (hint.duration_ms is not None):
            return at, "an interaction boost needs duration_ms; a mode (screen_off, idle) has none"
        for key in ("cpu_min_khz", "cpu_max_khz"):
            values = getattr(hint, key)
            if values is None:
                continue
            if len(values) != len(clusters):
                return (*at, key), f"needs one frequency per cluster ({len(clusters)})"
            for khz, cluster in zip(values, clusters, strict=True):
                if khz not in cluster.freqs_khz:
                    return (*at, key), f"{khz} kHz is not in cluster {cluster.name}'s table"
    return None


# -- YAML with line numbers ----------------------------------------------------------------------


def _construct(node: yaml.Node, lines: dict[tuple[str, ...], int], path: tuple[str, ...]) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(scalar_value(key_node))
            lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, lines, (*path, key))
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(v, lines, (*path, str(i))) for i, v in enumerate(node.value)]
    return scalar_value(node)


def _line_of(lines: dict[tuple[str, ...], int], loc: tuple[str, ...]) -> int:
    while loc and loc not in lines:
        loc = loc[:-1]
    return lines.get(loc, 1)


def parse_profile(text: str, source: str) -> Profile:
    """Parse one profile's YAML text; `source` names the file in errors."""
    node = compose_profile(text, source)
    if node is None or not isinstance(node, yaml.MappingNode):
        raise ConfigError("a profile must be a mapping of keys", location=f"{source}:1")
    lines: dict[tuple[str, ...], int] = {}
    data = _construct(node, lines, ())
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(str(p) for p in err["loc"])
        # props keys contain dots; show them as one key.
        key = ".".join(loc) if loc else "(top)"
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(
            f"{key}: {msg}",
            location=f"{source}:{_line_of(lines, loc)}",
            hint="see vphone/src/vphone/profiles/",
        ) from None
    problem = check_profile(profile)
    if problem is not None:
        loc, msg = problem
        raise ConfigError(
            f"{'.'.join(loc)}: {msg}",
            location=f"{source}:{_line_of(lines, loc)}",
            hint="see vphone/src/vphone/profiles/",
        )
    return profile


def load_profile_file(path: Path) -> Profile:
    return parse_profile(read_profile_text(path), str(path))
