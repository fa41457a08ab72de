"""Profile YAML: the shipped profiles load, and bad files give one line naming file:line."""

from __future__ import annotations

import pytest
from vphone.errors import ConfigError
from vphone.profile import CurrentUnit, DischargeSign, GpuKind, parse_profile
from vphone.profiles import PROFILES_DIR, available_profiles, load_profile


def test_shipped_profiles_cover_the_quirks() -> None:
    assert {"adreno-sd8gen2", "adreno-nexus6p", "mali-tensor", "no-opencl"} <= set(available_profiles())
    sd = load_profile("adreno-sd8gen2")
    assert sd.gpu is not None and sd.gpu.kind is GpuKind.ADRENO and not sd.rooted
    assert sd.battery.discharge_sign is DischargeSign.NEGATIVE
    assert sd.battery.charging_node == "/sys/class/power_supply/battery/input_suspend"
    n6p = load_profile("adreno-nexus6p")
    assert n6p.rooted and n6p.battery.discharge_sign is DischargeSign.POSITIVE
    assert n6p.battery.fuel_gauge_interval_s >= 10
    mali = load_profile("mali-tensor")
    assert (
        mali.gpu is not None and mali.gpu.kind is GpuKind.MALI and mali.battery.current_unit is CurrentUnit.MA
    )
    assert not load_profile("no-opencl").has_opencl


