"""farm-pagecache's lines read back (farm.engine.pagecache), the cold-start judgement and its
metrics, and the run script's blocks that carry them."""

from __future__ import annotations

from farm.engine.pagecache import cold_start_metrics, page_cache_of, parse_residency
from farm.engine.steering import Assembler, Steering, SteeringPlan

PLAN = SteeringPlan(
    min_battery_pct=5.0,
    battery_timeout_s=60.0,
    temp_limit_c=90.0,
    cooldown_timeout_s=30.0,
    load_target=None,
    settle_s=1.0,
    tolerance=0.1,
)

MODEL = "/data/local/tmp/farm/assets/ab12/tinyllama-s-q4_0.gguf"
DROPPED = (f"pages=724 resident=724 drop=ok resident_after=0 counts=cache path={MODEL}",)
AT_END = (f"pages=724 resident=724 drop=- resident_after=- counts=cache path={MODEL}",)


def test_a_drop_that_took_is_a_cold_start_and_its_first_load_the_cold_load() -> None:
    report = page_cache_of([MODEL], DROPPED, AT_END)
    (file,) = report.at_drop or ()
    assert (file.pages, file.resident, file.dropped, file.resident_after) == (724, 724, True, 0)
    assert report.cold_reason() is None and report.resident_fraction_after_drop() == 0.0
    got = {m.name: m.value for m in cold_start_metrics(report, {"model_load_ms": 61.5})}
    assert got == {"cold_start_valid": 1.0, "cold_resident_after_drop_pct": 0.0, "model_load_cold_ms": 61.5}
    document = report.to_json()
    assert document["cold"] is True and document["at_end"] == [{"path": MODEL, "pages": 724, "resident": 724}]


def test_pages_left_after_the_drop_make_the_cold_load_invalid_with_the_reason() -> None:
    report = page_cache_of(
        [MODEL], (f"pages=724 resident=724 drop=ok resident_after=300 counts=cache path={MODEL}",), AT_END
    )
    reason = report.cold_reason()
    assert reason is not None and reason.startswith(f"300 of 724 pages of {MODEL} still in the page cache")
    got = {m.name: m.value for m in cold_start_metrics(report, {"model_load_ms": 20.0})}
    assert got["cold_start_valid"] == 0.0 and got["model_load_cold_ms"] == 20.0
    assert got["cold_resident_after_drop_pct"] == 100.0 * 300 / 724
    assert report.to_json()["not_cold_because"] == reason
    # 1% of the pages is still out of the cache (a page touched since); more is not
    assert (
        page_cache_of(
            [MODEL], (f"pages=724 resident=9 drop=ok resident_after=7 counts=cache path={MODEL}",), None
        ).cold_reason()
        is None
    )
    assert page_cache_of(
        [MODEL], (f"pages=724 resident=9 drop=ok resident_after=8 counts=cache path={MODEL}",), None
    ).cold_reason()


def test_an_agent_error_a_missing_file_or_no_drop_at_all_is_said() -> None:
    failed = page_cache_of([MODEL], (f"error=EACCES at=open path={MODEL}",), None)
    assert failed.cold_reason() == f"farm-pagecache could not drop {MODEL}: EACCES at open"
    silent = page_cache_of([MODEL], ("sh: /data/local/tmp/farm/bin/farm-pagecache: not found",), None)
    assert silent.cold_reason() == f"farm-pagecache did not report {MODEL} (is the agent deployed?)"
    never = page_cache_of([MODEL], None, None)
    assert never.cold_reason() is not None and "ended before its program started" in never.cold_reason()
    assert never.resident_fraction_after_drop() is None
    assert [m.name for m in cold_start_metrics(never, {})] == ["cold_start_valid"]
    assert cold_start_metrics(None, {"model_load_ms": 5.0}) == []


def test_a_path_with_spaces_is_kept_whole_and_an_empty_file_has_no_pages() -> None:
    (file,) = parse_residency(
        ["pages=0 resident=0 drop=ok resident_after=0 counts=cache path=/sdcard/my models/a b.gguf"]
    )
    assert file.path == "/sdcard/my models/a b.gguf" and file.pages == 0
    report = page_cache_of(
        ["/sdcard/my models/a b.gguf"],
        ["pages=0 resident=0 drop=ok resident_after=0 counts=cache path=/sdcard/my models/a b.gguf"],
        None,
    )
    assert report.cold_reason() is None and report.resident_fraction_after_drop() is None


def test_the_scripts_pagecache_blocks_reach_the_report() -> None:
    steering, assembler = Steering(PLAN), Assembler()
    lines = ["begin pagecache", *(f"| {line}" for line in DROPPED), "end pagecache", "bench 12"]
    lines += ["exit exited 0", "begin pagecache-end", *(f"| {line}" for line in AT_END), "end pagecache-end"]
    for line in lines:
        event = assembler.feed(line)
        if event is not None:
            steering.on_event(event, 0.0)
    report = steering.report
    assert report.page_cache_drop == DROPPED and report.page_cache_end == AT_END
    assert page_cache_of([MODEL], report.page_cache_drop, report.page_cache_end).cold_reason() is None


def test_a_count_of_a_file_the_shell_user_neither_owns_nor_may_write_proves_nothing() -> None:
    line = f"pages=724 resident=0 drop=ok resident_after=0 counts=own-mappings path={MODEL}"
    report = page_cache_of([MODEL], (line,), None)
    reason = report.cold_reason()
    assert reason is not None and "proves nothing" in reason
    assert report.to_json()["at_drop"] == [
        {"path": MODEL, "pages": 724, "resident": 0, "resident_after_drop": 0, "counts": "own-mappings"}
    ]
