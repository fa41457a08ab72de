"""The host's half of a run conversation (device_agents/run/farm-run.sh), without any I/O.

The script prints one line per event ("TAG FIELDS"; blocks of raw text as "begin NAME", "| LINE"...,
"end NAME") and, where it says "ask NAME", waits for one line back: go, wait or stop. Here those
lines become typed events (`Assembler`), and `Steering` decides each answer from the gates and
what the phone reported, and keeps what the attempt learnt (`RunReport`). Time is passed in, so
every decision is tested without a phone.

    assembler, steering = Assembler(), Steering(plan)
    for line in lines:
        event = assembler.feed(line)              # None inside a block
        if event is not None:
            reply = steering.on_event(event, now_s)   # Reply for an Ask, else None
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from farm.analysis.discharge import BatteryState
from farm.device.android import (
    THERMAL_HAL_SOURCE,
    parse_dumpsys_battery,
    parse_hal_temperatures,
    parse_thermal_c,
)
from farm.engine import pagecache
from farm.engine.affinity import AffinityReadback, parse_affinity
from farm.engine.onphone import last_achieved_load
from farm.engine.thermal import ThrottleSample, parse_sample

PROTOCOL = 1  # farm-run.sh's PROTO: the host refuses a script that speaks another


class Reply(StrEnum):
    GO = "go"
    WAIT = "wait"
    STOP = "stop"


class Question(StrEnum):
    BATTERY = "battery"
    COOL = "cool"
    SETTLE = "settle"


class ChargingState(StrEnum):
    """Charging switched off (`off`), not (`failed`), back on (`on`) or left off (`stuck`)."""

    OFF = "off"
    FAILED = "failed"
    ON = "on"
    STUCK = "stuck"


class BenchEnd(StrEnum):
    EXITED = "exited"
    TIMEOUT = "timeout"
    STOPPED = "stopped"


# -- events --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    protocol: int
    pid: int | None


@dataclass(frozen=True)
class Block:
    name: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class Ask:
    question: Question


@dataclass(frozen=True)
class Started:
    """A program the script started (sampler, load, bench, memsampler); pid None: it did not."""

    name: str
    pid: int | None


@dataclass(frozen=True)
class Charging:
    state: ChargingState
    way: str | None  # off/on: the root write's way, as the script names it; failed: what the
    # node reads after the failed write ("-": unreadable)


@dataclass(frozen=True)
class BatteryStateSeen:
    """The charger driver's status and level with charging off (`when`: start | end of the
    benchmark)."""

    when: str
    state: BatteryState


@dataclass(frozen=True)
class ScreenSeen:
    """PowerManagerService's wakefulness before the benchmark (`start`) and after it (`end`)."""

    when: str
    wakefulness: str | None


@dataclass(frozen=True)
class LoadExit:
    code: int | None


@dataclass(frozen=True)
class GpuIdle:
    """Before a cell without background load: the GPU counter's last reading (percent; None:
    unreadable) after waiting waited_ms for it to fall within tolerance of idle."""

    busy_pct: int | None
    waited_ms: int


@dataclass(frozen=True)
class Beat:
    elapsed_ms: int


@dataclass(frozen=True)
class Ended:
    how: BenchEnd
    exit_code: int | None


@dataclass(frozen=True)
class Repinned:
    """The script wrote a broken clock pin again (once a run)."""

    at_ms: int
    how: str  # the root way, fixed (performance mode asked again) or failed
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class ScreenRestored:
    """The script put the phone's own screen timeout back."""


@dataclass(frozen=True)
class Data:
    """The bundle's bytes follow: the sizes block said how many."""


@dataclass(frozen=True)
class Done:
    protocol: int


@dataclass(frozen=True)
class ScriptError:
    text: str


@dataclass(frozen=True)
class Unknown:
    line: str


