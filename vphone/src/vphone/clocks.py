"""The phone's clocks as its kernel keeps them (pure): cpufreq policies, the GPU's devfreq with
kgsl's power levels, CPU hotplug, and the caps put on them by heat and fixed performance mode.

Root's writes to the sysfs nodes arrive here as text (`apply_write`) and are judged the way the
kernel's store handlers judge them: a governor that is not available, a non-number, setspeed
without the userspace governor, offlining the last CPU -> an errno and no change. A number
between or beyond the table's entries is not refused: cpufreq resolves scaling_{min,max}_freq to
table entries (RELATION_L / RELATION_H, Linux 5.16+) and devfreq clamps min/max_freq to its OPP
range, so a read-back shows what is in force, which may differ from what was written. A min
above the max (or a max below the min) is refused (EINVAL) by kernels before PM QoS limits
(cpufreq_set_policy's `new_policy->min > new_policy->max` until 5.3, devfreq's min/max_freq_store
until 5.5; profile `cpu.limits_qos: false`); with QoS it is kept and the max wins.

What work runs at ("work" frequency, which the physics turns into the CFS quota):
  performance, and every load-following governor (schedutil, walt, interactive...): the policy's
    max, i.e. a governor that ramps up instantly when there is work; powersave: its min;
  userspace: scaling_setspeed, clamped to [min, max].
The phone's CPU speed (0..1] is that of its fastest online core: max over clusters with an online
CPU of capacity * work_khz / top_khz, over the SoC's largest capacity. A single-threaded benchmark
runs on that core; pinning the little cluster alone therefore changes nothing, as on a phone.
"""

from __future__ import annotations

import enum
import errno
import re
from dataclasses import dataclass, replace

from vphone.power import pick_frequency
from vphone.profile import GpuKind, Profile

UINT_MAX = 2**32 - 1
GOVERNOR_NAME_MAX = 15  # cpufreq's CPUFREQ_NAME_LEN - 1: sscanf("%15s")


class GovernorKind(enum.Enum):
    LOAD_FOLLOWING = "load-following"  # schedutil, walt, interactive, ondemand, msm-adreno-tz...
    PERFORMANCE = "performance"
    POWERSAVE = "powersave"
    USERSPACE = "userspace"


def governor_kind(name: str) -> GovernorKind:
    for kind in (GovernorKind.PERFORMANCE, GovernorKind.POWERSAVE, GovernorKind.USERSPACE):
        if name == kind.value:
            return kind
    return GovernorKind.LOAD_FOLLOWING


class Knob(enum.Enum):
    """A writable clock node (its index says which policy / CPU)."""

    SCALING_GOVERNOR = "scaling_governor"
    SCALING_MIN = "scaling_min_freq"
    SCALING_MAX = "scaling_max_freq"
    SCALING_SETSPEED = "scaling_setspeed"
    CPU_ONLINE = "online"
    GPU_GOVERNOR = "governor"
    GPU_MIN = "min_freq"
    GPU_MAX = "max_freq"
    KGSL_MAX_PWRLEVEL = "max_pwrlevel"
    KGSL_MIN_PWRLEVEL = "min_pwrlevel"
    KGSL_FORCE_CLK_ON = "force_clk_on"


@dataclass(frozen=True)
class Domain:
    """Static facts of one frequency domain: a cpufreq policy (kHz) or the GPU (Hz)."""

    name: str
    table: tuple[int, ...]  # ascending
    governors: tuple[str, ...]
    first_cpu: int = 0
    cpus: int = 0
    capacity: int = 1024

    @property
    def top(self) -> int:
        return self.table[-1]

    def resolve_low(self, value: int) -> int:
        """The lowest table entry >= value (the top one when none is): CPUFREQ_RELATION_L."""
        return next((f for f in self.table if f >= value), self.table[-1])

    def resolve_high(self, value: int) -> int:
        """The highest table entry <= value (the bottom one when none is): CPUFREQ_RELATION_H."""
        return next((f for f in reversed(self.table) if f <= value), self.table[0])

    def cap_at(self, steps: int) -> int:
        """The highest frequency a cooling device `steps` states deep still allows."""
        return self.table[max(0, len(self.table) - 1 - steps)]


@dataclass(frozen=True)
class Request:
    """What root asked one domain for (the kernel's QoS requests), not yet combined with caps."""

    governor: str
    min_req: int
    max_req: int
    setspeed: int = 0  # userspace governor's target; set to the current frequency when it starts


@dataclass(frozen=True)
class Kgsl:
    """kgsl power levels: level 0 is the fastest; max_pwrlevel caps, min_pwrlevel floors."""

    max_pwrlevel: int
    min_pwrlevel: int
    force_clk_on: bool = False


