"""The phone's clock and heat nodes in /sys, laid out as a real phone's kernel has them:

  devices/system/cpu/          online, offline, possible, present, kernel_max
    cpuN/                      online (root: hotplug), cpu_capacity, topology/*, cpufreq -> policy
    cpufreq/policyN/           cpuinfo_{min,max,cur}_freq, scaling_{min,max,cur}_freq,
                               scaling_governor, scaling_available_{governors,frequencies},
                               scaling_setspeed, scaling_driver, affected_cpus, related_cpus,
                               cpuinfo_transition_latency, stats/{time_in_state,total_trans}
  GPU: Adreno kgsl-3d0/{devfreq/*, min_pwrlevel, max_pwrlevel, thermal_pwrlevel, force_clk_on,
       gpuclk, max_gpuclk, clock_mhz...}; Mali devfreq/<dev>/* and the device's scaling_*_freq
  devices/virtual/thermal/     thermal_zoneN/{type, temp, policy, trip_point_K_*, cdevJ ->},
                               cooling_deviceM/{type, cur_state, max_state}; class/ links to all

The CPUs shown are the profile's (e.g. 8 in three clusters), whatever the host has; the work of
the phone runs on host CPUs within its cgroup budget (cgroup.py). On rooted profiles the nodes
root may write (clocks.Knob) are owned by the phone's root; `knob_at` maps a path back to one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vphone.clocks import ClockState, GovernorKind, Knob, SocClocks, governor_kind
from vphone.cpusets import format_cpulist
from vphone.nodes import KGSL_DEVICE, RW_MODE, NodeFiles
from vphone.profile import GpuKind, Profile
from vphone.thermal import CoolingDevice

CPU_DIR = "devices/system/cpu"
THERMAL_DIR = "devices/virtual/thermal"
ROOT_ONLY_MODE = 0o400  # cpuinfo_cur_freq: the hardware's own reading, root only
USER_HZ = 100  # time_in_state counts in clock ticks of 10 ms


@dataclass(frozen=True)
class ClockReadings:
    """What the physics measured this tick, for the nodes that change by themselves."""

    cpu_cur_khz: tuple[int, ...]  # per policy
    gpu_cur_hz: int
    time_in_state_ns: tuple[tuple[int, ...], ...]  # per policy, per table entry
    total_trans: tuple[int, ...]  # per policy
    zone_temps_mc: tuple[int, ...]
    cooling_steps: tuple[int, ...]  # per cooling device


def _mask(cpus: range | tuple[int, ...], ncpu: int) -> str:
    bits = sum(1 << c for c in cpus)
    return f"{bits:0{max(1, (ncpu + 3) // 4)}x}"


class ClockNodes:
    """Lays out the clock and thermal nodes and renders their dynamic values from the state."""

    def __init__(
        self,
        profile: Profile,
        soc: SocClocks,
        files: NodeFiles,
        devices: tuple[CoolingDevice, ...],
    ) -> None:
        self.profile = profile
        self.soc = soc
        self.files = files
        self.devices = devices
        self._knobs: dict[str, tuple[Knob, int]] = {}
        if profile.rooted:
            self._knobs = self._writable()
        self._state_key: ClockState | None = None
        self._state_files: dict[str, str] = {}
        self._gpu_zone = next(
            (i for i, z in enumerate(profile.thermal.zones) if z.sensor.value == "gpu"), None
        )

    # -- paths -------------------------------------------------------------------------------------

    def policy_dir(self, i: int) -> str:
        return f"{CPU_DIR}/cpufreq/{self.soc.policies[i].name}"

    def devfreq_dir(self) -> str | None:
        gpu = self.profile.gpu
        if gpu is None:
            return None
        if gpu.kind is GpuKind.ADRENO:
            return f"{KGSL_DEVICE}/devfreq"
        return f"devices/platform/{gpu.devfreq_name}/devfreq/{gpu.devfreq_name}"

    def _writable(self) -> dict[str, tuple[Knob, int]]:
        knobs: dict[str, tuple[Knob, int]] = {}
        for i in range(len(self.soc.policies)):
            d = self.policy_dir(i)
            for knob in (Knob.SCALING_GOVERNOR, Knob.SCALING_MIN, Knob.SCALING_MAX, Knob.SCALING_SETSPEED):
                knobs[f"{d}/{knob.value}"] = (knob, i)
        for cpu in range(self.soc.ncpu):
            knobs[f"{CPU_DIR}/cpu{cpu}/online"] = (Knob.CPU_ONLINE, cpu)
        devfreq = self.devfreq_dir()
        if devfreq is not None:
            for knob in (Knob.GPU_GOVERNOR, Knob.GPU_MIN, Knob.GPU_MAX):
                knobs[f"{devfreq}/{knob.value}"] = (knob, 0)
        if self.soc.has_kgsl:
            for knob in (Knob.KGSL_MAX_PWRLEVEL, Knob.KGSL_MIN_PWRLEVEL, Knob.KGSL_FORCE_CLK_ON):
                knobs[f"{KGSL_DEVICE}/{knob.value}"] = (knob, 0)
        return knobs

    def knob_at(self, rel: str) -> tuple[Knob, int] | None:
        """Which clock control a writable node is (relative to /sys), or None."""
        return self._knobs.get(rel)

    def writable_paths(self) -> tuple[str, ...]:
        return tuple(self._knobs)

    # -- layout ------------------------------------------------------------------------------------

    def create(self, state: ClockState, readings: ClockReadings) -> None:
        for rel, text in self._static().items():
            self.files.file(rel, text)
        for rel, text in self.render(state, readings).items():
            self.files.file(rel, text, self._mode(rel), root_writable=rel in self._knobs)
        self._links()

    def _mode(self, rel: str) -> int:
        """Modes as the kernel gives them; only the phone's root owns the writable ones."""
        if rel in self._knobs:
            return RW_MODE
        if rel.endswith("/cpuinfo_cur_freq"):
            return ROOT_ONLY_MODE
        if rel.endswith(("/cur_state", "/online")) and rel != f"{CPU_DIR}/online":
            return RW_MODE  # writable by host root only (hotplug on unrooted profiles, cooling states)
        return 0o444

    def _static(self) -> dict[str, str]:
        p, soc = self.profile, self.soc
        ncpu = soc.ncpu
        files = {
            f"{CPU_DIR}/possible": f"0-{ncpu - 1}\n",
            f"{CPU_DIR}/present": f"0-{ncpu - 1}\n",
            f"{CPU_DIR}/kernel_max": f"{ncpu - 1}\n",
            "devices/system/node/online": "0\n",
            "devices/system/node/possible": "0\n",
            "devices/system/node/node0/cpulist": f"0-{ncpu - 1}\n",
            "devices/system/node/node0/cpumap": f"{_mask(range(ncpu), ncpu)}\n",
        }
        host_meminfo = Path("/sys/devices/system/node/node0/meminfo")
        if host_meminfo.is_file():
            files["devices/system/node/node0/meminfo"] = host_meminfo.read_text(encoding="utf-8")
        for ci, (cluster, d) in enumerate(zip(p.cpu.clusters, soc.policies, strict=True)):
            members = range(d.first_cpu, d.first_cpu + d.cpus)
            for cpu in members:
                t = f"{CPU_DIR}/cpu{cpu}/topology"
                files.update(
                    {
                        f"{CPU_DIR}/cpu{cpu}/cpu_capacity": f"{cluster.capacity}\n",
                        f"{t}/core_id": f"{cpu - d.first_cpu}\n",
                        f"{t}/cluster_id": f"{ci}\n",
                        f"{t}/physical_package_id": "0\n",
                        f"{t}/die_id": "0\n",
                        f"{t}/thread_siblings": f"{_mask((cpu,), ncpu)}\n",
                        f"{t}/thread_siblings_list": f"{cpu}\n",
                        f"{t}/core_cpus": f"{_mask((cpu,), ncpu)}\n",
                        f"{t}/core_cpus_list": f"{cpu}\n",
                        f"{t}/cluster_cpus": f"{_mask(members, ncpu)}\n",
                        f"{t}/cluster_cpus_list": f"{format_cpulist(tuple(members))}\n",
                        f"{t}/core_siblings": f"{_mask(range(ncpu), ncpu)}\n",
                        f"{t}/core_siblings_list": f"0-{ncpu - 1}\n",
                        f"{t}/package_cpus": f"{_mask(range(ncpu), ncpu)}\n",
                        f"{t}/package_cpus_list": f"0-{ncpu - 1}\n",
                    }
                )
            pd = self.policy_dir(ci)
            files.update(
                {
                    f"{pd}/related_cpus": " ".join(str(c) for c in members) + "\n",
                    f"{pd}/cpuinfo_min_freq": f"{d.table[0]}\n",
                    f"{pd}/cpuinfo_max_freq": f"{d.top}\n",
                    f"{pd}/cpuinfo_transition_latency": f"{p.cpu.transition_latency_ns}\n",
                    f"{pd}/scaling_available_frequencies": " ".join(str(f) for f in d.table) + " \n",
                    f"{pd}/scaling_available_governors": " ".join(d.governors) + " \n",
                    f"{pd}/scaling_driver": f"{p.cpu.scaling_driver}\n",
                }
            )
        files.update(self._gpu_static())
        files.update(self._thermal_static())
        return files

    def _gpu_static(self) -> dict[str, str]:
        gpu, d = self.profile.gpu, self.soc.gpu
        devfreq = self.devfreq_dir()
        if gpu is None or d is None or devfreq is None:
            return {}
        hz = " ".join(str(f) for f in d.table)
        mhz = [f // 1_000_000 for f in d.table]
        files = {
            f"{devfreq}/available_frequencies": f"{hz}\n",
            f"{devfreq}/available_governors": " ".join(d.governors) + "\n",
            f"{devfreq}/polling_interval": "50\n",
            f"{devfreq}/trans_stat": "",
        }
        if gpu.kind is GpuKind.ADRENO:
            k = KGSL_DEVICE
            files.update(
                {
                    f"{k}/num_pwrlevels": f"{len(d.table)}\n",
                    f"{k}/default_pwrlevel": f"{len(d.table) - 1}\n",
                    f"{k}/min_clock_mhz": f"{mhz[0]}\n",
                    f"{k}/freq_table_mhz": " ".join(str(m) for m in reversed(mhz)) + "\n",
                    f"{k}/gpu_available_frequencies": " ".join(str(f) for f in reversed(d.table)) + "\n",
                }
            )
        else:
            dev = f"devices/platform/{gpu.devfreq_name}"
            files.update(
                {
                    f"{dev}/available_frequencies": " ".join(str(f // 1000) for f in d.table) + "\n",
                    f"{dev}/max_freq": f"{d.top // 1000}\n",
                    f"{dev}/min_freq": f"{d.table[0] // 1000}\n",
                }
            )
        return files

    def _thermal_static(self) -> dict[str, str]:
        files: dict[str, str] = {}
        for zi, zone in enumerate(self.profile.thermal.zones):
            z = f"{THERMAL_DIR}/thermal_zone{zi}"
            files.update(
                {
                    f"{z}/type": f"{zone.type}\n",
                    f"{z}/mode": "enabled\n",
                    f"{z}/policy": "step_wise\n",
                    f"{z}/available_policies": "step_wise user_space power_allocator\n",
                    f"{z}/polling_delay": f"{self.profile.thermal.polling_ms}\n",
                }
            )
            for ti, trip in enumerate(zone.trips):
                files[f"{z}/trip_point_{ti}_temp"] = f"{round(trip.temp_c * 1000)}\n"
                files[f"{z}/trip_point_{ti}_type"] = f"{trip.type.value}\n"
                files[f"{z}/trip_point_{ti}_hyst"] = f"{round(trip.hyst_c * 1000)}\n"
            for j, (ti, _di) in enumerate(self._zone_bindings(zi)):
                files[f"{z}/cdev{j}_trip_point"] = f"{ti}\n"
                files[f"{z}/cdev{j}_weight"] = "0\n"
        for di, dev in enumerate(self.devices):
            c = f"{THERMAL_DIR}/cooling_device{di}"
            files[f"{c}/type"] = f"{dev.name}\n"
            files[f"{c}/max_state"] = f"{dev.max_state}\n"
        return files

    def _zone_bindings(self, zi: int) -> list[tuple[int, int]]:
        zone = self.profile.thermal.zones[zi]
        out = []
        for ti, trip in enumerate(zone.trips):
            if trip.type.value != "passive":
                continue
            out += [(ti, di) for di, dev in enumerate(self.devices) if dev.cooled in zone.cools]
        return out

    def _links(self) -> None:
        p, soc = self.profile, self.soc
        for i, d in enumerate(soc.policies):
            for cpu in range(d.first_cpu, d.first_cpu + d.cpus):
                self.files.link(f"{CPU_DIR}/cpu{cpu}/cpufreq", f"../cpufreq/{soc.policies[i].name}")
        for zi in range(len(p.thermal.zones)):
            self.files.link(f"class/thermal/thermal_zone{zi}", f"../../{THERMAL_DIR}/thermal_zone{zi}")
            for j, (_ti, di) in enumerate(self._zone_bindings(zi)):
                self.files.link(f"{THERMAL_DIR}/thermal_zone{zi}/cdev{j}", f"../cooling_device{di}")
        for di in range(len(self.devices)):
            self.files.link(f"class/thermal/cooling_device{di}", f"../../{THERMAL_DIR}/cooling_device{di}")
        gpu = p.gpu
        if gpu is not None and gpu.kind is GpuKind.ADRENO:
            self.files.link("class/devfreq/3d00000.qcom,kgsl-3d0", f"../../{KGSL_DEVICE}/devfreq")
        elif gpu is not None:
            self.files.link(f"class/devfreq/{gpu.devfreq_name}", f"../../{self.devfreq_dir()}")

    # -- dynamic values ----------------------------------------------------------------------------

    def render(self, state: ClockState, r: ClockReadings) -> dict[str, str]:
        """Every dynamic node's text. What follows from the state alone is cached: the physics
        renders each tick, and the state changes only on writes, caps and hotplug."""
        if state != self._state_key:
            self._state_key, self._state_files = state, self._render_state(state)
        files = dict(self._state_files)
        soc = self.soc
        for i, d in enumerate(soc.policies):
            pd, cur = self.policy_dir(i), r.cpu_cur_khz[i]
            if governor_kind(state.policies[i].governor) is GovernorKind.USERSPACE:
                files[f"{pd}/scaling_setspeed"] = f"{cur}\n"
            files[f"{pd}/scaling_cur_freq"] = files[f"{pd}/cpuinfo_cur_freq"] = f"{cur}\n"
            files[f"{pd}/stats/time_in_state"] = "".join(
                f"{f} {ns * USER_HZ // 1_000_000_000}\n"
                for f, ns in zip(d.table, r.time_in_state_ns[i], strict=True)
            )
            files[f"{pd}/stats/total_trans"] = f"{r.total_trans[i]}\n"
        files.update(self._gpu_readings(r))
        for zi, temp in enumerate(r.zone_temps_mc):
            files[f"{THERMAL_DIR}/thermal_zone{zi}/temp"] = f"{temp}\n"
        for di, steps in enumerate(r.cooling_steps):
            files[f"{THERMAL_DIR}/cooling_device{di}/cur_state"] = f"{steps}\n"
        return files

    def _render_state(self, state: ClockState) -> dict[str, str]:
        soc = self.soc
        files: dict[str, str] = {}
        online = tuple(c for c in range(soc.ncpu) if state.online[c])
        offline = tuple(c for c in range(soc.ncpu) if not state.online[c])
        files[f"{CPU_DIR}/online"] = f"{format_cpulist(online)}\n"
        files[f"{CPU_DIR}/offline"] = f"{format_cpulist(offline)}\n"
        for cpu in range(soc.ncpu):
            files[f"{CPU_DIR}/cpu{cpu}/online"] = "1\n" if state.online[cpu] else "0\n"
        for i in range(len(soc.policies)):
            pd, req, lim = self.policy_dir(i), state.policies[i], soc.policy_limits(state, i)
            files.update(
                {
                    f"{pd}/scaling_governor": f"{req.governor}\n",
                    f"{pd}/scaling_min_freq": f"{lim.low}\n",
                    f"{pd}/scaling_max_freq": f"{lim.high}\n",
                    f"{pd}/scaling_setspeed": "<unsupported>\n",
                    f"{pd}/affected_cpus": " ".join(str(c) for c in soc.policy_online_cpus(state, i)) + "\n",
                }
            )
        files.update(self._gpu_state(state))
        return files

    def _gpu_state(self, state: ClockState) -> dict[str, str]:
        gpu, d, devfreq = self.profile.gpu, self.soc.gpu, self.devfreq_dir()
        if gpu is None or d is None or devfreq is None or state.gpu is None:
            return {}
        lim = self.soc.gpu_limits(state)
        files = {
            f"{devfreq}/governor": f"{state.gpu.governor}\n",
            f"{devfreq}/min_freq": f"{lim.low}\n",
            f"{devfreq}/max_freq": f"{lim.high}\n",
        }
        cap_hz = d.resolve_high(lim.high)
        if gpu.kind is GpuKind.ADRENO and state.kgsl is not None:
            k = KGSL_DEVICE
            files.update(
                {
                    f"{k}/max_gpuclk": f"{cap_hz}\n",
                    f"{k}/max_clock_mhz": f"{cap_hz // 1_000_000}\n",
                    f"{k}/thermal_pwrlevel": f"{min(state.gpu_cap_steps, len(d.table) - 1)}\n",
                    f"{k}/max_pwrlevel": f"{state.kgsl.max_pwrlevel}\n",
                    f"{k}/min_pwrlevel": f"{state.kgsl.min_pwrlevel}\n",
                    f"{k}/force_clk_on": "1\n" if state.kgsl.force_clk_on else "0\n",
                }
            )
        elif gpu.kind is GpuKind.MALI:
            dev = f"devices/platform/{gpu.devfreq_name}"
            files[f"{dev}/scaling_max_freq"] = f"{cap_hz // 1000}\n"
            files[f"{dev}/scaling_min_freq"] = f"{lim.low // 1000}\n"
        return files

    def _gpu_readings(self, r: ClockReadings) -> dict[str, str]:
        gpu, devfreq = self.profile.gpu, self.devfreq_dir()
        if gpu is None or devfreq is None:
            return {}
        cur = r.gpu_cur_hz
        files = {f"{devfreq}/cur_freq": f"{cur}\n", f"{devfreq}/target_freq": f"{cur}\n"}
        if gpu.kind is GpuKind.ADRENO:
            k = KGSL_DEVICE
            files[f"{k}/gpuclk"] = f"{cur}\n"
            files[f"{k}/clock_mhz"] = f"{cur // 1_000_000}\n"
            if self._gpu_zone is not None and r.zone_temps_mc:
                files[f"{k}/temp"] = f"{r.zone_temps_mc[self._gpu_zone]}\n"
        else:
            files[f"devices/platform/{gpu.devfreq_name}/cur_freq"] = f"{cur // 1000}\n"
        return files
