"""The clock ladder: what a phone allows -> what it gets, levels resolved against its own tables."""

from __future__ import annotations

import pytest

from farm.engine.clockplan import (
    ClockAbilities,
    CpuTable,
    GpuTable,
    plan_clocks,
    resolve_level,
)
from farm.experiment.clocks import ClockLevel, ClockMode, Clocks

LITTLE = CpuTable(
    "/sys/devices/system/cpu/cpufreq/policy0",
    (0, 1, 2, 3),
    (300000, 1000000, 1800000),
    ("schedutil", "performance"),
)
BIG = CpuTable(
    "/sys/devices/system/cpu/cpufreq/policy4",
    (4, 5, 6),
    (700000, 1500000, 2400000, 2800000),
    ("schedutil", "performance"),
)
KGSL = GpuTable(
    "/sys/class/kgsl/kgsl-3d0/devfreq",
    (315_000_000, 540_000_000, 840_000_000),
    ("msm-adreno-tz", "performance"),
    "/sys/class/kgsl/kgsl-3d0",
)
ROOTED_13 = ClockAbilities(root=True, sdk=33, cpu=(LITTLE, BIG), gpu=KGSL)
UNROOTED_13 = ClockAbilities(root=False, sdk=33, cpu=(LITTLE, BIG), gpu=KGSL)
UNROOTED_10 = ClockAbilities(root=False, sdk=29, cpu=(LITTLE, BIG), gpu=KGSL)


def _clocks(**fields: object) -> Clocks:
    return Clocks.model_validate(fields)


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("max", 2800000),
        ("min", 700000),
        ("nominal", 2400000),
        (0.6, 1500000),
        (0.1, 700000),
        ("1.6GHz", 1500000),
        ("2.7GHz", 2800000),
    ],
)
def test_levels_resolve_to_entries_of_the_table(level: object, expected: int) -> None:
    assert resolve_level(ClockLevel.model_validate(level), BIG.freqs_khz) == expected


def test_gpu_levels_in_hz() -> None:
    assert resolve_level(ClockLevel.model_validate("600MHz"), KGSL.freqs_hz, per_khz=1000) == 540_000_000


@pytest.mark.parametrize(
    ("abilities", "ladder"),
    [
        (ROOTED_13, (ClockMode.PIN, ClockMode.FIXED_PERFORMANCE, ClockMode.NONE)),
        (UNROOTED_13, (ClockMode.FIXED_PERFORMANCE, ClockMode.NONE)),
        (UNROOTED_10, (ClockMode.NONE,)),
        (ClockAbilities(root=True, sdk=29, cpu=()), (ClockMode.NONE,)),
    ],
)
def test_auto_takes_the_strongest_the_phone_allows(
    abilities: ClockAbilities, ladder: tuple[ClockMode, ...]
) -> None:
    plan = plan_clocks(_clocks(mode="auto"), abilities)
    assert plan.ladder == ladder
    assert plan.refusal is None
    assert len(plan.notes) == 3 - len(ladder)  # one reason per step left out


def test_pin_resolves_every_policy_and_the_kgsl_pwrlevel() -> None:
    plan = plan_clocks(_clocks(mode="pin", cpu="min", gpu="max"), ROOTED_13)
    assert [(p.dir, p.khz, p.governor) for p in plan.cpu] == [
        (LITTLE.dir, 300000, "performance"),
        (BIG.dir, 700000, "performance"),
    ]
    assert plan.gpu is not None and plan.gpu.hz == 840_000_000 and plan.gpu.pwrlevel == 0
    assert plan_clocks(_clocks(mode="pin", gpu="min"), ROOTED_13).gpu.pwrlevel == 2  # type: ignore[union-attr]


def test_required_pin_on_an_unrooted_phone_is_refused_with_why() -> None:
    plan = plan_clocks(_clocks(mode="pin", required=True), UNROOTED_13)
    assert plan.ladder == () and plan.refusal is not None and "needs root" in plan.refusal


def test_required_fixed_performance_before_android_11_is_refused() -> None:
    plan = plan_clocks(_clocks(mode="fixed_performance", required=True), UNROOTED_10)
    assert plan.refusal is not None and "API 30" in plan.refusal and "API 29" in plan.refusal


def test_a_refusal_at_apply_time_moves_down_the_ladder_or_refuses_when_required() -> None:
    plan = plan_clocks(_clocks(mode="auto"), UNROOTED_13)
    down = plan.fallback_after(ClockMode.FIXED_PERFORMANCE, "Failed to set FIXED_PERFORMANCE mode")
    assert down.mode is ClockMode.NONE and down.refusal is None
    assert "fixed_performance refused: Failed" in down.notes[-1]
    required = plan_clocks(_clocks(mode="fixed_performance", required=True), UNROOTED_13)
    assert required.ladder == (ClockMode.FIXED_PERFORMANCE,)
    assert (
        required.fallback_after(ClockMode.FIXED_PERFORMANCE, "no HAL").refusal
        == "fixed_performance refused: no HAL"
    )


def test_a_governor_the_phone_lacks_blocks_pinning() -> None:
    plan = plan_clocks(_clocks(mode="pin", governor="userspace"), ROOTED_13)
    assert plan.mode is ClockMode.FIXED_PERFORMANCE
    assert "userspace is not offered by policy0, policy4" in plan.notes[0]


def test_affinity_big_and_little_take_the_fastest_and_slowest_policies() -> None:
    assert plan_clocks(_clocks(affinity="big"), ROOTED_13).affinity_cpus == (4, 5, 6)
    assert plan_clocks(_clocks(affinity="little"), ROOTED_13).affinity_cpus == (0, 1, 2, 3)
    assert plan_clocks(_clocks(affinity="all"), ROOTED_13).affinity_cpus == ()
    one_cluster = ClockAbilities(root=False, sdk=33, cpu=(BIG,))
    assert plan_clocks(_clocks(affinity="big"), one_cluster).affinity_cpus == ()