Event = (
    Hello
    | Block
    | Ask
    | Started
    | Charging
    | BatteryStateSeen
    | ScreenSeen
    | ScreenRestored
    | Repinned
    | LoadExit
    | GpuIdle
    | Beat
    | Ended
    | Data
    | Done
    | ScriptError
    | Unknown
)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def parse_line(line: str) -> Event:
    """One line that is not inside a block (pure)."""
    tag, _, rest = line.partition(" ")
    fields = rest.split()
    first = fields[0] if fields else None
    second = fields[1] if len(fields) > 1 else None
    if tag == "hello":
        return Hello(_int(first) or 0, _int(second))
    if tag == "ask" and first in set(Question):
        return Ask(Question(first))
    if tag in ("sampler", "load", "bench", "memsampler"):
        return Started(tag, _int(first))
    if tag == "charging" and first in set(ChargingState):
        return Charging(ChargingState(first), second)
    if tag == "battery-state" and first in ("start", "end"):
        status = rest.split(maxsplit=2)[2] if len(fields) > 2 else "-"
        state = BatteryState(None if status == "-" else status, _int(second))
        return BatteryStateSeen(first, state)
    if tag == "screen" and first in ("start", "end"):
        return ScreenSeen(first, None if second in (None, "-") else second)
    if tag == "repin" and first is not None and second is not None:
        return Repinned(_int(first) or 0, second, tuple(fields[2:]))
    if tag == "screen-timeout" and first == "restored":
        return ScreenRestored()
    if tag == "load-exit":
        return LoadExit(_int(first))
    if tag == "gpu-idle":
        return GpuIdle(_int(first), _int(second) or 0)
    if tag == "beat":
        return Beat(_int(first) or 0)
    if tag == "exit" and first in set(BenchEnd):
        return Ended(BenchEnd(first), _int(second))
    if tag == "data":
        return Data()
    if tag == "done":
        return Done(_int(first) or 0)
    if tag == "error":
        return ScriptError(rest)
    return Unknown(line)


class Assembler:
    """Lines in, events out: a block's lines are gathered until its end (pure, stateful)."""

    def __init__(self) -> None:
        self._name: str | None = None
        self._lines: list[str] = []

    def feed(self, line: str) -> Event | None:
        if self._name is not None:
            if line == f"end {self._name}":
                block = Block(self._name, tuple(self._lines))
                self._name, self._lines = None, []
                return block
            self._lines.append(line[2:] if line.startswith("| ") else line.lstrip("|"))
            return None
        if line.startswith("begin "):
            self._name = line[len("begin ") :].strip()
            return None
        return parse_line(line)


# -- what the attempt learns ---------------------------------------------------------------------


@dataclass(frozen=True)
class SteeringPlan:
    """What the host decides by (from Gates and the job)."""

    min_battery_pct: float
    battery_timeout_s: float
    temp_limit_c: float
    cooldown_timeout_s: float
    load_target: float | None  # None: no background load
    settle_s: float
    tolerance: float


@dataclass
class RunReport:
    """What the conversation told about the attempt (None: not reached)."""

    battery_start_pct: float | None = None
    battery_last_pct: float | None = None
    charging_disabled: bool | None = None
    charging_restored: bool | None = None
    charging_failed_reads: str | None = None  # the node after a failed switch-off
    battery_after_switch: BatteryState | None = None  # the battery's status/level after it
    battery_at_end: BatteryState | None = None  # ... and when the benchmark ended
    screen_start: str | None = None  # wakefulness before the benchmark (Awake | Asleep | ...)
    screen_end: str | None = None  # ... and after it
    screen_restored: bool = False  # the script put the phone's own screen timeout back
    repinned: Repinned | None = None  # the script's last try at writing a broken clock pin again
    repin_tries: int = 0  # how many it made (farm-run.sh repin_if_broken: at most three)
    battery_source: str | None = None  # what the battery gate read: power_supply | dumpsys battery
    temperature_source: str | None = None  # the cooldown gate: thermal nodes | battery (...)
    root_way: str | None = None  # how root writes worked on this phone (script's name)
    temperature_start_c: float | None = None
    cooldown_waited_s: float | None = None
    load_achieved: float | None = None  # at settle
    load_final: float | None = None  # while the benchmark ran (last report)
    load_exit_code: int | None = None
    gpu_idle: GpuIdle | None = None  # the idle-GPU gate of a cell without background load
    started: dict[str, int | None] = field(default_factory=dict)
    bench_end: Ended | None = None
    throttle_samples: list[tuple[float, ThrottleSample]] = field(default_factory=list)
    affinity: AffinityReadback | None = None  # the benchmark's CPU mask, cpuset and cgroups
    # farm-pagecache's lines: the cold files dropped just before the benchmark, and at its end
    page_cache_drop: tuple[str, ...] | None = None
    page_cache_end: tuple[str, ...] | None = None
    environment_text: str | None = None
    sizes: list[tuple[str, int]] = field(default_factory=list)
    oversize: list[tuple[str, int]] = field(default_factory=list)  # files left on the phone: too large
    last_beat_ms: int | None = None
    done: bool = False
    errors: list[str] = field(default_factory=list)


