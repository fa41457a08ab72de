"""The host's decisions over the run script's lines (farm.engine.steering), without a phone."""

from __future__ import annotations

from farm.engine.steering import (
    Ask,
    Assembler,
    BenchEnd,
    Block,
    Ended,
    Question,
    Reply,
    Started,
    Steering,
    SteeringPlan,
    decide_battery,
    decide_cool,
    decide_settle,
    parse_line,
    parse_sizes,
    settle_limit_s,
)

PLAN = SteeringPlan(
    min_battery_pct=20.0,
    battery_timeout_s=60.0,
    temp_limit_c=40.0,
    cooldown_timeout_s=30.0,
    load_target=0.5,
    settle_s=2.0,
    tolerance=0.1,
)


def feed(steering: Steering, assembler: Assembler, lines: list[str], now_s: float) -> list[Reply]:
    replies = []
    for line in lines:
        event = assembler.feed(line)
        if event is not None:
            reply = steering.on_event(event, now_s)
            if reply is not None:
                replies.append(reply)
    return replies


def test_blocks_are_gathered_and_lines_become_typed_events() -> None:
    assembler = Assembler()
    assert assembler.feed("begin temp") is None
    assert assembler.feed("| 41000") is None
    assert assembler.feed("| ") is None  # an empty raw line stays a line
    assert assembler.feed("end temp") == Block("temp", ("41000", ""))
    assert assembler.feed("ask cool") == Ask(Question.COOL)
    assert assembler.feed("bench 1234") == Started("bench", 1234)
    assert assembler.feed("memsampler none") == Started("memsampler", None)
    assert parse_line("exit timeout 137") == Ended(BenchEnd.TIMEOUT, 137)
    assert parse_line("exit exited none") == Ended(BenchEnd.EXITED, None)


def test_a_block_line_that_looks_like_an_event_stays_raw_text() -> None:
    assembler = Assembler()
    assembler.feed("begin battery")
    assembler.feed("| done 1")
    assert assembler.feed("end battery") == Block("battery", ("done 1",))


def test_battery_gate_waits_below_the_minimum_until_its_timeout() -> None:
    assert decide_battery(15.0, 20.0, 0.0, 60.0) is Reply.WAIT
    assert decide_battery(15.0, 20.0, 60.0, 60.0) is Reply.GO
    assert decide_battery(20.0, 20.0, 0.0, 60.0) is Reply.GO
    assert decide_battery(None, 20.0, 0.0, 60.0) is Reply.GO  # unreadable: do not hold the run


def test_cooldown_waits_while_hot_within_its_timeout() -> None:
    assert decide_cool(45.0, 40.0, 1.0, 30.0) is Reply.WAIT
    assert decide_cool(45.0, 40.0, 30.0, 30.0) is Reply.GO
    assert decide_cool(40.0, 40.0, 0.0, 30.0) is Reply.GO


def test_settle_needs_the_minimum_time_and_the_tolerance_or_gives_up_at_the_limit() -> None:
    assert decide_settle(0.5, 0.5, 1.0, 2.0, 0.1) is Reply.WAIT  # on target, too early
    assert decide_settle(0.55, 0.5, 2.0, 2.0, 0.1) is Reply.GO
    assert decide_settle(0.2, 0.5, 5.0, 2.0, 0.1) is Reply.WAIT
    assert decide_settle(0.2, 0.5, settle_limit_s(2.0), 2.0, 0.1) is Reply.GO
    assert decide_settle(None, 0.5, 3.0, 2.0, 0.1) is Reply.WAIT


