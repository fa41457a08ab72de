"""The phone's SoC over time, without I/O: its clock state (clocks.py) as root's writes, fixed
performance mode and heat change it, the step_wise cooling polls (thermal.py), the frequency
statistics the kernel keeps (time_in_state, total_trans), and the CFS quotas that make work run
at the clocks the phone shows.

Quotas: each thread of the phone's CPU work runs at the speed of its fastest online core
(clocks.cpu_speed), so the phone's CPU quota is speed x the threads that want a core (at least
one, at most budget_cores): a pinned single-threaded benchmark slows by exactly the clock ratio
while a benchmark and a load generator side by side do not starve each other. A cpuset group
(or a taskset pin, affinity.py) gets the speed of the fastest core among its CPUs and at most a
host core per CPU; the PoCL "GPU" gpu_budget x GPU clock / top
GPU clock (one GPU, shared by every OpenCL program of the phone). physics.py applies them.
The host cores behind "a core" and "budget" are the speed plan's (socspeed.py): the fastest core
gets plan.core_cores host cores, the CPU work at most plan.cpu_units such cores, the GPU
plan.gpu_cores, so that the phone keeps its SoC's proportions in slow motion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vphone.clocknodes import ClockReadings
from vphone.clocks import Knob, SocClocks, WriteResult
from vphone.profile import Cooled, Profile
from vphone.socspeed import SpeedPlan, legacy_plan
from vphone.thermal import (
    CoolingDevice,
    initial_cooling,
    step_cooling,
    thermal_status,
    zone_temp_c,
)

CPUFREQ_COOLING_NEW_NAMES_SDK = 33  # Linux 5.13+ names cpufreq cooling devices cpufreq-cpuN
MIN_GROUP_SPEED = 0.01  # a cpuset without an online CPU still gets a sliver, not a stop


def cooling_devices(profile: Profile, soc: SocClocks) -> tuple[CoolingDevice, ...]:
    """One cpufreq cooling device per policy, then the GPU's devfreq one."""
    new = profile.sdk >= CPUFREQ_COOLING_NEW_NAMES_SDK
    devices = [
        CoolingDevice(
            name=f"cpufreq-cpu{d.first_cpu}" if new else f"thermal-cpufreq-{d.first_cpu}",
            cooled=Cooled.CPU,
            max_state=len(d.table) - 1,
            index=i,
        )
        for i, d in enumerate(soc.policies)
    ]
    if soc.gpu is not None:
        devices.append(CoolingDevice("thermal-devfreq-0", Cooled.GPU, len(soc.gpu.table) - 1, 0))
    return tuple(devices)


@dataclass(frozen=True)
class Quotas:
    """Host cores per host cgroup of the phone (cgroup.py names: cpu, cpu/<cpuset>, gpu), and
    the speed (0..1] each group's cores were scaled by: its CFS period stretches by 1/speed, so
    that work slows by the clock ratio (cgroup.cfs_quota says why)."""

    cores: dict[str, float]
    speeds: dict[str, float] = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return self.cores.get("cpu", 0.0)

    @property
    def gpu(self) -> float:
        return self.cores.get("gpu", 0.0)