def battery_block_source(text: str) -> str:
    """Which sensor a battery block came from (pure): the script writes the power_supply node's
    capacity/temp as `level:`/`temperature:` lines, dumpsys its own state with a header."""
    return "dumpsys battery" if "Current Battery Service state" in text else "power_supply"


def decide_battery(level_pct: float | None, min_pct: float, waited_s: float, timeout_s: float) -> Reply:
    """Wait for the charger while the level is below the minimum, within the timeout (pure)."""
    if level_pct is None or level_pct >= min_pct or waited_s >= timeout_s:
        return Reply.GO
    return Reply.WAIT


def decide_cool(temp_c: float | None, limit_c: float, waited_s: float, timeout_s: float) -> Reply:
    """Wait while the phone is warmer than the limit, within the cooldown timeout (pure)."""
    if temp_c is None or temp_c <= limit_c or waited_s >= timeout_s:
        return Reply.GO
    return Reply.WAIT


def settle_limit_s(settle_s: float) -> float:
    """The longest the load may take to settle before the benchmark starts anyway."""
    return 3 * settle_s + 5.0


def decide_settle(
    achieved: float | None, target: float, elapsed_s: float, settle_s: float, tolerance: float
) -> Reply:
    """Go once the load held at least settle_s and is within tolerance of the target, or when
    settle_limit_s passed (the note says it was not reached); else wait (pure)."""
    if elapsed_s >= settle_s and achieved is not None and abs(achieved - target) <= tolerance:
        return Reply.GO
    if elapsed_s >= settle_limit_s(settle_s):
        return Reply.GO
    return Reply.WAIT


