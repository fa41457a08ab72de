"""The run script's `affinity` block read back (farm.engine.affinity), and its validity flag."""

from __future__ import annotations

from farm.analysis.validity import Check, Concern, Requirements, assess
from farm.engine.affinity import cpus_of, parse_affinity
from farm.engine.measurement import affinity_as_requested

NARROWED = (
    "requested f",
    "comm sh",
    "pid 4242's current affinity mask: c",  # toybox taskset -p
    "cpuset /foreground",
    "cgroup 4:cpuset:/foreground",
    "cgroup 0::/uid_2000/pid_4242",
)


def test_a_narrowed_mask_is_recorded_with_its_cgroups_and_a_note() -> None:
    readback = parse_affinity(NARROWED)
    assert (readback.requested_mask, readback.effective_mask, readback.narrowed) == (0xF, 0xC, True)
    assert readback.cpuset == "/foreground" and readback.comm == "sh"
    assert readback.cgroups == ("4:cpuset:/foreground", "0::/uid_2000/pid_4242")
    assert readback.note() == (
        "the kernel narrowed the benchmark's CPU mask f (CPUs 0-3) to c (CPUs 2-3): its cpuset "
        "/foreground does not hold every CPU asked for"
    )
    assert readback.to_json()["effective"] == "c" and affinity_as_requested(readback) is False


def test_a_mask_in_force_as_asked_is_no_note() -> None:
    readback = parse_affinity(("requested 80", "pid 7's current affinity mask: 80", "cpuset /"))
    assert readback.narrowed is False and readback.note() is None
    assert affinity_as_requested(readback) is True


def test_no_taskset_or_no_reading_is_no_judgement() -> None:
    unpinned = parse_affinity(("requested -", "pid 7's current affinity mask: ff"))
    assert unpinned.requested_mask is None and unpinned.narrowed is None
    gone = parse_affinity(("requested f", "taskset: failed to get pid 7's affinity: No such process"))
    assert gone.effective_mask is None and gone.narrowed is None
    assert affinity_as_requested(gone) is None and affinity_as_requested(None) is None


def test_the_flag_makes_the_run_invalid() -> None:
    metrics = {"measured_s": 2.0, "iterations_measured": 10.0}
    required = Requirements(min_seconds=1.0, min_iterations=5)
    flagged = assess(metrics, required, charging_disabled=None, clocks_ok=None, affinity_as_requested=False)
    assert flagged.flags[Check.AFFINITY_AS_REQUESTED] is False and not flagged.valid(Concern.LATENCY)
    unjudged = assess(metrics, required, charging_disabled=None, clocks_ok=None)
    assert Check.AFFINITY_AS_REQUESTED not in unjudged.flags and unjudged.valid(Concern.LATENCY)


def test_cpu_lists() -> None:
    assert (cpus_of(0x70), cpus_of(0x85), cpus_of(0xFF), cpus_of(0x1)) == ("4-6", "0,2,7", "0-7", "0")