@dataclass(frozen=True)
class ClockState:
    policies: tuple[Request, ...]
    gpu: Request | None
    kgsl: Kgsl | None
    online: tuple[bool, ...]  # per CPU
    fixed_performance: bool = False
    cpu_cap_steps: tuple[int, ...] = ()  # per policy: its cpufreq cooling device's cur_state
    gpu_cap_steps: int = 0


@dataclass(frozen=True)
class WriteResult:
    state: ClockState
    error: int | None  # errno the kernel's store would return; None: accepted
    message: str = ""  # kernel-log style reason when refused


@dataclass(frozen=True)
class Limits:
    low: int
    high: int


class SocClocks:
    """The clock domains of one profile and the rules that combine requests with caps."""

    def __init__(self, profile: Profile) -> None:
        cpu = profile.cpu
        self.profile = profile
        self.policies = tuple(
            Domain(
                name=f"policy{first}",
                table=c.freqs_khz,
                governors=cpu.available_governors,
                first_cpu=first,
                cpus=c.cpus,
                capacity=c.capacity,
            )
            for c, first in zip(cpu.clusters, cpu.first_cpus(), strict=True)
        )
        self.ncpu = cpu.ncpu
        self.max_capacity = max(d.capacity for d in self.policies)
        gpu = profile.gpu
        self.gpu = None if gpu is None else Domain("gpu", gpu.freqs_hz, gpu.available_governors)
        self.has_kgsl = gpu is not None and gpu.kind is GpuKind.ADRENO
        self.limits_qos = cpu.limits_qos
        fixed = profile.fixed_performance
        self.fixed_cpu_khz = fixed.cpu_khz if fixed is not None else None
        self.fixed_gpu_hz = fixed.gpu_hz if fixed is not None else None

    # -- state ----------------------------------------------------------------------------------

    def initial(self) -> ClockState:
        governor = self.profile.cpu.governor
        policies = tuple(Request(governor, d.table[0], d.table[-1]) for d in self.policies)
        gpu = None
        kgsl = None
        if self.gpu is not None:
            assert self.profile.gpu is not None
            gpu = Request(self.profile.gpu.boot_governor, self.gpu.table[0], self.gpu.table[-1])
            if self.has_kgsl:
                kgsl = Kgsl(max_pwrlevel=0, min_pwrlevel=len(self.gpu.table) - 1)
        return ClockState(
            policies=policies,
            gpu=gpu,
            kgsl=kgsl,
            online=(True,) * self.ncpu,
            cpu_cap_steps=(0,) * len(self.policies),
        )

    def policy_of_cpu(self, cpu: int) -> int:
        for i, d in enumerate(self.policies):
            if d.first_cpu <= cpu < d.first_cpu + d.cpus:
                return i
        raise ValueError(f"no CPU {cpu}")

    def policy_online_cpus(self, state: ClockState, policy: int) -> tuple[int, ...]:
        d = self.policies[policy]
        return tuple(c for c in range(d.first_cpu, d.first_cpu + d.cpus) if state.online[c])

    @property
    def fixed_performance_supported(self) -> bool:
        return self.fixed_cpu_khz is not None

    # -- CPU policies -----------------------------------------------------------------------------

    def policy_limits(self, state: ClockState, i: int) -> Limits:
        """scaling_min_freq / scaling_max_freq as read back: the requests written (by root, or by
        the power HAL: fixed performance mode is its writes, vphone.powerhal) and the thermal
        cap combined, resolved to table entries; the max wins over the min."""
        d, req = self.policies[i], state.policies[i]
        cap = d.cap_at(state.cpu_cap_steps[i]) if state.cpu_cap_steps else d.top
        high = d.resolve_high(min(req.max_req, cap))
        low = min(d.resolve_low(req.min_req), high)
        return Limits(low, high)

    def policy_work_khz(self, state: ClockState, i: int) -> int:
        d, req, lim = self.policies[i], state.policies[i], self.policy_limits(state, i)
        kind = governor_kind(req.governor)
        if kind is GovernorKind.POWERSAVE:
            return lim.low
        if kind is GovernorKind.USERSPACE:
            return d.resolve_low(min(max(req.setspeed, lim.low), lim.high))
        return lim.high

    def policy_cur_khz(self, state: ClockState, i: int, utilisation: float) -> int:
        """scaling_cur_freq: load-following governors pick from the allowed range by load."""
        req, lim = state.policies[i], self.policy_limits(state, i)
        if governor_kind(req.governor) is not GovernorKind.LOAD_FOLLOWING:
            return self.policy_work_khz(state, i)
        allowed = tuple(f for f in self.policies[i].table if lim.low <= f <= lim.high)
        return pick_frequency(allowed or (lim.high,), utilisation)

    def cpu_speed(self, state: ClockState, within: tuple[int, ...] | None = None) -> float:
        """Speed of the fastest online core (among the CPUs `within`, e.g. a cpuset's) relative
        to the SoC's fastest core at its top clock; 0 when none of them is online."""
        best = 0.0
        for i, d in enumerate(self.policies):
            cpus = self.policy_online_cpus(state, i)
            if within is not None:
                cpus = tuple(c for c in cpus if c in within)
            if cpus:
                best = max(best, d.capacity * self.policy_work_khz(state, i) / d.top)
        return best / self.max_capacity

    # -- GPU ----------------------------------------------------------------------------------------

    def gpu_limits(self, state: ClockState) -> Limits:
        """devfreq min_freq / max_freq as read back (Hz): requests clamped to the OPPs the thermal
        cap and kgsl's power levels leave; not resolved to OPPs, as devfreq shows them."""
        d, req = self.gpu, state.gpu
        assert d is not None and req is not None
        opp_high = d.cap_at(state.gpu_cap_steps)
        opp_low = d.table[0]
        n = len(d.table)
        if state.kgsl is not None:
            opp_high = min(opp_high, d.table[n - 1 - state.kgsl.max_pwrlevel])
            opp_low = max(opp_low, d.table[n - 1 - state.kgsl.min_pwrlevel])
        if state.fixed_performance and self.fixed_gpu_hz is not None:
            pinned = min(self.fixed_gpu_hz, opp_high)
            return Limits(pinned, pinned)
        high = max(min(req.max_req, opp_high), d.table[0])
        low = min(max(req.min_req, opp_low), high)
        return Limits(low, high)

    def gpu_work_hz(self, state: ClockState) -> int:
        d, req = self.gpu, state.gpu
        assert d is not None and req is not None
        lim = self.gpu_limits(state)
        if governor_kind(req.governor) is GovernorKind.POWERSAVE:
            return d.resolve_low(lim.low)
        return d.resolve_high(lim.high)

    def gpu_cur_hz(self, state: ClockState, busy: float) -> int:
        d, req = self.gpu, state.gpu
        assert d is not None and req is not None
        if governor_kind(req.governor) is not GovernorKind.LOAD_FOLLOWING:
            return self.gpu_work_hz(state)
        lim = self.gpu_limits(state)
        allowed = tuple(f for f in d.table if lim.low <= f <= lim.high)
        return pick_frequency(allowed or (d.resolve_high(lim.high),), busy)

    def gpu_speed(self, state: ClockState) -> float:
        if self.gpu is None:
            return 1.0
        return self.gpu_work_hz(state) / self.gpu.top

    # -- writes -------------------------------------------------------------------------------------

    def apply_write(self, state: ClockState, knob: Knob, index: int, text: str) -> WriteResult:
        """Root wrote `text` to a clock node: the new state, or the errno the kernel returns."""
        try:
            return WriteResult(self._apply(state, knob, index, text), None)
        except _Refused as refused:
            return WriteResult(state, refused.errno, refused.message)

    def _apply(self, state: ClockState, knob: Knob, i: int, text: str) -> ClockState:
        if knob in (Knob.SCALING_GOVERNOR, Knob.SCALING_MIN, Knob.SCALING_MAX, Knob.SCALING_SETSPEED):
            return self._apply_policy(state, knob, i, text)
        if knob is Knob.CPU_ONLINE:
            online = _parse_bool(text)
            if not online and sum(state.online) == 1 and state.online[i]:
                raise _Refused(errno.EBUSY, f"cpu{i}: cannot take the last online CPU down")
            flags = list(state.online)
            flags[i] = online
            return replace(state, online=tuple(flags))
        if knob in (Knob.GPU_GOVERNOR, Knob.GPU_MIN, Knob.GPU_MAX):
            return self._apply_gpu(state, knob, text)
        return self._apply_kgsl(state, knob, text)

    def _apply_policy(self, state: ClockState, knob: Knob, i: int, text: str) -> ClockState:
        d, req = self.policies[i], state.policies[i]
        if knob is Knob.SCALING_GOVERNOR:
            name = _first_word(text)[:GOVERNOR_NAME_MAX].lower()
            match = next((g for g in d.governors if g.lower() == name), None)
            if match is None:
                raise _Refused(errno.EINVAL, f"cpufreq: {d.name}: governor {name!r} is not available")
            new = replace(req, governor=match)
            if governor_kind(match) is GovernorKind.USERSPACE and governor_kind(req.governor) is not (
                GovernorKind.USERSPACE
            ):
                new = replace(new, setspeed=self.policy_cur_khz(state, i, 1.0))
        elif knob is Knob.SCALING_SETSPEED:
            if governor_kind(req.governor) is not GovernorKind.USERSPACE:
                raise _Refused(
                    errno.EINVAL, f"cpufreq: {d.name}: scaling_setspeed needs the userspace governor"
                )
            new = replace(req, setspeed=_parse_uint(text))
        elif knob is Knob.SCALING_MIN:
            new = replace(req, min_req=_parse_uint(text))
        else:
            new = replace(req, max_req=_parse_uint(text))
        if not self.limits_qos and new.min_req > new.max_req:
            raise _Refused(errno.EINVAL, f"cpufreq: {d.name}: min {new.min_req} above max {new.max_req} kHz")
        policies = list(state.policies)
        policies[i] = new
        return replace(state, policies=tuple(policies))

    def _apply_gpu(self, state: ClockState, knob: Knob, text: str) -> ClockState:
        d, req = self.gpu, state.gpu
        if d is None or req is None:
            raise _Refused(errno.ENODEV, "devfreq: no GPU")
        if knob is Knob.GPU_GOVERNOR:
            name = _first_word(text)
            if name not in d.governors:
                raise _Refused(errno.EINVAL, f"devfreq: gpu: governor {name!r} is not available")
            return replace(state, gpu=replace(req, governor=name))
        value = _parse_ulong(text)
        if knob is Knob.GPU_MAX and value == 0:
            # 0 means no limit: max_freq_store takes the table's top OPP (before 5.5) or the QoS
            # default (5.5+), so max_freq reads back the top, not the lowest OPP.
            value = d.table[-1]
        new = replace(req, min_req=value) if knob is Knob.GPU_MIN else replace(req, max_req=value)
        if not self.limits_qos and value and new.min_req > new.max_req:  # 0: no limit, never refused
            raise _Refused(errno.EINVAL, f"devfreq: gpu: min {new.min_req} above max {new.max_req} Hz")
        return replace(state, gpu=new)

    def _apply_kgsl(self, state: ClockState, knob: Knob, text: str) -> ClockState:
        kgsl, d = state.kgsl, self.gpu
        if kgsl is None or d is None:
            raise _Refused(errno.ENODEV, "kgsl: no such node")
        value = _parse_kstrtouint(text)
        if knob is Knob.KGSL_FORCE_CLK_ON:
            return replace(state, kgsl=replace(kgsl, force_clk_on=value != 0))
        lowest = len(d.table) - 1
        level = min(value, lowest)
        if knob is Knob.KGSL_MAX_PWRLEVEL:
            new = replace(kgsl, max_pwrlevel=level, min_pwrlevel=max(kgsl.min_pwrlevel, level))
        else:
            new = replace(kgsl, min_pwrlevel=level, max_pwrlevel=min(kgsl.max_pwrlevel, level))
        return replace(state, kgsl=new)

    # -- caps ---------------------------------------------------------------------------------------

    def with_caps(self, state: ClockState, cpu_steps: tuple[int, ...], gpu_steps: int) -> ClockState:
        return replace(state, cpu_cap_steps=cpu_steps, gpu_cap_steps=gpu_steps)

    def with_fixed_performance(self, state: ClockState, enabled: bool) -> ClockState:
        return replace(state, fixed_performance=enabled and self.fixed_performance_supported)