class SocModel:
    def __init__(self, profile: Profile, plan: SpeedPlan | None = None) -> None:
        self.profile = profile
        self.plan = plan if plan is not None else legacy_plan(profile)
        self.soc = SocClocks(profile)
        self.devices = cooling_devices(profile, self.soc)
        self.state = self.soc.initial()
        self.cooling = initial_cooling(profile.thermal, self.devices, profile.thermal.ambient_c)
        self._tis = [[0] * len(d.table) for d in self.soc.policies]
        self._trans = [0] * len(self.soc.policies)
        self._cur: list[int | None] = [None] * len(self.soc.policies)
        self._util = (0.0, 0.0)  # the last tick's CPU and GPU load, for a change between ticks
        self._next_poll_ns: int | None = None
        self.gpu_cur_hz = self.soc.gpu.table[0] if self.soc.gpu is not None else 0
        self._quota_key: object = None
        self._quota = Quotas({})

    def reset_heat(self, die_c: float) -> None:
        self.cooling = initial_cooling(self.profile.thermal, self.devices, die_c)

    # -- inputs -------------------------------------------------------------------------------------

    def write(self, knob: Knob, index: int, text: str) -> WriteResult:
        result = self.soc.apply_write(self.state, knob, index, text)
        self.state = result.state
        self._retarget()
        return result

    def set_fixed_performance(self, enabled: bool) -> None:
        self.state = self.soc.with_fixed_performance(self.state, enabled)
        self._retarget()

    def _retarget(self) -> None:
        """The frequencies after a change of governor, limits or setspeed, at once: the kernel's
        cpufreq and devfreq switch within the write, so cpuinfo_cur_freq read right after a pin
        shows it (it showed the last tick's frequency until the next tick)."""
        self._step_frequencies(*self._util)

    def _step_frequencies(self, cpu_util: float, gpu_busy: float) -> tuple[int, ...]:
        """The frequencies the governors pick now; a change counts as a transition."""
        cur = tuple(self.soc.policy_cur_khz(self.state, i, cpu_util) for i in range(len(self.soc.policies)))
        for i, khz in enumerate(cur):
            if self._cur[i] is not None and self._cur[i] != khz:
                self._trans[i] += 1
            self._cur[i] = khz
        if self.soc.gpu is not None:
            self.gpu_cur_hz = self.soc.gpu_cur_hz(self.state, gpu_busy)
        return cur

    def advance(
        self, now_ns: int, dt_ns: int, die_c: float, cpu_util: float, gpu_busy: float
    ) -> ClockReadings:
        """One physics tick: poll the thermal governor when due, pick the frequencies the
        governors show, count time in state. `cpu_util` is the share of the phone's CPU budget in
        use (0..1), `gpu_busy` the GPU's (0..1)."""
        poll_ns = self.profile.thermal.polling_ms * 1_000_000
        if self._next_poll_ns is None or now_ns >= self._next_poll_ns:
            self.cooling = step_cooling(self.profile.thermal, self.devices, self.cooling, die_c)
            steps = self.cooling.device_steps
            cpu_steps = tuple(steps[i] for i, d in enumerate(self.devices) if d.cooled is Cooled.CPU)
            gpu_steps = next((steps[i] for i, d in enumerate(self.devices) if d.cooled is Cooled.GPU), 0)
            self.state = self.soc.with_caps(self.state, cpu_steps, gpu_steps)
            self._next_poll_ns = now_ns + poll_ns
        self._util = (cpu_util, gpu_busy)
        for i, khz in enumerate(self._step_frequencies(cpu_util, gpu_busy)):
            if self.soc.policy_online_cpus(self.state, i):
                self._tis[i][self.soc.policies[i].table.index(khz)] += dt_ns
        return self.readings(die_c)

    def readings(self, die_c: float) -> ClockReadings:
        spec = self.profile.thermal
        cur = tuple(
            c if c is not None else self.soc.policy_cur_khz(self.state, i, 0.0)
            for i, c in enumerate(self._cur)
        )
        return ClockReadings(
            cpu_cur_khz=cur,
            gpu_cur_hz=self.gpu_cur_hz,
            time_in_state_ns=tuple(tuple(t) for t in self._tis),
            total_trans=tuple(self._trans),
            zone_temps_mc=tuple(round(zone_temp_c(spec, z, die_c) * 1000) for z in spec.zones),
            cooling_steps=self.cooling.device_steps,
        )

    # -- outputs ------------------------------------------------------------------------------------

    def quotas(self, cpuset_cpus: dict[str, tuple[int, ...]], threads: float = 1.0) -> Quotas:
        """Host cores for cpu/, cpu/<group> per cpuset group (name -> its CPUs) and gpu/, with
        `threads` of the phone wanting a core (procscan's demand)."""
        key = (self.state, tuple(sorted(cpuset_cpus.items())), threads)
        if key != self._quota_key:
            self._quota_key, self._quota = key, self._quotas(cpuset_cpus, threads)
        return self._quota

    def _quotas(self, cpuset_cpus: dict[str, tuple[int, ...]], threads: float) -> Quotas:
        plan = self.plan
        cores_wanted = min(plan.cpu_units, max(1.0, threads))  # in units of the fastest core
        per_core = plan.core_cores
        speeds = {"cpu": max(MIN_GROUP_SPEED, self.soc.cpu_speed(self.state))}
        cores = {"cpu": cores_wanted * per_core * speeds["cpu"]}
        # Parents first: a group gets no more than its parent (cgroup v1 refuses more). A group
        # without CPUs (just made) runs at its parent's speed.
        for name, cpus in sorted(cpuset_cpus.items(), key=lambda item: item[0].count("/")):
            if name:
                parent = name.rpartition("/")[0]
                cap = cores.get(f"cpu/{parent}", cores["cpu"]) if parent else cores["cpu"]
                within = cpus or cpuset_cpus.get(parent) or None
                speed = max(MIN_GROUP_SPEED, self.soc.cpu_speed(self.state, within=within))
                # A thread runs on one CPU at a time: a group of n CPUs uses at most n cores.
                wanted = min(cores_wanted, float(len(within))) if within else cores_wanted
                cores[f"cpu/{name}"] = min(cap, wanted * per_core * speed)
                speeds[f"cpu/{name}"] = speed
        if self.profile.gpu is not None:
            speeds["gpu"] = self.soc.gpu_speed(self.state)
            cores["gpu"] = plan.gpu_cores * speeds["gpu"]
        return Quotas(cores, speeds)

    def speeds(self) -> tuple[float, float]:
        """(CPU speed, GPU speed) in force, 0..1 (cached with the quotas)."""
        return self.soc.cpu_speed(self.state), self.soc.gpu_speed(self.state)

    def thermal_status(self, die_c: float) -> int:
        return thermal_status(self.profile.thermal, die_c)