def _text_with(old: str, new: str) -> str:
    text = (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text()
    assert old in text
    return text.replace(old, new)


# The profile's own idle line, whatever its value (the value is the device's, and may change).
_SD8GEN2_IDLE_LINE = next(
    line
    for line in (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text().splitlines()
    if line.startswith("  idle_mw:")
)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("old", "new", "needle", "words"),
    [
        ("  current_unit: uA", "  current_unit: nA", "current_unit: nA", "battery.current_unit"),
        (_SD8GEN2_IDLE_LINE, "  idle_mw: -3", "idle_mw: -3", "power.idle_mw"),
        ("  ro.board.platform: kalama\n", "", "props:", "ro.board.platform"),
        ("  cores: 1", "  cores: 1\n  bogus: 2", "bogus: 2", "gpu.bogus"),
        (
            "freqs_hz: [220000000, 295000000",
            "freqs_hz: [295000000, 220000000",
            "freqs_hz:",
            "ascending",
        ),
    ],
)
def test_bad_profile_names_file_line_and_key(old: str, new: str, needle: str, words: str) -> None:
    text = _text_with(old, new)
    with pytest.raises(ConfigError) as info:
        parse_profile(text, "x.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert words in message
    line = _line_of(text, needle)
    assert message.startswith(f"x.yaml:{line}:") or (needle == "props:" and message.startswith("x.yaml:"))


def _sd865_with(old: str, new: str) -> str:
    text = (PROFILES_DIR / "adreno-sd865.yaml").read_text()
    assert old in text, old
    return text.replace(old, new, 1)


def _refused_at_its_line(text: str, name: str, needle: str, words: str) -> None:
    """The profile `text` read as `name` is refused in one line: NAME:LINE of `needle`, `words`."""
    with pytest.raises(ConfigError) as info:
        parse_profile(text, name)
    message = str(info.value)
    assert "\n" not in message and words in message, message
    assert message.startswith(f"{name}:{_line_of(text, needle)}:"), message


@pytest.mark.parametrize(
    ("old", "new", "needle", "words"),
    [
        (
            '  ro.build.version.release: "12"',
            '  ro.build.version.release: "17"',
            "release:",
            "unknown Android release '17'",
        ),
        (
            '  ro.build.version.sdk: "31"',
            '  ro.build.version.sdk: "30"',
            "sdk:",
            "not the API level of Android 12",
        ),
        ('  ro.build.version.release: "12"', '  ro.build.version.release: "10"', "sdk:", "Android 10 (29)"),
        (
            "      freqs_khz: [710400, 825600",
            "      freqs_khz: [825600, 710400",
            "freqs_khz: [825600, 710400",
            "ascending",
        ),
        (
            "      freqs_khz: [710400, 825600",
            "      freqs_khz: [710400, 710400",
            "freqs_khz: [710400, 710400",
            "each once",
        ),
        (
            "trips: [{temp_c: 52, type: passive}, {temp_c: 115, type: critical}]",
            "trips: [{temp_c: 120, type: passive}, {temp_c: 115, type: critical}]",
            "temp_c: 120",
            "trip points must rise",
        ),
        ("status_c: [45, 47, 49", "status_c: [45, 44, 49", "status_c: [45, 44", "thresholds must rise"),
        (
            "  cpu_khz: [1171200, 1382400, 1516800]",
            "  cpu_khz: [1171200, 1382400, 1516801]",
            "cpu_khz:",
            "not in cluster prime's table",
        ),
        (
            "  cpu_khz: [1171200, 1382400, 1516800]",
            "  cpu_khz: [1171200]",
            "cpu_khz:",
            "one frequency per cluster",
        ),
        (
            "  governor: schedutil\n  governors:",
            "  governor: ondemand\n  governors:",
            "governor: ondemand",
            "not in governors",
        ),
        ("      cpus: 3\n", "      cpus: 0\n", "cpus: 0", "cpu.clusters.1.cpus"),
        ("  budget_cores: 2.0\n", "  budget_cores: 0\n", "budget_cores: 0", "greater than 0"),
    ],
)
def test_bad_soc_sections_name_file_line_and_key(old: str, new: str, needle: str, words: str) -> None:
    text = _sd865_with(old, new)
    _refused_at_its_line(text, "sd.yaml", needle, words)


def test_fixed_performance_needs_android_11() -> None:
    text = (PROFILES_DIR / "mali-tensor.yaml").read_text()
    text = text.replace('ro.build.version.sdk: "34"', 'ro.build.version.sdk: "29"')
    text = text.replace('ro.build.version.release: "14"', 'ro.build.version.release: "10"')
    with pytest.raises(ConfigError, match=r"^m.yaml:\d+: fixed_performance: needs Android 11"):
        parse_profile(text, "m.yaml")


def test_yaml_syntax_error_and_unknown_profile() -> None:
    with pytest.raises(ConfigError, match=r"^y.yaml:3: invalid YAML"):
        parse_profile("name: a\nprops:\n\tx: 1\n", "y.yaml")
    with pytest.raises(ConfigError, match=r"choose one of: .*adreno-sd8gen2"):
        load_profile("pixel-99")


STANDARD_AND = "  library: /vendor/lib64/libOpenCL.so\n  extra_libraries:\n"


def _pixel7_opencl(section: str) -> str:
    text = (PROFILES_DIR / "pixel7.yaml").read_text()
    start, end = text.index("\nopencl:\n"), text.index("\nbattery:\n")
    return text[:start] + "\nopencl:\n" + section + text[end:]


@pytest.mark.parametrize(
    ("section", "needle", "words"),
    [
        (
            STANDARD_AND + "    - path: /system/lib64/libOpenCL-pixel.so\n",
            "path: /system",
            "opencl.extra_libraries.0.path: must be under /vendor/",
        ),
        (
            STANDARD_AND + "    - path: /vendor/lib64/libOpenCL.so\n",
            "opencl:",
            "every library path must differ",
        ),
        (
            "  library: null\n  extra_libraries:\n    - path: /vendor/lib64/libOpenCL-pixel.so\n",
            "opencl:",
            "extra_libraries needs a library",
        ),
        (
            "  library: /vendor/lib64/libOpenCL-pixel.so\n  loader: pixel\n  extra_libraries:\n"
            "    - path: /vendor/lib64/egl/libGLES_mali.so\n",
            "opencl:",
            "need install: copy",
        ),
        ("  library: /system/lib64/libOpenCL.so\n", "library: /system", "opencl.library: must be under"),
    ],
)
def test_bad_opencl_sections_name_file_line_and_key(section: str, needle: str, words: str) -> None:
    text = _pixel7_opencl(section)
    _refused_at_its_line(text, "p.yaml", needle, words)


def test_a_libopencl_so_beside_the_pixel_wrapper_lets_linked_programs_start() -> None:
    """Either library may be `library`: what the linker finds decides, not the order."""
    wrapper_only = parse_profile(
        _pixel7_opencl("  library: /vendor/lib64/libOpenCL-pixel.so\n  loader: pixel\n"), "w.yaml"
    )
    assert not wrapper_only.opencl.linker_visible
    both = parse_profile(
        _pixel7_opencl(
            "  library: /vendor/lib64/libOpenCL-pixel.so\n  loader: pixel\n  extra_libraries:\n"
            "    - path: /vendor/lib64/libOpenCL.so\n"
        ),
        "b.yaml",
    )
    assert both.opencl.linker_visible and both.has_opencl
    assert [lib.path for lib in both.opencl.libraries] == [
        "/vendor/lib64/libOpenCL-pixel.so",
        "/vendor/lib64/libOpenCL.so",
    ]
    # A copy of the ICD at a path the linker does not search is there for dlopen only.
    elsewhere = parse_profile(
        _pixel7_opencl(
            "  library: /vendor/lib64/libOpenCL-pixel.so\n  loader: pixel\n  extra_libraries:\n"
            "    - path: /vendor/lib64/egl/libGLES_mali.so\n      install: copy\n"
        ),
        "e.yaml",
    )
    assert not elsewhere.opencl.linker_visible