class _Refused(Exception):
    def __init__(self, err: int, message: str) -> None:
        super().__init__(message)
        self.errno = err
        self.message = message


_UINT = re.compile(r"\s*([+-]?)(\d+)")


def _parse_uint(text: str) -> int:
    """sscanf("%u"): leading blanks, an optional sign, digits; trailing text is ignored. A minus
    wraps around as in C, so `-1` asks for the top frequency."""
    m = _UINT.match(text)
    if m is None:
        raise _Refused(errno.EINVAL, f"not a number: {text.strip()!r}")
    value = int(m.group(2))
    if m.group(1) == "-":
        value = -value
    return value % (UINT_MAX + 1)


def _parse_ulong(text: str) -> int:
    """sscanf("%lu") for devfreq's Hz values (no 32-bit wrap needed at GPU clocks)."""
    m = _UINT.match(text)
    if m is None or m.group(1) == "-":
        raise _Refused(errno.EINVAL, f"not a number: {text.strip()!r}")
    return int(m.group(2))


def _parse_kstrtouint(text: str) -> int:
    """kstrtouint: the whole write must be one unsigned number (one trailing newline allowed)."""
    body = text[:-1] if text.endswith("\n") else text
    if not re.fullmatch(r"\+?\d+", body):
        raise _Refused(errno.EINVAL, f"not an unsigned integer: {text.strip()!r}")
    return int(body)


def _parse_bool(text: str) -> bool:
    """kstrtobool: 1/y/Y/on -> true, 0/n/N/off -> false; anything else is EINVAL."""
    t = text.strip().lower()
    if t[:1] in ("1", "y") or t[:2] == "on":
        return True
    if t[:1] in ("0", "n") or t[:3] == "off" or t[:2] == "of":
        return False
    raise _Refused(errno.EINVAL, f"not a boolean: {text.strip()!r}")


def _first_word(text: str) -> str:
    words = text.split()
    return words[0] if words else ""
