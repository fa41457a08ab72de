"""Pure parts of clock control and throttling: the tables script's output, the pin and restore
write orders, read-back judgement, throttle samples and the on_throttle policy."""

from __future__ import annotations

from farm.engine.clockplan import ClockAbilities, CpuTable, GpuTable, plan_clocks
from farm.engine.clocks import ClockRestore, mismatches, parse_clock_tables, pin_writes, restore_writes
from farm.engine.thermal import ThrottleReport, judge, parse_sample, throttle_decision
from farm.experiment.clocks import Clocks, OnThrottle
from farm.store import Outcome, RunState

P0 = "/sys/devices/system/cpu/cpufreq/policy0"
P4 = "/sys/devices/system/cpu/cpufreq/policy4"
KGSL = "/sys/class/kgsl/kgsl-3d0"
TABLES = (
    f"P|{P0}|0 1 2 3|300000 1000000 1800000 |schedutil performance \n"
    f"P|{P4}|4 5 6 7|2800000 700000 1500000|schedutil performance\n"
    f"G|{KGSL}/devfreq|840000000 315000000 540000000|msm-adreno-tz performance|{KGSL}\n"
)


def _abilities() -> ClockAbilities:
    cpu, gpu = parse_clock_tables(TABLES)
    return ClockAbilities(root=True, sdk=33, cpu=cpu, gpu=gpu)


def test_tables_parse_sorted_with_cpus_and_governors() -> None:
    cpu, gpu = parse_clock_tables(TABLES + "P|/x|||\nnoise\n")
    assert cpu[0] == CpuTable(P0, (0, 1, 2, 3), (300000, 1000000, 1800000), ("schedutil", "performance"))
    assert cpu[1].freqs_khz == (700000, 1500000, 2800000)
    assert cpu[2].freqs_khz == ()  # a policy without a table cannot be pinned
    assert gpu == GpuTable(
        f"{KGSL}/devfreq", (315000000, 540000000, 840000000), ("msm-adreno-tz", "performance"), KGSL
    )
    assert parse_clock_tables("")[1] is None


def test_pin_writes_widen_before_narrowing_and_restore_puts_back_what_was_read() -> None:
    abilities = _abilities()
    plan = plan_clocks(Clocks.model_validate({"mode": "pin", "cpu": "max", "gpu": "min"}), abilities)
    pins = pin_writes(plan, abilities)
    assert pins[:4] == [
        (f"{P0}/scaling_governor", "performance"),
        (f"{P0}/scaling_min_freq", "300000"),
        (f"{P0}/scaling_max_freq", "1800000"),
        (f"{P0}/scaling_min_freq", "1800000"),
    ]
    assert pins[-3:] == [
        (f"{KGSL}/max_pwrlevel", "0"),
        (f"{KGSL}/min_pwrlevel", "2"),
        (f"{KGSL}/max_pwrlevel", "2"),
    ]
    before = {node: "" for node, _ in pins} | {
        f"{P0}/scaling_governor": "schedutil",
        f"{P0}/scaling_min_freq": "300000",
        f"{P0}/scaling_max_freq": "1800000",
        f"{KGSL}/min_pwrlevel": "2",
        f"{KGSL}/max_pwrlevel": "0",
    }
    restore = restore_writes(plan, abilities, before)
    assert restore[:4] == (
        (f"{P0}/scaling_min_freq", "300000"),
        (f"{P0}/scaling_max_freq", "1800000"),
        (f"{P0}/scaling_min_freq", "300000"),
        (f"{P0}/scaling_governor", "schedutil"),
    )
    # Nodes that could not be read before are left alone, never written empty.
    assert all(value for _, value in restore)
    # kgsl's levels are released before devfreq's range: they bound it.
    kgsl_first = [n for n, _ in restore if n.startswith(KGSL) and not n.startswith(f"{KGSL}/devfreq")]
    assert [n for n, _ in restore if n.startswith(KGSL)][:3] == kgsl_first
    assert [(n, v) for n, v in restore if n in kgsl_first] == [
        (f"{KGSL}/max_pwrlevel", "0"),
        (f"{KGSL}/min_pwrlevel", "2"),
        (f"{KGSL}/max_pwrlevel", "0"),
    ]
    again = ClockRestore.from_json(ClockRestore(restore, fixed_performance=True).to_json())
    assert again == ClockRestore(restore, fixed_performance=True)


def test_readback_judgement_accepts_a_thermal_cap_only_on_restore() -> None:
    writes = [(f"{P0}/scaling_max_freq", "1800000"), (f"{P0}/scaling_governor", "schedutil")]
    capped = {f"{P0}/scaling_max_freq": "1000000", f"{P0}/scaling_governor": "schedutil"}
    assert mismatches(capped, writes) == ["policy0/scaling_max_freq reads 1000000, not 1800000"]
    assert mismatches(capped, writes, allow_caps=True) == []
    assert (
        mismatches({}, writes, allow_caps=True)[1] == "policy0/scaling_governor reads nothing, not schedutil"
    )


def test_throttle_samples_parse_and_judge_caps_status_and_time() -> None:
    cool = parse_sample(f"cpu {P0} 1800000\ncpu {P4} 2800000\nkgsl 0\nThermal Status: 0\n")
    assert cool.cpu_max_khz == {P0: 1800000, P4: 2800000} and cool.kgsl_thermal_pwrlevel == 0
    assert cool.thermal_status == 0
    hot = parse_sample(f"cpu {P0} 1800000\ncpu {P4} 1500000\nkgsl 2\nThermal Status: 2\n")
    report = judge([(0.0, cool), (5.0, cool), (10.0, hot)], {}, None)
    assert report.cpu_capped == (P4,) and report.gpu_capped and report.thermal_status_max == 2
    assert report.time_to_throttle_s == 10.0 and report.throttled and report.samples == 3
    assert not judge([(0.0, cool), (5.0, cool)], {}, None).throttled
    # A pin is the reference: a maximum below it is a cap even in the first sample.
    assert judge([(0.0, cool)], {P0: 2000000}, None).cpu_capped == (P0,)
    # kgsl pinned at level 2: thermal_pwrlevel 2 is not a cap, 3 is.
    assert not judge([(0.0, hot)], {}, 2).gpu_capped
    # No thermalservice on the phone (no status line): status unknown, not 0.
    assert parse_sample(f"cpu {P0} 1\n").thermal_status is None


def test_on_throttle_flag_retry_fail() -> None:
    hot = ThrottleReport(cpu_capped=(P4,))
    cool = ThrottleReport()
    done = RunState.DONE
    assert throttle_decision(done, Outcome.DONE, cool, OnThrottle.FAIL, attempts=1, max_attempts=3) == (
        done,
        None,
    )
    state, why = throttle_decision(done, Outcome.DONE, hot, OnThrottle.FLAG, attempts=1, max_attempts=3)
    assert state is done and why is not None and "policy4" in why
    assert (
        throttle_decision(done, Outcome.DONE, hot, OnThrottle.RETRY, attempts=1, max_attempts=3)[0]
        is RunState.PENDING
    )
    # Bounded: the last attempt is kept (flagged), not retried for ever.
    assert throttle_decision(done, Outcome.DONE, hot, OnThrottle.RETRY, attempts=3, max_attempts=3)[0] is done
    assert (
        throttle_decision(done, Outcome.DONE, hot, OnThrottle.FAIL, attempts=1, max_attempts=3)[0]
        is RunState.FAILED
    )
    failed = RunState.FAILED
    assert throttle_decision(failed, Outcome.FAILED, hot, OnThrottle.RETRY, attempts=1, max_attempts=3) == (
        failed,
        None,
    )