class Steering:
    """Answers the script's questions and fills a RunReport (pure: `now_s` is passed in)."""

    def __init__(self, plan: SteeringPlan) -> None:
        self.plan = plan
        self.report = RunReport()
        self.cancelled = False
        self._last_battery: float | None = None
        self._last_temp: float | None = None
        self._battery_since: float | None = None
        self._cool_since: float | None = None
        self._load_since: float | None = None
        self._load_last: float | None = None
        self._watch_start: float | None = None

    def on_event(self, event: Event, now_s: float) -> Reply | None:
        report = self.report
        match event:
            case Block(name="battery"):
                battery = parse_dumpsys_battery(event.text)
                source = battery_block_source(event.text)
                report.battery_source = source
                self._last_battery = battery.level_pct
                if report.battery_start_pct is None:
                    report.battery_start_pct = battery.level_pct
                report.battery_last_pct = battery.level_pct
                if self._cool_since is not None:  # no thermal node: the battery's temperature
                    self._last_temp = report.temperature_start_c = battery.temperature_c
                    report.temperature_source = f"battery ({source})"
            case Block(name="temp"):
                # The script asks only when the gate would hold the run: every reading counts.
                temps = [t for t in (parse_thermal_c(line) for line in event.lines) if t is not None]
                self._last_temp = report.temperature_start_c = max(temps) if temps else None
                if temps:
                    report.temperature_source = "thermal nodes"
                if self._cool_since is None:
                    self._cool_since = now_s
                report.cooldown_waited_s = round(now_s - self._cool_since, 3)
            case Block(name="thermalhal"):  # no readable thermal zone: the thermal HAL's readings
                hal = parse_hal_temperatures(event.lines)
                self._last_temp = report.temperature_start_c = max(hal.values()) if hal else None
                if hal:
                    report.temperature_source = THERMAL_HAL_SOURCE
                if self._cool_since is None:
                    self._cool_since = now_s
                report.cooldown_waited_s = round(now_s - self._cool_since, 3)
            case Block(name="load"):
                achieved = last_achieved_load(event.text)
                if achieved is not None:
                    self._load_last = achieved
                    if report.bench_end is not None or "bench" in report.started:
                        report.load_final = achieved
            case Block(name="throttle"):
                if self._watch_start is None:
                    self._watch_start = now_s
                report.throttle_samples.append((now_s - self._watch_start, parse_sample(event.text)))
            case Block(name="affinity"):
                report.affinity = parse_affinity(event.lines)
            case Block(name=pagecache.DROP_BLOCK):
                report.page_cache_drop = tuple(event.lines)
            case Block(name=pagecache.END_BLOCK):
                report.page_cache_end = tuple(event.lines)
            case Block(name="env"):
                report.environment_text = event.text
            case Block(name="sizes"):
                report.sizes = parse_sizes(event.lines)
            case Block(name="big"):
                report.oversize = parse_sizes(event.lines)
            case Ask():
                return self._answer(event.question, now_s)
            case Started():
                report.started[event.name] = event.pid
                if event.name == "load":
                    self._load_since = now_s
            case Charging(state=ChargingState.OFF):
                report.charging_disabled, report.root_way = True, event.way
            case Charging(state=ChargingState.FAILED):
                report.charging_disabled, report.charging_failed_reads = False, event.way
            case Charging(state=ChargingState.ON):
                report.charging_restored, report.root_way = True, event.way
            case Charging(state=ChargingState.STUCK):
                report.charging_restored = False
            case BatteryStateSeen(when="start"):
                report.battery_after_switch = event.state
            case BatteryStateSeen():
                report.battery_at_end = event.state
            case ScreenSeen(when="start"):
                report.screen_start = event.wakefulness
            case ScreenSeen():
                report.screen_end = event.wakefulness
            case ScreenRestored():
                report.screen_restored = True
            case Repinned():
                report.repinned = event
                report.repin_tries += 1
            case LoadExit():
                report.load_exit_code = event.code
            case GpuIdle():
                report.gpu_idle = event
            case Beat():
                report.last_beat_ms = event.elapsed_ms
            case Ended():
                report.bench_end = event
            case Done():
                report.done = True
            case ScriptError():
                report.errors.append(event.text)
        return None

    def _answer(self, question: Question, now_s: float) -> Reply:
        if self.cancelled:
            return Reply.STOP
        plan, report = self.plan, self.report
        if question is Question.BATTERY:
            self._battery_since = self._battery_since if self._battery_since is not None else now_s
            waited = now_s - self._battery_since
            return decide_battery(self._last_battery, plan.min_battery_pct, waited, plan.battery_timeout_s)
        if question is Question.COOL:
            since = self._cool_since if self._cool_since is not None else now_s
            waited = now_s - since
            report.cooldown_waited_s = round(waited, 3)
            report.temperature_start_c = self._last_temp
            return decide_cool(self._last_temp, plan.temp_limit_c, waited, plan.cooldown_timeout_s)
        # settle
        if report.load_exit_code is not None:
            return Reply.STOP  # gpuload died: the run fails (the lifecycle says why)
        report.load_achieved = self._load_last
        since = self._load_since if self._load_since is not None else now_s
        if plan.load_target is None:
            return Reply.GO
        return decide_settle(self._load_last, plan.load_target, now_s - since, plan.settle_s, plan.tolerance)


def parse_sizes(lines: tuple[str, ...] | list[str]) -> list[tuple[str, int]]:
    """`wc -c` output: (name, size) per file in order, its `total` line left out (pure)."""
    sizes = []
    for line in lines:
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].isdigit() and parts[1] != "total":
            sizes.append((parts[1], int(parts[0])))
    return sizes
