from farm.report.environment import phone_info, props_of


def test_virtual_phone_recognised_from_probe_or_snapshot() -> None:
    probe = {
        "props": {"ro.build.fingerprint": "google/angler/angler:8.1.0/FARM.DDE736/1:userdebug/release-keys"}
    }
    assert phone_info("local/VP1", None, None, probe, None).virtual
    assert phone_info("local/VP1", None, None, None, {"props": {"ro.farm.virtual": "1"}}).virtual
    real = {"props": {"ro.build.fingerprint": "google/oriole/oriole:13/TQ1A/123:user/release-keys"}}
    assert not phone_info("lab/8A1X", "Pixel 6", "arm64-v8a", real, None).virtual


def test_environment_summary_is_readable_and_skips_per_run_values() -> None:
    env = {
        "argv": ["/data/local/tmp/farm/bin/x/lstm", "--backend=gpu"],
        "props": {"ro.product.model": "Nexus 6P", "ro.soc.model": None},
        "cpufreq": {
            "/sys/devices/system/cpu/cpu0/cpufreq": {"cur_khz": "384000", "governor": "interactive"},
            "/sys/devices/system/cpu/cpufreq/policy0": {"cur_khz": "384000", "governor": "interactive"},
        },
        "programs": {"lstm": {"abi": "x86_64", "sha256": "caa1d4d2bfe253d392ab"}},
        "charging_control": "/sys/class/power_supply/battery/charging_enabled",
        "temperature_start_c": 38.0,
        "notes": [],
    }
    info = phone_info("local/VP1", None, None, None, env)
    shown = dict(info.properties)
    assert info.model == "Nexus 6P"
    assert shown["cpufreq"] == "policy0: interactive 384000 kHz"
    assert shown["programs"] == "lstm caa1d4d2bfe2"
    assert "argv" not in shown and "temperature_start_c" not in shown and "notes" not in shown
    assert "ro.soc.model" not in shown  # None is not a value
    assert props_of({"props": [["a", "1"], ["b", None]]}) == {"a": "1"}
