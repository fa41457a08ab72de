"""`farm doctor`'s decisions (pure): for one phone, every capability farm relies on, judged ok /
degraded / missing from what was read on it, with the evidence, what farm loses without it and
what to do.

Inputs are typed probe results: farm-probe's Capabilities, a few facts read by shell
(PhoneFacts: SELinux mode, page size, screen controls) and, where charging could be switched,
a short discharge trial (farm.analysis.discharge judges it as it judges a run). The I/O that
gathers them is farm.doctor.probe. Checks whose facts other parts of farm own (the OpenCL
loader's candidate libraries) are tables here, so that they grow by a row.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass

from farm.analysis.discharge import DischargeProof
from farm.telemetry.probe import Capabilities


class Status(enum.StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    MISSING = "missing"


class Check(enum.StrEnum):
    OPENCL = "opencl"
    CHARGING_SWITCH = "charging_switch"
    DISCHARGE = "discharge"
    FUEL_GAUGE = "fuel_gauge"
    THERMAL = "thermal"
    CLOCK_CONTROL = "clock_control"
    SCREEN_CONTROL = "screen_control"
    ROOT = "root"
    SELINUX = "selinux"
    PAGE_SIZE = "page_size"
    ANDROID_VERSION = "android_version"


@dataclass(frozen=True)
class Finding:
    check: Check
    status: Status
    evidence: str  # what was read on the phone
    lost: tuple[str, ...] = ()  # metrics or controls farm loses (none when ok)
    todo: str | None = None  # what to do about it

    def to_json(self) -> dict[str, object]:
        return {
            "check": str(self.check),
            "status": str(self.status),
            "evidence": self.evidence,
            "lost": list(self.lost),
            "todo": self.todo,
        }


@dataclass(frozen=True)
class PhoneFacts:
    """What the shell says beyond farm-probe (None: could not be read)."""

    selinux: str | None  # getenforce: Enforcing | Permissive | Disabled
    page_size_bytes: int | None
    tools: frozenset[str]  # of SCREEN_TOOLS, those the phone has
    wakefulness: str | None  # dumpsys power mWakefulness: Awake | Asleep | Dozing | Dreaming


@dataclass(frozen=True)
class GaugeTrial:
    """A short discharge trial: charging switched off for a few seconds, the battery read."""

    proof: DischargeProof
    update_interval_s: float | None  # between the current's distinct readings
    samples: int


# The libraries a vendor ships OpenCL as (MNN's and TFLite's candidate lists); a note where the
# library needs more than dlsym (farm's loader: the "android" work of issue 28).
OPENCL_LIBRARY_NOTES: dict[str, str] = {
    "libOpenCL.so": "the Khronos name",
    "libOpenCL-pixel.so": "Pixel (Tensor): entry points through enableOpenCL + loadOpenCLPointer",
    "libOpenCL-car.so": "Android Automotive builds",
    "libGLES_mali.so": "Mali: OpenCL inside the GLES driver",
    "libmali.so": "Mali (some MediaTek builds)",
}
GPU_METRICS = ("GPU backends (gemm/conv/cnn --backend=gpu)", "gpuload background load")
ENERGY_METRICS = (
    "power_mean_mw",
    "energy_total_mj",
    "energy_net_mj",
    "energy_per_inference_mj",
    "power_idle_mw",
)
SCREEN_TOOLS = ("svc", "input", "settings")
CMD_POWER_SDK = 30


@dataclass(frozen=True)
class AndroidQuirk:
    """What an Android release range changes for farm (sdk_min <= SDK <= sdk_max)."""

    sdk_min: int
    sdk_max: int
    what: str
    lost: str | None  # what farm loses there (None: farm works around it)

    def applies(self, sdk: int) -> bool:
        return self.sdk_min <= sdk <= self.sdk_max


ANDROID_QUIRKS = (
    # ThermalManagerService's dump ("Thermal Status:") from Android 10
    AndroidQuirk(0, 28, "no thermalservice", "thermal status in throttle samples"),
    # PowerManagerShellCommand set-fixed-performance-mode-enabled from Android 11
    AndroidQuirk(0, CMD_POWER_SDK - 1, "no `cmd power`", "fixed performance mode"),
    # toybox 0.8.5-0.8.10 (unbuffered stdout): printf writes "%s" and "\n" separately
    AndroidQuirk(31, 34, "toybox printf splits writes (farm writes nodes with echo)", None),
)
PAGE_16K = 16384


def _opencl(caps: Capabilities) -> Finding:
    """OpenCL is proven by a program listing devices through the library it loaded; a library
    file alone (no program built for the phone's ABI) is only evidence, said as such."""
    libraries = caps.opencl_libraries
    notes = [
        f"{lib} ({OPENCL_LIBRARY_NOTES[name]})"
        if (name := lib.rsplit("/", 1)[-1]) in OPENCL_LIBRARY_NOTES
        else lib
        for lib in libraries
    ]
    devices = caps.opencl_devices
    if devices:
        listed = ", ".join(
            f"{d.name} [{d.type}{', fp16' if d.fp16 else ''}] via {d.library or 'the loader'}"
            for d in devices
        )
        return Finding(Check.OPENCL, Status.OK, "devices: " + listed)
    if devices is not None:  # a program looked, through every candidate library, and found none
        found = f"libraries present: {', '.join(notes)}" if notes else "no vendor OpenCL library"
        return Finding(
            Check.OPENCL,
            Status.MISSING,
            f"no OpenCL device listed ({found})",
            GPU_METRICS,
            "GPU cells cannot run on this phone; use --backend=cpu cells, "
            "or a phone with a vendor OpenCL driver",
        )
    if not libraries:
        return Finding(
            Check.OPENCL,
            Status.MISSING,
            "no vendor OpenCL library found in /vendor or /system",
            GPU_METRICS,
            "GPU cells cannot run on this phone; use --backend=cpu cells, "
            "or a phone with a vendor OpenCL driver",
        )
    return Finding(
        Check.OPENCL,
        Status.DEGRADED,
        "library: " + ", ".join(notes) + " (not proven: no program built for this ABI listed devices)",
        (),
        "make kernels for the phone's ABI so farm can list its OpenCL devices",
    )


def _charging_switch(caps: Capabilities) -> Finding:
    present = [c for c in caps.charging if c.node.present]
    switch = caps.charging_switch()
    if switch is not None:
        how = "writable by shell" if switch.writable else "writable through root"
        return Finding(Check.CHARGING_SWITCH, Status.OK, f"{switch.node.path} ({how})")
    if present:
        return Finding(
            Check.CHARGING_SWITCH,
            Status.MISSING,
            f"{present[0].node.path} present but not writable (no root)",
            ENERGY_METRICS,
            "root the phone (adb root on a userdebug build, or Magisk with shell granted) "
            "so farm can stop charging",
        )
    return Finding(
        Check.CHARGING_SWITCH,
        Status.MISSING,
        "none of farm's charging switches is present",
        ENERGY_METRICS,
        "energy needs a phone whose charger farm can stop; measure power externally, "
        "or add this vendor's switch",
    )


def _discharge(caps: Capabilities, trial: GaugeTrial | None) -> Finding:
    if caps.charging_switch() is None:
        return Finding(
            Check.DISCHARGE, Status.MISSING, "no usable charging switch: not tried", ENERGY_METRICS
        )
    if trial is None:
        return Finding(
            Check.DISCHARGE,
            Status.DEGRADED,
            "not tried (--no-discharge)",
            todo="run farm doctor without --no-discharge; every run still proves its own discharge",
        )
    proof = trial.proof
    if proof.proven:
        return Finding(Check.DISCHARGE, Status.OK, f"battery powered the phone: {proof.power_mw:.0f} mW")
    return Finding(
        Check.DISCHARGE,
        Status.MISSING,
        proof.reason or "discharge not proven",
        ENERGY_METRICS,
        "this switch does not make the battery feed the phone (battery idle or undone): runs are stored "
        "with energy_valid 0; use a phone or kernel with an input-suspend switch",
    )


def _fuel_gauge(caps: Capabilities, trial: GaugeTrial | None) -> Finding:
    battery = caps.battery
    if battery.current is None or not battery.current.usable:
        return Finding(
            Check.FUEL_GAUGE,
            Status.MISSING,
            "battery current_now not readable",
            ENERGY_METRICS,
            "no on-phone power; measure externally",
        )
    if trial is not None and trial.proof.calibration is not None:
        cal = trial.proof.calibration
        unit = "mA" if cal.current_ua_per_unit == 1000.0 else "uA"
        sign = "negative" if cal.discharge_sign < 0 else "positive"
        every = f"{trial.update_interval_s:.1f} s" if trial.update_interval_s is not None else "unknown"
        evidence = (
            f"current_now in {unit}, {sign} while discharging, updates every {every} "
            f"({trial.samples} samples)"
        )
        return Finding(Check.FUEL_GAUGE, Status.OK, evidence)
    return Finding(
        Check.FUEL_GAUGE,
        Status.DEGRADED,
        f"current_now readable; status {battery.status or 'unknown'} at probe time: unit and sign not "
        "calibrated from discharging samples",
        todo="each run calibrates from its own discharging samples; none before a discharge is proven",
    )


# dumpsys thermalservice (ThermalManagerService, its HAL temperatures) exists from Android 10.
THERMALSERVICE_MIN_SDK = 29


def _thermal(caps: Capabilities, sdk: int | None = None) -> Finding:
    readable = [z for z in caps.thermal if z.node.usable]
    refused = [z for z in caps.thermal if z.node.present and not z.node.readable]
    battery_temp = caps.battery.temp is not None and caps.battery.temp.usable
    if readable:
        evidence = f"{len(readable)} thermal zones readable" + (
            f", {len(refused)} refused" if refused else ""
        )
        return Finding(Check.THERMAL, Status.OK, evidence)
    why = f"{len(refused)} zones refused ({refused[0].node.error})" if refused else "no thermal zones"
    if sdk is not None and sdk >= THERMALSERVICE_MIN_SDK:
        return Finding(
            Check.THERMAL,
            Status.DEGRADED,
            f"{why}; the thermal HAL's temperatures through dumpsys thermalservice",
            ("thermal zone traces at the sampler's rate (the HAL's trace is every 5 s)",),
            "the cooldown gate and the temperature trace use the HAL's readings (env.json sensors); "
            "a rooted phone or a vendor policy granting shell sysfs_thermal reads zones",
        )
    if battery_temp:
        return Finding(
            Check.THERMAL,
            Status.DEGRADED,
            f"{why}; battery thermistor readable",
            ("cooldown gate on the SoC (it uses the battery, which lags by minutes)", "thermal zone traces"),
            "expect runs to start warmer; a rooted phone or a vendor policy granting shell "
            "sysfs_thermal reads zones",
        )
    return Finding(Check.THERMAL, Status.MISSING, why, ("cooldown gate", "thermal traces"))


def _clock_control(caps: Capabilities, sdk: int | None) -> Finding:
    policies = len(caps.cpu_policies)
    if caps.root.available and policies:
        return Finding(Check.CLOCK_CONTROL, Status.OK, f"root: pins through {policies} cpufreq policies")
    if sdk is not None and sdk >= CMD_POWER_SDK:
        return Finding(
            Check.CLOCK_CONTROL,
            Status.DEGRADED,
            "no root: only `cmd power set-fixed-performance-mode-enabled` (where the power HAL has the mode)",
            ("clock pins per cluster", "GPU level pins"),
            "root the phone for clock-controlled cells",
        )
    return Finding(
        Check.CLOCK_CONTROL,
        Status.MISSING,
        "no root and no fixed performance mode",
        ("clock-controlled cells",),
    )


def _screen_control(facts: PhoneFacts) -> Finding:
    missing = [t for t in SCREEN_TOOLS if t not in facts.tools]
    state = f"; screen {facts.wakefulness}" if facts.wakefulness else ""
    if not missing:
        return Finding(Check.SCREEN_CONTROL, Status.OK, f"svc, input and settings present{state}")
    return Finding(
        Check.SCREEN_CONTROL,
        Status.DEGRADED,
        f"missing {', '.join(missing)}{state}",
        ("the screen held on through runs (idle baseline and runs may differ in screen state)",),
        "keep the screen on by hand (developer option Stay awake) before a sweep",
    )


def _root(caps: Capabilities) -> Finding:
    root = caps.root
    if root.adbd_root:
        return Finding(Check.ROOT, Status.OK, "adbd runs as root")
    if root.su_works:
        return Finding(Check.ROOT, Status.OK, f"su works ({root.su_path})")
    if root.su_path:
        return Finding(
            Check.ROOT,
            Status.DEGRADED,
            f"{root.su_path} present but `su -c id` did not answer as root",
            ("charging switch", "clock pins"),
            "grant shell in the root manager (Magisk asks on the phone's screen the first time)",
        )
    return Finding(Check.ROOT, Status.MISSING, "no su, adbd not root", ("charging switch", "clock pins"))


def _selinux(facts: PhoneFacts) -> Finding:
    if facts.selinux is None:
        return Finding(Check.SELINUX, Status.DEGRADED, "getenforce gave no answer")
    if facts.selinux == "Enforcing":
        return Finding(
            Check.SELINUX, Status.OK, "Enforcing: shell reads only what policy grants (see thermal)"
        )
    return Finding(Check.SELINUX, Status.OK, f"{facts.selinux}: shell reads are not restricted by policy")


def _page_size(facts: PhoneFacts) -> Finding:
    size = facts.page_size_bytes
    if size is None:
        return Finding(Check.PAGE_SIZE, Status.DEGRADED, "getconf PAGESIZE gave no answer")
    if size >= PAGE_16K:
        return Finding(
            Check.PAGE_SIZE,
            Status.OK,
            f"{size} bytes: farm's agents are 64 KB aligned; external programs must be 16 KB aligned",
        )
    return Finding(Check.PAGE_SIZE, Status.OK, f"{size} bytes")


def _android(sdk: int | None, release: str | None) -> Finding:
    if sdk is None:
        return Finding(Check.ANDROID_VERSION, Status.DEGRADED, "ro.build.version.sdk unreadable")
    quirks = [q for q in ANDROID_QUIRKS if q.applies(sdk)]
    evidence = f"Android {release or '?'} (SDK {sdk})"
    if quirks:
        evidence += ": " + "; ".join(q.what for q in quirks)
    lost = tuple(q.lost for q in quirks if q.lost)
    return Finding(
        Check.ANDROID_VERSION,
        Status.DEGRADED if lost else Status.OK,
        evidence,
        lost,
        "a newer Android release has these services" if lost else None,
    )


def diagnose(caps: Capabilities, facts: PhoneFacts, trial: GaugeTrial | None) -> tuple[Finding, ...]:
    """Every check for one phone, in Check order."""
    sdk_text = caps.prop("ro.build.version.sdk")
    sdk = int(sdk_text) if sdk_text and sdk_text.isdigit() else None
    return (
        _opencl(caps),
        _charging_switch(caps),
        _discharge(caps, trial),
        _fuel_gauge(caps, trial),
        _thermal(caps, sdk),
        _clock_control(caps, sdk),
        _screen_control(facts),
        _root(caps),
        _selinux(facts),
        _page_size(facts),
        _android(sdk, caps.prop("ro.build.version.release")),
    )


def parse_facts(text: str) -> PhoneFacts:
    """The doctor's shell script's `key=value` lines (farm.doctor.probe.FACTS_SCRIPT)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in values:
            values[key.strip()] = value.strip()
    page = values.get("pagesize", "")
    tools = frozenset(t for t in SCREEN_TOOLS if values.get(f"tool.{t}") == "1")
    return PhoneFacts(
        selinux=values.get("selinux") or None,
        page_size_bytes=int(page) if page.isdigit() else None,
        tools=tools,
        wakefulness=values.get("wakefulness") or None,
    )


def gauge_interval_s(times_s: list[float], currents: list[float]) -> float | None:
    """The median time between the current's distinct readings (None: fewer than two changes)."""
    changes = [t for i, t in enumerate(times_s) if i > 0 and currents[i] != currents[i - 1]]
    gaps = sorted(b - a for a, b in itertools.pairwise(changes))
    return gaps[len(gaps) // 2] if gaps else None
