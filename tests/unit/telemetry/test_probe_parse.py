"""parse_probe on farm-probe documents of each GPU family, and the default sampler sources."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from farm.errors import ConfigError
from farm.telemetry.probe import CurrentSign, GpuFamily, ProbeOutputError, parse_probe
from farm.telemetry.sampler import Source, SourceFormat, default_sources, sampler_argv

PSY = "/sys/class/power_supply/battery"


def node(path: str, value: str | None, error: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "path": path,
        "present": error != "ENOENT",
        "readable": value is not None,
        "error": error,
        "value": value,
        **extra,
    }


def zone(
    n: int, kind: str, value: str | None, error: str | None = None, unit: str | None = "mC"
) -> dict[str, Any]:
    return node(
        f"/sys/class/thermal/thermal_zone{n}/temp",
        value,
        error,
        zone=f"thermal_zone{n}",
        type=kind,
        unit_hint=unit if value is not None else None,
    )


def doc(
    *,
    gpu: dict[str, Any],
    current: list[int],
    unit: str,
    sign: str | None,
    thermal: list[dict[str, Any]],
    status: str = "Discharging",
    adbd_root: bool = False,
    su: bool | None = None,
    charging: list[dict[str, Any]] | None = None,
) -> str:
    return json.dumps(
        {
            "probe_version": 1,
            "t_ns": 123,
            "props": {"ro.product.model": "Phone X", "ro.board.platform": "kalama"},
            "abi": "arm64-v8a",
            "kernel_machine": "aarch64",
            "kernel_release": "5.15",
            "root": {
                "uid": 0 if adbd_root else 2000,
                "adbd_root": adbd_root,
                "su_path": "/system/xbin/su" if su is not None else None,
                "su_works": su,
            },
            "opencl": {"libraries": ["/vendor/lib64/libOpenCL.so"], "found": True},
            "battery": {
                "dir": PSY,
                "status": status,
                "current_now": node(
                    f"{PSY}/current_now", str(current[0]), samples=current, unit_hint=unit, sign_hint=sign
                ),
                "voltage_now": node(f"{PSY}/voltage_now", "4012000", unit_hint="uV"),
                "current_avg": node(f"{PSY}/current_avg", None, "ENOENT"),
                "charge_counter": node(f"{PSY}/charge_counter", "3100000"),
                "capacity": node(f"{PSY}/capacity", "80"),
                "temp": node(f"{PSY}/temp", "285"),
            },
            "charging_control": charging or [],
            "gpu": gpu,
            "thermal": thermal,
            "cpu": {
                "online": "0-7",
                "policies": [
                    {
                        "policy": "policy0",
                        "dir": "/sys/devices/system/cpu/cpufreq/policy0",
                        "related_cpus": "0 1 2 3",
                        "scaling_governor": "walt",
                        "scaling_cur_freq": "1228800",
                        "scaling_min_freq": "307200",
                        "scaling_max_freq": "2016000",
                        "cpuinfo_max_freq": "2016000",
                    }
                ],
            },
            "memory": {"total_kb": 7_900_000},
            "elapsed_ms": 180,
        }
    )


KGSL = "/sys/class/kgsl/kgsl-3d0"
ADRENO_GPU = {
    "family": "adreno",
    "model": "Adreno740v2",
    "busy": node(f"{KGSL}/gpubusy", "  12345  1000000", format="kgsl"),
    "freq": node(f"{KGSL}/devfreq/cur_freq", "680000000", unit="Hz"),
    "candidates": [
        node(f"{KGSL}/gpubusy", "  12345  1000000", role="busy"),
        node(f"{KGSL}/devfreq/cur_freq", "680000000", role="freq"),
    ],
}
MALI_DEV = "/sys/class/misc/mali0/device"
MALI_GPU = {
    "family": "mali",
    "model": "Mali-G710",
    "busy": node(f"{MALI_DEV}/utilization", "37", format="int"),
    "freq": node("/sys/class/devfreq/1c500000.mali/cur_freq", "572000000", unit="Hz"),
    "candidates": [],
}
MTK_GPU = {
    "family": "mediatek",
    "model": None,
    "busy": node("/sys/kernel/gpu/gpu_busy", "12 %", format="pct"),
    "freq": node("/sys/kernel/gpu/gpu_clock", "886000", unit="kHz"),
    "candidates": [],
}
DENIED_GPU = {
    "family": "adreno",
    "model": None,
    "busy": node(f"{KGSL}/gpubusy", None, "EACCES", format="kgsl"),
    "freq": None,
    "candidates": [node(f"{KGSL}/gpubusy", None, "EACCES", role="busy")],
}
THERMAL = [
    zone(0, "cpu-0-0-usr", "48200"),
    zone(1, "cpu-1-0-usr", "51900"),
    zone(2, "gpuss-0-usr", "45100"),
    zone(3, "battery", "302", unit="dC"),
    zone(4, "skin-therm", "33000"),
    zone(5, "pm8550-tz", None, "EINVAL"),
]


def test_adreno_kgsl_negative_ua() -> None:
    caps = parse_probe(
        doc(
            gpu=ADRENO_GPU,
            current=[-412000, -398000],
            unit="uA",
            sign="negative_discharging",
            thermal=THERMAL,
        )
    )
    assert caps.gpu.family is GpuFamily.ADRENO
    assert caps.gpu.busy is not None and caps.gpu.busy.path.endswith("/gpubusy")
    assert (caps.gpu.busy_format, caps.gpu.freq_unit) == ("kgsl", "Hz")
    assert caps.battery.current_sign is CurrentSign.NEGATIVE_DISCHARGING
    assert caps.battery.current_sign.discharge_sign == -1
    assert caps.battery.current_samples == (-412000, -398000)
    assert caps.prop("ro.product.model") == "Phone X"
    assert caps.abi == "arm64-v8a" and caps.has_opencl and caps.mem_total_kb == 7_900_000
    assert caps.cpu_policies[0].governor == "walt" and caps.cpu_policies[0].max_khz == 2016000
    by_type = {z.type: z for z in caps.thermal}
    assert by_type["battery"].celsius == pytest.approx(30.2)
    assert by_type["cpu-1-0-usr"].celsius == pytest.approx(51.9)
    assert not by_type["pm8550-tz"].node.readable and by_type["pm8550-tz"].node.error == "EINVAL"

    sources = {s.name: s for s in default_sources(caps)}
    assert sources["gpu.busy"].format is SourceFormat.KGSL and sources["gpu.busy"].unit == "fraction"
    assert sources["gpu.freq"].unit == "Hz"
    assert sources["battery.current_now"].discharge_sign == -1
    # the gauge and thermal sensors are read at a slow rate, the GPU every tick
    assert sources["battery.current_now"].rate_hz == 20.0 and sources["thermal.battery"].rate_hz == 20.0
    assert sources["gpu.busy"].rate_hz is None
    assert sources["battery.voltage_now"].unit == "uV"
    # each policy's current clock, every tick, in the node's kHz
    clock = sources["cpu.freq.policy0"]
    assert (clock.path, clock.unit, clock.rate_hz) == (
        "/sys/devices/system/cpu/cpufreq/policy0/scaling_cur_freq",
        "kHz",
        None,
    )
    # GPU zone, the hottest CPU zone (not the cooler one), battery and skin; never the EINVAL one
    assert {n for n in sources if n.startswith("thermal.")} == {
        "thermal.gpuss-0-usr",
        "thermal.cpu-1-0-usr",
        "thermal.battery",
        "thermal.skin-therm",
    }


def test_nexus6p_positive_when_discharging() -> None:
    caps = parse_probe(
        doc(gpu=ADRENO_GPU, current=[350000], unit="uA", sign="positive_discharging", thermal=[])
    )
    assert caps.battery.current_sign.discharge_sign == 1
    assert default_sources(caps)[0].discharge_sign == 1


def test_mali_utilization_int_and_ma_current() -> None:
    caps = parse_probe(
        doc(gpu=MALI_GPU, current=[-420, -415], unit="mA", sign="negative_discharging", thermal=[])
    )
    assert caps.gpu.family is GpuFamily.MALI
    assert (caps.gpu.busy_format, caps.gpu.freq_unit) == ("int", "Hz")
    assert caps.battery.current_unit == "mA"
    sources = {s.name: s for s in default_sources(caps)}
    assert sources["gpu.busy"].format is SourceFormat.INT and sources["gpu.busy"].unit == "percent"
    assert sources["battery.current_now"].unit == "mA"


def test_mediatek_pct_and_khz() -> None:
    caps = parse_probe(
        doc(gpu=MTK_GPU, current=[-500000], unit="uA", sign="negative_discharging", thermal=[])
    )
    assert caps.gpu.family is GpuFamily.MEDIATEK
    sources = {s.name: s for s in default_sources(caps)}
    assert sources["gpu.busy"].format is SourceFormat.PCT
    assert sources["gpu.freq"].unit == "kHz"


def test_unreadable_gpu_busy_is_kept_but_not_sampled() -> None:
    caps = parse_probe(doc(gpu=DENIED_GPU, current=[0], unit="uA", sign=None, thermal=[], status="Full"))
    assert caps.gpu.busy is not None and caps.gpu.busy.present and not caps.gpu.busy.readable
    assert caps.gpu.busy.error == "EACCES"
    assert (
        caps.battery.current_sign is CurrentSign.UNKNOWN and caps.battery.current_sign.discharge_sign is None
    )
    names = [s.name for s in default_sources(caps)]
    assert "gpu.busy" not in names and "gpu.freq" not in names


def test_a_policy_whose_clock_the_probe_could_not_read_is_not_sampled() -> None:
    text = doc(gpu=ADRENO_GPU, current=[1], unit="uA", sign=None, thermal=[])
    probe = json.loads(text)
    readable = dict(probe["cpu"]["policies"][0])
    unreadable = {
        **readable,
        "policy": "policy4",
        "dir": readable["dir"][:-1] + "4",
        "scaling_cur_freq": None,
    }
    probe["cpu"]["policies"] = [readable, unreadable]
    names = [s.name for s in default_sources(parse_probe(json.dumps(probe)))]
    assert "cpu.freq.policy0" in names and "cpu.freq.policy4" not in names


def test_charging_switch_needs_write_access_or_root() -> None:
    suspend = node(f"{PSY}/input_suspend", "0", writable=False, enable_value="0", disable_value="1")
    no_root = parse_probe(
        doc(gpu=ADRENO_GPU, current=[1], unit="uA", sign=None, thermal=[], charging=[suspend])
    )
    assert no_root.charging[0].node.present and no_root.charging_switch() is None
    via_su = parse_probe(
        doc(gpu=ADRENO_GPU, current=[1], unit="uA", sign=None, thermal=[], charging=[suspend], su=True)
    )
    assert via_su.root.available and via_su.charging_switch() == via_su.charging[0]
    assert via_su.charging[0].disable_value == "1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not JSON"),
        ("sh: farm-probe: not found", "not JSON.*not found"),
        ("[1, 2]", "not a JSON object"),
        ('{"probe_version": 7}', "version 7 is not supported"),
        ('{"probe_version": 1}', "malformed"),
        (
            '{"probe_version": 1, "root": {"uid": 0, "adbd_root": true}, "gpu": {"family": "vivante"}}',
            "malformed",
        ),
    ],
)
def test_bad_probe_output_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(ProbeOutputError, match=message):
        parse_probe(text)


def test_sampler_argv_shape_and_validation() -> None:
    sources = [Source("gpu.busy", f"{KGSL}/gpubusy", SourceFormat.KGSL), Source("t", "/sys/a:b/temp")]
    argv = sampler_argv(
        "/data/local/tmp/farm/bin/farm-sampler", sources, 100, "/x/trace.bin", 42, linger_s=1.5
    )
    assert argv == [
        "/data/local/tmp/farm/bin/farm-sampler",
        "--out=/x/trace.bin",
        "--rate-hz=100",
        f"--source=gpu.busy={KGSL}/gpubusy:kgsl",
        "--source=t=/sys/a:b/temp:int",  # the format always follows, so ':' in paths is safe
        "--watch-pid=42",
        "--linger-s=1.5",
    ]
    slow = [Source("bat", "/b", rate_hz=10), Source("fast", "/f", rate_hz=500)]
    assert sampler_argv("s", slow, 100, "/x")[3:] == ["--source=bat=/b:int@10", "--source=fast=/f:int"]
    with pytest.raises(ConfigError, match="must be > 0"):
        sampler_argv("s", [Source("bat", "/b", rate_hz=0)], 100, "/x")
    with pytest.raises(ConfigError, match=r"outside 1\.\.1000"):
        sampler_argv("s", sources, 2000, "/x")
    with pytest.raises(ConfigError, match="given twice"):
        sampler_argv("s", [sources[0], sources[0]], 10, "/x")
    with pytest.raises(ConfigError, match="must be absolute"):
        sampler_argv("s", [Source("a", "relative/path")], 10, "/x")
    with pytest.raises(ConfigError, match="name"):
        sampler_argv("s", [Source("a b", "/p")], 10, "/x")
    with pytest.raises(ConfigError, match="watch_pid"):
        sampler_argv("s", sources, 10, "/x", linger_s=1)


# probe document section -> the Capabilities fields parsed from it
SECTION_FIELDS = {
    "props": ("props",),
    "abi": ("abi",),
    "root": ("root",),
    "opencl": ("opencl_libraries",),
    "battery": ("battery",),
    "charging_control": ("charging",),
    "gpu": ("gpu",),
    "thermal": ("thermal",),
    "cpu": ("cpu_online", "cpu_policies"),
    "memory": ("mem_total_kb",),
}
JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(
        ["props", "abi", "root", "opencl", "battery", "charging_control", "gpu", "thermal", "cpu", "memory"]
    ),
    junk=JUNK,
)
def test_a_damaged_section_gives_capabilities_or_one_clear_error(key: str, junk: object) -> None:
    """Whatever a broken or future probe prints in one section, parse_probe never crashes."""
    good = json.loads(doc(gpu=ADRENO_GPU, current=[-1], unit="uA", sign=None, thermal=THERMAL))
    intact = parse_probe(json.dumps(good))
    good[key] = junk
    try:
        caps = parse_probe(json.dumps(good))
    except ProbeOutputError:
        return
    # what it accepted: the other sections exactly as in the intact document ...
    for section, fields in SECTION_FIELDS.items():
        if section != key:
            assert [getattr(caps, f) for f in fields] == [getattr(intact, f) for f in fields], section
    # ... and sources the sampler's own checks accept
    sources = default_sources(caps)
    if sources:
        assert sampler_argv("farm-sampler", sources, 20.0, "/data/local/tmp/t.bin")[0] == "farm-sampler"


def test_a_battery_held_not_charging_calibrates_nothing() -> None:
    """A lab phone on USB held below full (Battery Defender, "Protect battery") reads a few mA of
    noise of either sign with status Not charging: neither its unit nor its sign may be taken
    from that (issue 28, audit finding 5); only a Discharging probe gives conventions."""
    from farm.engine.collect import calibration_of

    held = parse_probe(
        doc(
            gpu=ADRENO_GPU,
            current=[3000],
            unit="mA",
            sign="positive_discharging",
            thermal=[],
            status="Not charging",
        )
    )
    assert calibration_of(held) is None
    full = parse_probe(
        doc(
            gpu=ADRENO_GPU, current=[-2000], unit="mA", sign="negative_discharging", thermal=[], status="Full"
        )
    )
    assert calibration_of(full) is None
    discharging = parse_probe(
        doc(gpu=ADRENO_GPU, current=[-412000], unit="uA", sign="negative_discharging", thermal=[])
    )
    calibration = calibration_of(discharging)
    assert (
        calibration is not None
        and calibration.discharge_sign == -1
        and calibration.current_ua_per_unit == 1.0
    )