def test_a_whole_conversation_fills_the_report() -> None:
    steering, assembler = Steering(PLAN), Assembler()
    battery = ["begin battery", "| Current Battery Service state:", "|   level: 15", "end battery"]
    assert feed(steering, assembler, ["hello 1 99", *battery, "ask battery"], 0.0) == [Reply.WAIT]
    battery[2] = "|   level: 25"
    assert feed(steering, assembler, [*battery, "ask battery"], 5.0) == [Reply.GO]
    assert steering.report.battery_start_pct == 15.0 and steering.report.battery_last_pct == 25.0
    feed(steering, assembler, ["charging off su-0"], 5.0)
    hot = ["begin temp", "| 45000", "| x", "end temp", "ask cool"]
    assert feed(steering, assembler, hot, 6.0) == [Reply.WAIT]
    cool = ["begin temp", "| 39000", "end temp", "ask cool"]
    assert feed(steering, assembler, cool, 8.5) == [Reply.GO]
    assert steering.report.temperature_start_c == 39.0 and steering.report.cooldown_waited_s == 2.5
    load = ["begin load", '| {"event":"load","achieved":0.52}', "end load", "ask settle"]
    feed(steering, assembler, ["sampler 10", "load 11"], 9.0)
    assert feed(steering, assembler, load, 10.0) == [Reply.WAIT]
    assert feed(steering, assembler, load, 11.0) == [Reply.GO]
    assert steering.report.load_achieved == 0.52
    throttle = ["begin throttle", "| cpu /p0 1800000", "| Thermal Status: 0", "end throttle"]
    lines = ["bench 12", "memsampler 13", *throttle, "beat 0", "beat 1000", "exit exited 0", *throttle]
    lines += ["charging on su-0", "begin env", "| cpufreq /p0 schedutil 1800000", "end env"]
    lines += ["begin sizes", "| 12 bench.out", "|  0 bench.err", "| 12 total", "end sizes", "done 1"]
    assert feed(steering, assembler, lines, 12.0) == []
    report = steering.report
    assert report.charging_disabled is True and report.charging_restored is True
    assert report.root_way == "su-0"
    assert report.started == {"sampler": 10, "load": 11, "bench": 12, "memsampler": 13}
    assert report.bench_end == Ended(BenchEnd.EXITED, 0) and report.done
    assert len(report.throttle_samples) == 2
    assert report.throttle_samples[0][1].cpu_max_khz == {"/p0": 1800000}
    assert report.sizes == [("bench.out", 12), ("bench.err", 0)]
    assert report.environment_text == "cpufreq /p0 schedutil 1800000"


def test_cancel_answers_stop_and_a_dead_load_stops_the_run() -> None:
    steering = Steering(PLAN)
    steering.cancelled = True
    assert steering.on_event(Ask(Question.COOL), 0.0) is Reply.STOP
    steering = Steering(PLAN)
    assembler = Assembler()
    assert feed(steering, assembler, ["load 5", "load-exit 3", "ask settle"], 1.0) == [Reply.STOP]
    assert steering.report.load_exit_code == 3


def test_without_a_thermal_node_the_battery_temperature_gates_the_run() -> None:
    steering, assembler = Steering(PLAN), Assembler()
    lines = ["begin temp", "end temp", "begin battery", "|   temperature: 450", "end battery", "ask cool"]
    assert feed(steering, assembler, lines, 0.0) == [Reply.WAIT]
    assert steering.report.temperature_start_c == 45.0


def test_wc_sizes_leave_out_the_total() -> None:
    sizes = parse_sizes(["  10 trace.bin", "   0 bench.err", "  10 total"])
    assert sizes == [("trace.bin", 10), ("bench.err", 0)]
    assert parse_sizes(["5 bench.out"]) == [("bench.out", 5)]


def test_the_idle_gpu_gate_line_is_read_into_the_report() -> None:
    from farm.engine.steering import GpuIdle, parse_line

    assert parse_line("gpu-idle 3 700") == GpuIdle(3, 700)
    assert parse_line("gpu-idle - 0") == GpuIdle(None, 0)  # the counter could not be read
    steering = Steering(
        SteeringPlan(
            min_battery_pct=20,
            battery_timeout_s=60,
            temp_limit_c=40,
            cooldown_timeout_s=60,
            load_target=None,
            settle_s=1,
            tolerance=0.05,
        )
    )
    assert steering.on_event(GpuIdle(42, 6000), 0.0) is None
    assert steering.report.gpu_idle == GpuIdle(42, 6000)
