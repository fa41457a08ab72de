"""The profiles' device facts against the spec sources checked with the search tool (issue 28,
item 3): RAM and battery are configurations the named device was sold with, every RAM and
storage figure carries its source or says "unverified" right there, cpufreq tables and GPU OPPs
are the SoC's (its device tree's power_profile.xml, its kernel's GPU power levels), and identity
props are what a real device of the model reports.

The table is the independent truth: each row names where it was read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from vphone.profile import HintTrigger, OpenClLoader, Profile, load_profile_file
from vphone.profiles import load_profile

PROFILES = sorted((Path(__file__).resolve().parents[2] / "src" / "vphone" / "profiles").glob("*.yaml"))

# ro.product.model -> (RAM configurations in MB, battery mAh, where read)
SOLD = {
    "moto g(30)": ((4096, 6144), 5000, "rpp.pe review-motorola-moto-g30 spec table"),
    "Nexus 6P": ((3072,), 3450, "techspot.com/review/1109-google-nexus-6p; betanews.com 2015-09-29"),
    "SM-G991U": ((8192,), 4000, "Geekbench SM-G991U via playfuldroid.com; newsbytesapp.com"),
    "SM-S911B": ((8192,), 3900, "gizchina.com FCC filing; helpmax.net"),
    "Pixel 7": ((8192,), 4355, "makeoverarena.com/google-pixel-7-2"),
    "IN2013": ((8192, 12288), 4300, "toptech.news after GSMArena; bgr.in"),
    "V2241A": ((12288,), 4810, "voonze.com Geekbench V2241A; livemint.com 2022-11-19"),
    "Mi 10": (
        (8192, 12288),
        4780,
        "chaptsand/android_device_xiaomi_umi power_profile.xml battery.capacity and README",
    ),
}


# ro.board.platform -> (cpufreq tables in kHz per cluster or None where no source lists them,
# GPU OPPs in Hz the source's table holds, where read). A profile may leave OPPs out (a subset of
# the GPU table); every frequency it lists must be one the SoC has.
def _khz(*clusters: str) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(f) for f in cluster.split()) for cluster in clusters)


def _mhz(text: str) -> frozenset[int]:
    return frozenset(round(float(f) * 1_000_000) for f in text.split())


SOC_CLOCKS: dict[str, tuple[tuple[tuple[int, ...], ...] | None, frozenset[int], str]] = {
    "kona": (
        _khz(
            "300000 403200 518400 614400 691200 787200 883200 979200 1075200 1171200 1248000 1344000"
            " 1420800 1516800 1612800 1708800 1804800",
            "710400 825600 940800 1056000 1171200 1286400 1382400 1478400 1574400 1670400 1766400"
            " 1862400 1958400 2054400 2150400 2246400 2342400 2419200",
            "844800 960000 1075200 1190400 1305600 1401600 1516800 1632000 1747200 1862400 1977600"
            " 2073600 2169600 2265600 2361600 2457600 2553600 2649600 2745600 2841600",
        ),
        _mhz("587 525 490 441.6 400 305"),
        "umi power_profile.xml cpu.core_speeds; kona-v2-gpu.dtsi speed bin 0",
    ),
    "bengal": (
        _khz(
            "300000 614400 864000 1017600 1305600 1420800 1612800 1804800",
            "300000 652800 902400 1056000 1401600 1536000 1804800 2016000",
        ),
        _mhz("980 950 900 820 745 600 465 320"),
        "caprip power_profile.xml cpu.core_speeds; caprip kernel bengal-gpu.dtsi, all speed bins",
    ),
    "msm8994": (
        _khz(
            "384000 460800 600000 672000 768000 864000 960000 1248000 1344000 1478400 1555200",
            "384000 480000 633600 768000 864000 960000 1248000 1344000 1440000 1536000 1632000"
            " 1728000 1824000 1958400",
        ),
        _mhz("600 510 450 390 305 180"),
        "angler power_profile.xml cpu.speeds; angler kernel msm8994-v2.dtsi qcom,gpu-pwrlevels",
    ),
    "lahaina": (
        _khz(
            "300000 403200 499200 595200 691200 806400 902400 998400 1094400 1209600 1305600 1401600"
            " 1497600 1612800 1708800 1804800",
            "710400 844800 960000 1075200 1209600 1324800 1440000 1555200 1670400 1766400 1881600"
            " 1996800 2112000 2227200 2342400 2419200",
            "844800 960000 1075200 1190400 1305600 1420800 1555200 1670400 1785600 1900800 2035200"
            " 2150400 2265600 2380800 2496000 2592000 2688000 2764800 2841600",
        ),
        _mhz("840 778 738 676 608 540 491 443 379 315"),
        "Mi 11 (venus, SM8350) power_profile.xml cpu.core_speeds; lahaina-v2-gpu.dtsi speed bin 0",
    ),
    "kalama": (
        _khz(
            "307200 441600 556800 672000 787200 902400 1017600 1113600 1228800 1344000 1459200 1555200"
            " 1670400 1785600 1900800 2016000",
            "499200 614400 729600 844800 940800 1056000 1171200 1286400 1401600 1536000 1651200 1785600"
            " 1920000 2054400 2188800 2323200 2457600 2592000 2707200 2803200",
            "595200 729600 864000 998400 1132800 1248000 1363200 1478400 1593600 1708800 1843200 1977600"
            " 2092800 2227200 2342400 2476800 2592000 2726400 2841600 2956800 3187200",
        ),
        _mhz("719 680 615 550 475 401 348 295 220"),
        "Xperia 1 V (SM8550-AB) power_profile.xml; mainline sm8550.dtsi gpu_opp_table",
    ),
    "mt6985": (
        # MediaTek's CPU OPPs live in the firmware's CSRAM table (mtk-cpufreq-hw); a Dimensity
        # 9200+ phone's power_profile lists the die's points up to that bin's tops.
        (
            (220000, 300000, *range(400000, 2000001, 100000)),
            (*range(400000, 2800001, 100000), 2850000, 2900000, 3000000),
            (*range(1200000, 2800001, 100000), 2850000, 2900000, 3000000, 3050000, 3150000, 3250000, 3350000),
        ),
        _mhz(
            "981 965 949 934 918 903 887 872 856 841 825 809 794 778 763 747 732 716 701 685 670 652"
            " 635 617 600 582 565 547 530 512 495 477 460 442 425 407 390 376 362 348 334 320 307"
            " 293 279 265 251 237 224"
        ),
        "corot (Redmi K60 Ultra, Dimensity 9200+) power_profile.xml b8be826 cpu.core_speeds; MediaTek"
        " gpufreq_mt6985.h g_stack_default_opp_table (MiCode/Xiaomi_Kernel_OpenSource)",
    ),
    "gs201": (
        _khz(
            "300000 574000 738000 930000 1098000 1197000 1328000 1401000 1598000 1704000 1803000",
            "400000 553000 696000 799000 910000 1024000 1197000 1328000 1491000 1663000 1836000 1999000"
            " 2130000 2253000 2348000",
            "500000 851000 984000 1106000 1277000 1426000 1582000 1745000 1826000 2048000 2188000 2252000"
            " 2401000 2507000 2630000 2704000 2802000 2850000",
        ),
        _mhz("848 762 701 572 510 471 400 351 302 251 202 151"),
        "panther power_profile.xml cpu.core_speeds; gs201-gpu.dtsi gpu_dvfs_table_v2 shader clocks",
    ),
}
# Profiles that keep only part of their SoC's cpufreq tables, and why (every point they list must
# still be the SoC's).
PARTIAL_TABLES = {"mali-tensor": "Pixel 7 class: the two big clusters' top points are left out"}
# Profiles of a lower bin of their SoC: its tables cut at the bin's top clocks (which the SoC's
# tables must list), and why.
BIN_TOPS = {
    "dimensity9200": (
        (1800000, 2850000, 3050000),
        "Dimensity 9200: 1.8 / 2.85 / 3.05 GHz (q2.tel, moneycontrol.com)",
    ),
}
# Profiles whose SoC variant adds points above its platform's tables, and why.
EXTRA_TOP = {"galaxy-s23": (3360000, "Snapdragon 8 Gen 2 for Galaxy: prime core at 3.36 GHz")}
# profile -> (the device's own cpu.core_speeds per cluster as its power_profile.xml lists them, the
# file's typos and what they stand for, where read): the variant's table, not the platform's.
DEVICE_TABLES = {
    "galaxy-s23": (
        _khz(
            "307200 441600 556800 672000 787200 902400 1017600 1113600 1228800 1344000 1459200 1555200"
            " 1670400 1785600 1990800 2016000",
            "499200 614400 729600 844800 940800 1056000 1171200 1286400 1401600 1536000 1651200 1785600"
            " 1920000 2054400 2188800 2323200 2457600 2592000 2707200 2803200",
            "595200 729600 86400 998400 1132800 1248000 1363200 1478400 1593600 1708800 1843200 1977600"
            " 2092800 2227200 2342400 2476800 2592000 2726400 2841600 2956800 3187200 3360000",
        ),
        {86400: 864000, 1990800: 1900800},
        "guckesh/android_device_samsung_dm1q power_profile.xml, commit 251319a (from S911BXXU7CXK4)",
    ),
}

# ro.product.model -> (storage configurations in MB it was sold with beside the profile's RAM, where read)
STORAGE = {
    "moto g(30)": ((65536, 131072), "rpp.pe spec table"),
    "Nexus 6P": ((32768, 65536, 131072), "techspot.com/review/1109-google-nexus-6p"),
    "SM-G991U": ((131072, 262144), "androidheadlines.com 2020-07"),
    "SM-S911B": ((131072, 262144, 524288), "sammobile.com, moneycontrol.com 2023-01-30; helpmax.net"),
    "Pixel 7": ((131072, 262144), "makeoverarena.com/google-pixel-7-2"),
    "IN2013": ((131072, 262144), "bgr.in; financialexpress.com 2020-04-09"),
    "V2241A": ((262144,), "gadgets360.com: the sole 12 GB + 256 GB variant"),
    "Mi 10": ((131072, 262144), "chaptsand/android_device_xiaomi_umi README; themobileindian.com"),
}
# A Snapdragon-only model number must not be an Exynos one (SM-G99xB: Exynos 2100, phonearena.com).
EXYNOS_MODELS = ("SM-G991B", "SM-G996B", "SM-G998B")
SOURCE = re.compile(r"\[\w+\]|\b[\w-]+\.(com|net|in|pk|pe|mx|news|it|dev|org)\b|unverified", re.IGNORECASE)


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_ram_battery_and_storage_are_what_the_device_was_sold_with(path: Path) -> None:
    profile = load_profile_file(path)
    model = profile.props["ro.product.model"]
    assert model not in EXYNOS_MODELS or profile.props.get("ro.soc.manufacturer") != "QTI", model
    if model not in SOLD:
        pytest.skip(f"{model}: no spec source checked")
    ram_options, battery_mah, where = SOLD[model]
    assert profile.ram_mb == min(ram_options), f"{path.name}: {model} ships {ram_options} MB ({where})"
    assert profile.battery.capacity_mah == battery_mah, (
        f"{path.name}: {model} has {battery_mah} mAh ({where})"
    )
    storage_options, where = STORAGE[model]
    assert profile.storage_mb == min(storage_options), (
        f"{path.name}: {model} ships {storage_options} MB ({where})"
    )


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_ram_and_storage_lines_carry_a_source(path: Path) -> None:
    lines = path.read_text().splitlines()
    for key in ("ram_mb:", "storage_mb:"):
        index = next((i for i, line in enumerate(lines) if line.startswith(key)), None)
        if index is None:
            continue
        block = [lines[index]]
        above = index - 1
        while above >= 0 and lines[above].startswith(("#", "ram_mb:")):  # the pair shares its block
            block.append(lines[above])
            above -= 1
        assert any(SOURCE.search(line.partition("#")[2]) for line in block), (
            f"{path.name}: {key} cites nothing"
        )


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_clock_tables_are_the_socs(path: Path) -> None:
    profile = load_profile_file(path)
    platform = profile.props["ro.board.platform"]
    if platform not in SOC_CLOCKS:
        pytest.skip(f"{platform}: no clock table source checked")
    cpu_tables, gpu_opps_hz, where = SOC_CLOCKS[platform]
    if cpu_tables is not None:
        tables = tuple(cluster.freqs_khz for cluster in profile.cpu.clusters)
        if path.stem in EXTRA_TOP:
            extra_khz, _why = EXTRA_TOP[path.stem]
            assert tables[-1][-1] == extra_khz, path.name
            tables = (*tables[:-1], tables[-1][:-1])
        if path.stem in BIN_TOPS:
            tops, _why = BIN_TOPS[path.stem]
            assert all(top in soc for top, soc in zip(tops, cpu_tables, strict=True)), path.name
            cpu_tables = tuple(
                tuple(f for f in soc if f <= top) for top, soc in zip(tops, cpu_tables, strict=True)
            )
        if path.stem in PARTIAL_TABLES:
            assert len(tables) == len(cpu_tables), path.name
            for own, soc in zip(tables, cpu_tables, strict=True):
                assert set(own) <= set(soc), f"{path.name}: {sorted(set(own) - set(soc))} kHz ({where})"
        else:
            assert tables == cpu_tables, f"{path.name}: {platform}'s cpufreq tables ({where})"
    if path.stem in DEVICE_TABLES:
        device_tables, typos, where_device = DEVICE_TABLES[path.stem]
        fixed = tuple(tuple(typos.get(f, f) for f in cluster) for cluster in device_tables)
        own = tuple(cluster.freqs_khz for cluster in profile.cpu.clusters)
        assert own == fixed, f"{path.name}: the device's cpufreq tables ({where_device})"
    assert profile.gpu is not None
    extra = set(profile.gpu.freqs_hz) - gpu_opps_hz
    assert not extra, f"{path.name}: {sorted(extra)} Hz are no {platform} GPU OPP ({where})"


# profile -> (identity props as a real device of that model reports them, where read)
IDENTITY = {
    "adreno-sd865-idle": (
        {
            "ro.product.model": "IN2013",
            "ro.product.name": "OnePlus8_EEA",
            "ro.product.device": "OnePlus8",
            "ro.product.brand": "OnePlus",
            "ro.product.manufacturer": "OnePlus",
            "ro.board.platform": "kona",
            "ro.hardware": "qcom",
        },
        "oxygen-updater/build-props op8/eea/10.5.1.IN21BA.getprop",
    ),
}


@pytest.mark.parametrize("name", sorted(IDENTITY))
def test_identity_props_are_the_devices(name: str) -> None:
    path = next(p for p in PROFILES if p.stem == name)
    props = load_profile_file(path).props
    expected, where = IDENTITY[name]
    wrong = {key: props.get(key) for key, value in expected.items() if props.get(key) != value}
    assert not wrong, f"{path.name}: {wrong} differ from the device ({where})"


# profile -> (every OpenCL library the device's vendor image ships, path -> how it is reached,
# where read). A library the device ships and the profile leaves out makes the phone stricter
# than the device: a program linked with -lOpenCL would not start on it.
VENDOR_OPENCL: dict[str, tuple[dict[str, OpenClLoader], str]] = {
    "pixel7": (
        {
            "/vendor/lib64/libOpenCL.so": OpenClLoader.DLSYM,
            "/vendor/lib64/libOpenCL-pixel.so": OpenClLoader.PIXEL,
        },
        "RandomPush/google_panther_dump ef505a179ff9 vendor/lib64/; the wrapper's loader: TFLite "
        "opencl_wrapper.cc",
    ),
}
VENDOR_OPENCL["mali-tensor"] = VENDOR_OPENCL["pixel7"]  # a Pixel 7 too (ro.product.model), with quirks


@pytest.mark.parametrize("name", sorted(VENDOR_OPENCL))
def test_opencl_libraries_are_the_ones_the_vendor_image_ships(name: str) -> None:
    path = next(p for p in PROFILES if p.stem == name)
    opencl = load_profile_file(path).opencl
    expected, where = VENDOR_OPENCL[name]
    shipped = {lib.path: lib.loader for lib in opencl.libraries}
    assert shipped == expected, f"{path.name}: the device ships {expected} ({where})"
    linked = "/vendor/lib64/libOpenCL.so" in expected or "/system/lib64/libOpenCL.so" in expected
    assert opencl.linker_visible == linked, f"{path.name}: -lOpenCL starts iff the device has libOpenCL.so"


PER_CORE = re.compile(r"(\d+) fp(?:32|16) FLOP/cycle.*? x (\d+\.\d+) GHz")


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_per_core_throughput_is_its_flop_per_cycle_at_the_clusters_top_clock(path: Path) -> None:
    """A per-core GFLOP/s is FLOP/cycle (the core's optimization guide) x the cluster's top clock:
    a clock table corrected without its throughput line would leave the SoC's proportions stale."""
    profile = load_profile_file(path)
    if profile.throughput is None:
        pytest.skip(f"{path.name}: no throughput block")
    for cluster in profile.cpu.clusters:
        top_ghz = max(cluster.freqs_khz) / 1_000_000
        per_core = profile.throughput.clusters[cluster.name]
        for cited in (per_core.fp32_gflops_per_core, per_core.fp16_gflops_per_core):
            if cited is None:
                continue
            found = PER_CORE.search(cited.source)
            assert found, f"{path.name}: {cluster.name}: no 'N FLOP/cycle x G GHz' in {cited.source!r}"
            flops, ghz = int(found[1]), float(found[2])
            assert abs(ghz - top_ghz) < 0.0005, (
                f"{path.name}: {cluster.name} tops at {top_ghz} GHz, not {ghz}"
            )
            assert abs(cited.value - flops * ghz) < 0.01, f"{path.name}: {cluster.name}: {flops} x {ghz}"


# profile -> where its power HAL's own hint table (libperfmgr powerhint.json) was read: its
# FIXED_PERFORMANCE writes 9999999 (the kernel clamps it to each cluster's top clock) to every
# cluster's scaling_min_freq and scaling_max_freq and no GPU node, and no touch, screen-off or idle
# hint writes a cpufreq node.
POWER_HINTS = {
    "pixel7": "GrapheneOS/device_google_pantah powerhint-panther.json 02576ec",
}


@pytest.mark.parametrize("name", sorted(POWER_HINTS))
def test_power_hal_hints_are_the_devices_hint_table(name: str) -> None:
    profile = load_profile(name)
    where = POWER_HINTS[name]
    fixed = profile.fixed_performance
    assert fixed is not None, f"{name}: no fixed performance mode ({where})"
    tops = tuple(cluster.freqs_khz[-1] for cluster in profile.cpu.clusters)
    assert fixed.cpu_khz == tops and fixed.gpu_hz is None, f"{name}: fixed performance ({where})"
    assert profile.power_hal.hints == (), f"{name}: no clock-limit hints ({where})"


# The power model (vphone/power.py): power = idle_mw + cpu_core_mw x busy cores + gpu_busy_mw x
# GPU busy + screen_mw while the screen is on, whatever the clocks. A busy core is a fastest
# core's worth of work (socspeed.py: a phone core is core_cores host cores, the fastest core's
# share), so one number must stand for a thread on the fastest core and for all cores busy:
# cpu_core_mw is the larger of the two per fastest-core unit, so that neither costs less than on
# the device. The device's numbers are its power_profile.xml's (AOSP format, mA at the battery):
# idle = cpu.suspend + cpu.idle (the system awake, CPUs in the kernel idle loop; before Android 8.1
# the same two were cpu.idle + cpu.awake); a busy core = cpu.core_power at its cluster's top clock
# + that cluster's cpu.cluster_power + cpu.active; the screen = screen.on + screen.full x 0.5
# (AOSP's ScreenPowerCalculator charges screen.full x (bin + 0.5) / 5; vphone's screen_brightness
# 102 is bin 2 = 102 / (256 / 5)). mA x the battery's nominal voltage = mW.
@dataclass(frozen=True)
class CpuPower:
    tops: tuple[tuple[int, float], ...]  # per cluster: (its top clock in kHz, cpu.core_power there)
    cluster_ma: tuple[float, ...]  # cpu.cluster_power per cluster (0 where the file has none)
    active_ma: float  # cpu.active (0 where the file has none)
    where: str


@dataclass(frozen=True)
class BoardPower:
    suspend_ma: float
    idle_ma: float
    screen_on_ma: float
    screen_full_ma: float
    where: str


@dataclass(frozen=True)
class DevicePower:
    volts: float  # the battery's nominal voltage
    volts_where: str
    cpu: CpuPower
    board: BoardPower | None  # None: the named device's own file was not found (kept modelled)


PIXEL7_BOARD = BoardPower(
    13.3, 35.6, 98, 470, "GrapheneOS/device_google_pantah panther power_profile.xml 2dafb45"
)
PIXEL7_VOLTS = (3.86, "battery label 16.81 Wh / 4355 mAh (gadgetian.com/54245, PBKreviews teardown)")
UMI_BOARD = BoardPower(
    7.85, 12.91, 62.66, 503.67, "chaptsand/android_device_xiaomi_umi power_profile.xml 2ac577a"
)
UMI_CPU = CpuPower(((1804800, 78.76), (2419200, 348.25), (2841600, 493.34)), (0, 0, 0), 0, UMI_BOARD.where)
# No label found for these cells: 3.87 V, the nominal of the 4.45-4.48 V float cells of their era
# (Pixel 7 3.86 V, Galaxy S23 3.88 V), is assumed; the angler's 4.35 V-class cell is taken at the
# 3.8 V of the Nexus 6's label (ifixit.com Nexus 6 teardown: "3.8 V, 3220 mAh").
ASSUMED = "assumed: no label of this cell found"
S23_BOARD = BoardPower(
    6.6, 19.6, 73.9, 202.6, "guckesh/android_device_samsung_dm1q power_profile.xml 251319a (S911BXXU7CXK4)"
)
S23_VOLTS = (3.88, "EB-BS912ABY 3.88 V (batteryweb.com Galaxy S23 battery listing)")
ANGLER = "LineageOS/android_device_huawei_angler power_profile.xml 076acbd"
CAPRIP = "LineageOS/android_device_motorola_caprip power_profile.xml 52d6a07"
POWER: dict[str, DevicePower] = {
    "pixel7": DevicePower(
        *PIXEL7_VOLTS,
        CpuPower(
            ((1803000, 60.01), (2348000, 81), (2850000, 202.77)), (0, 1.16, 1.53), 8.2, PIXEL7_BOARD.where
        ),
        PIXEL7_BOARD,
    ),
    # A Pixel 7 too (ro.product.model), whose quirk tables stop below the two big clusters' tops:
    # its busy cores cost what the device's do at those clocks.
    "mali-tensor": DevicePower(
        *PIXEL7_VOLTS,
        CpuPower(
            ((1803000, 60.01), (2253000, 70.22), (2802000, 188.15)), (0, 1.16, 1.53), 8.2, PIXEL7_BOARD.where
        ),
        PIXEL7_BOARD,
    ),
    "adreno-sd865": DevicePower(3.87, ASSUMED, UMI_CPU, UMI_BOARD),
    # A OnePlus 8 whose power model is the Mi 10's (same SM8250, its header): the OnePlus 8's own
    # power_profile.xml is in none of LineageOS/android_device_oneplus_sm8250-common's overlays.
    "adreno-sd865-idle": DevicePower(3.87, ASSUMED, UMI_CPU, UMI_BOARD),
    # Before Android 8.1's names: cpu.idle (suspended) 0.145 + cpu.awake 9.49; cpu.active.clusterN
    # is a flat 379.97 mA per busy core at every speed of both clusters.
    "adreno-nexus6p": DevicePower(
        3.8,
        ASSUMED,
        CpuPower(((1555200, 379.9659093), (1958400, 379.9659093)), (0, 0), 0, ANGLER),
        BoardPower(0.144925583, 9.488210416, 169.4278765, 79.09344216, ANGLER),
    ),
    "galaxy-s23": DevicePower(
        *S23_VOLTS,
        CpuPower(((2016000, 60), (2803200, 321), (3360000, 1139)), (0, 0, 0), 0, S23_BOARD.where),
        S23_BOARD,
    ),
    # The same SM-S911B on the SM8550-AB's clocks: its prime tops at 3.19 GHz, a point of the
    # S23's own table (1080 mA there).
    "adreno-sd8gen2": DevicePower(
        *S23_VOLTS,
        CpuPower(((2016000, 60), (2803200, 321), (3187200, 1080)), (0, 0, 0), 0, S23_BOARD.where),
        S23_BOARD,
    ),
    # The Dimensity 9200's tops in a Dimensity 9200+ phone's file (the same MT6985 die and tables,
    # as the profile's clocks); the vivo X90's board and screen are not that phone's: modelled.
    "dimensity9200": DevicePower(
        3.87,
        ASSUMED,
        CpuPower(
            ((1800000, 106.72), (2850000, 383.22), (3050000, 795.61)),
            (2.11, 2.22, 0),
            24.45,
            "corot-development/android_device_xiaomi_corot power_profile.xml 4c1cf07",
        ),
        None,
    ),
    "no-opencl": DevicePower(
        3.87,
        ASSUMED,
        CpuPower(((1804800, 80.9), (2016000, 277.1)), (0.7, 6.7), 3, CAPRIP),
        BoardPower(6.993, 4.969, 88.97, 325.02, CAPRIP),
    ),
}
SCREEN_BIN_SHARE = 0.5  # brightness 102 of 255: BatteryStats bin 2 of 5, charged (2 + 0.5) / 5


def _busy_core_ma(profile: Profile, cpu: CpuPower) -> float:
    """The device's current per fastest-core unit of busy CPU: the larger of one thread on the
    fastest cluster and all cores busy shared over their fastest-core units."""
    assert profile.throughput is not None
    gflops = [profile.throughput.clusters[c.name].fp32_gflops_per_core.value for c in profile.cpu.clusters]
    fastest = max(range(len(gflops)), key=gflops.__getitem__)
    units = sum(c.cpus * g for c, g in zip(profile.cpu.clusters, gflops, strict=True)) / gflops[fastest]
    core_ma = [ma for _khz, ma in cpu.tops]
    one = core_ma[fastest] + cpu.cluster_ma[fastest] + cpu.active_ma
    every = sum(c.cpus * ma for c, ma in zip(profile.cpu.clusters, core_ma, strict=True))
    return max(one, (every + sum(cpu.cluster_ma) + cpu.active_ma) / units)


@pytest.mark.parametrize("name", sorted(POWER))
def test_power_coefficients_are_the_devices_power_profile(name: str) -> None:
    """Old profiles held round modelled numbers (idle 420-600 mW, 850-1100 mW a core, screen
    600-700 mW); the devices' own files say otherwise, in both directions."""
    profile = load_profile(name)
    device = POWER[name]
    tops = tuple(c.freqs_khz[-1] for c in profile.cpu.clusters)
    assert tops == tuple(khz for khz, _ma in device.cpu.tops), f"{name}: core_power read at other clocks"
    cpu_mw = _busy_core_ma(profile, device.cpu) * device.volts
    assert profile.power.cpu_core_mw == round(cpu_mw), (
        f"{name}: {cpu_mw:.0f} mW a busy core ({device.cpu.where}; {device.volts} V, {device.volts_where})"
    )
    if device.board is None:
        return
    board = device.board
    idle_mw = (board.suspend_ma + board.idle_ma) * device.volts
    screen_mw = (board.screen_on_ma + SCREEN_BIN_SHARE * board.screen_full_ma) * device.volts
    assert profile.power.idle_mw == round(idle_mw), f"{name}: idle {idle_mw:.0f} mW ({board.where})"
    assert profile.power.screen_mw == round(screen_mw), f"{name}: screen {screen_mw:.0f} mW ({board.where})"


# profile -> (the battery's charge voltage in mV, where read): the fuel gauge's full voltage.
CHARGE_VOLTAGE = {
    "adreno-sd865": (
        4480,
        "UtsavBalar1231/kernel_xiaomi_sm8250 fg-gen4-batterydata-umi-NVTBM4N-4780mah.dtsi 52e2549: "
        "qcom,max-voltage-uv = <4480000> (jeita-fv 4.48 V at 15-45 C)",
    ),
}


@pytest.mark.parametrize("name", sorted(CHARGE_VOLTAGE))
def test_full_voltage_is_the_batterys_charge_voltage(name: str) -> None:
    profile = load_profile(name)
    millivolts, where = CHARGE_VOLTAGE[name]
    assert profile.battery.voltage_full_mv == millivolts, f"{name}: {where}"


# profile -> (its touch boost: each cluster's floor in kHz, how long in ms, where read). MediaTek's
# power HAL answers a touch with MTKPOWER_HINT_APP_TOUCH, which writes no cpufreq node itself
# (powerscntbl.xml: only PERF_RES_POWERHAL_TOUCH_BOOST_NOTIFY_TOUCH_EVENT); the kernel's
# /proc/touch_boost then floors each cluster at the OPP powercontable.xml names, for
# boost_duration ms. The same table has no screen-off or deep-Doze scenario: no such hint either.
TOUCH_BOOST = {
    "dimensity9200": (
        (600000, 900000, 1200000),
        50,
        "leddaz-dump-stash/xiaomi_corot_dump 292f7f0 vendor/etc/powercontable.xml: "
        "boost_opp_cluster_0 12 ('MIUI MOD 1.4GHz -> 600 Mhz'), boost_opp_cluster_1 20 ('2.1GHz -> "
        "900MHz'), boost_opp_cluster_2 31 (the lowest OPP), boost_duration 50 ('MAX 50ms')",
    ),
}


@pytest.mark.parametrize("name", sorted(TOUCH_BOOST))
def test_touch_boost_is_the_devices_table(name: str) -> None:
    profile = load_profile(name)
    floors, duration_ms, where = TOUCH_BOOST[name]
    (boost,) = (h for h in profile.power_hal.hints if h.trigger is HintTrigger.INTERACTION)
    assert boost.cpu_min_khz == floors and boost.cpu_max_khz is None, f"{name}: {where}"
    assert boost.duration_ms == duration_ms, f"{name}: {where}"
    assert [h.trigger for h in profile.power_hal.hints] == [HintTrigger.INTERACTION], f"{name}: {where}"
