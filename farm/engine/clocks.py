"""Clock control on a phone: read what it allows, apply the plan (farm.engine.clockplan) when a
phone is prepared, and ALWAYS put back what was there.

Like charging (farm.engine.conditions), what restores the phone is written to the store BEFORE
the first node is written (devices.clocks_restore_json: the nodes with the values they had, and
whether fixed performance mode was turned on), and cleared only after the restore ran, so a farm
killed in between is repaired by the next farm process (`recover_clocks`, from recovery).

Nodes are the ones a real Android kernel has: cpufreq policies (scaling_governor,
scaling_{min,max}_freq, scaling_available_{frequencies,governors}, stats/time_in_state when the
driver lists no table), the GPU's devfreq folder (governor, {min,max}_freq in Hz,
available_frequencies) and on Adreno kgsl's {min,max}_pwrlevel. Fixed performance mode is
Android 11's `cmd power set-fixed-performance-mode-enabled`, which a power HAL without the mode
refuses (exit code not 0).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from farm.device import controls
from farm.device.session import DeviceSession
from farm.engine.clockplan import ClockAbilities, ClockPlan, CpuTable, GpuTable, plan_clocks
from farm.errors import DevicePermanentError, FarmError
from farm.experiment.clocks import ClockMode, Clocks
from farm.store import Store
from farm.store import devices as device_store
from farm.telemetry.probe import Capabilities

KGSL_DIR = "/sys/class/kgsl/kgsl-3d0"
FIXED_PERFORMANCE = ("cmd", "power", "set-fixed-performance-mode-enabled")

# $@: cpufreq policy folders. One line per policy `P|dir|cpus|freqs|governors`, then the GPU's
# `G|devfreq dir|freqs|governors|kgsl dir`: kgsl's devfreq when there is one, else the first
# devfreq device named like a GPU (Mali: <addr>.mali, Exynos: g3d, others: gpu).
_TABLES = (
    'for d in "$@"; do f=$(cat "$d/scaling_available_frequencies" 2>/dev/null); '
    '[ -n "$f" ] || f=$(cut -d " " -f 1 "$d/stats/time_in_state" 2>/dev/null | tr "\\n" " "); '
    'echo "P|$d|$(cat "$d/related_cpus" 2>/dev/null)|$f|'
    '$(cat "$d/scaling_available_governors" 2>/dev/null)"; '
    "done; "
    f"k={KGSL_DIR}; "
    'if [ -d "$k/devfreq" ]; then g="$k/devfreq"; else k=""; g=""; '
    'for c in /sys/class/devfreq/*; do case "${c##*/}" in *gpu*|*mali*|*g3d*) g=$c; break;; esac; done; fi; '
    '[ -n "$g" ] && echo "G|$g|$(cat "$g/available_frequencies" 2>/dev/null)|'
    '$(cat "$g/available_governors" 2>/dev/null)|$k"; true'
)
# $@: nodes; prints `node<TAB>value` for each.
_READ = 'for f in "$@"; do printf "%s\\t%s\\n" "$f" "$(cat "$f" 2>/dev/null)"; done'


def read_nodes(session: DeviceSession, nodes: Sequence[str]) -> dict[str, str]:
    """Each node's text in one call ("" when unreadable)."""
    if not nodes:
        return {}
    lines = session.script(_READ, *nodes).stdout.splitlines()
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(sorted({int(x) for x in text.split() if x.isdigit()}))


def parse_clock_tables(text: str) -> tuple[tuple[CpuTable, ...], GpuTable | None]:
    """The `_TABLES` script's output as tables (pure)."""
    cpu: list[CpuTable] = []
    gpu = None
    for line in text.splitlines():
        parts = line.split("|")
        if parts[0] == "P" and len(parts) == 5:
            cpu.append(CpuTable(parts[1], _ints(parts[2]), _ints(parts[3]), tuple(parts[4].split())))
        elif parts[0] == "G" and len(parts) == 5 and gpu is None:
            gpu = GpuTable(parts[1], _ints(parts[2]), tuple(parts[3].split()), parts[4] or None)
    return tuple(cpu), gpu


def abilities_of(session: DeviceSession, caps: Capabilities) -> ClockAbilities:
    """What this phone lets farm do with its clocks (one round trip)."""
    dirs = [p.dir for p in caps.cpu_policies]
    cpu, gpu = parse_clock_tables(session.script(_TABLES, *dirs).stdout)
    sdk = caps.prop("ro.build.version.sdk")
    return ClockAbilities(
        root=caps.root.available, sdk=int(sdk) if sdk and sdk.isdigit() else None, cpu=cpu, gpu=gpu
    )


@dataclass(frozen=True)
class ClockRestore:
    """What puts the phone's clocks back: nodes with their old values (written in order), and
    whether fixed performance mode must be turned off."""

    writes: tuple[tuple[str, str], ...] = ()
    fixed_performance: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {"writes": [list(w) for w in self.writes], "fixed_performance": self.fixed_performance}
        )

    @classmethod
    def from_json(cls, text: str) -> ClockRestore:
        doc = json.loads(text)
        return cls(
            tuple((str(n), str(v)) for n, v in doc.get("writes", ())), bool(doc.get("fixed_performance"))
        )


@dataclass(frozen=True)
class AppliedClocks:
    """What a phone got for a sweep: the mode, why not a stronger one, what its nodes read after,
    and whether that is what the experiment asked."""

    requested: ClockMode
    mode: ClockMode
    as_requested: bool
    readback: Mapping[str, str] = field(default_factory=dict)  # node -> value after applying
    affinity: str = "all"
    affinity_cpus: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    restore: ClockRestore | None = None
    # What the throttle watch (farm.engine.thermal) compares against.
    pinned_khz: Mapping[str, int] = field(default_factory=dict)  # policy folder -> pinned maximum
    kgsl_dir: str | None = None
    pinned_pwrlevel: int | None = None

    def to_json(self) -> dict[str, object]:
        """As env.json's `clocks` carries it."""
        return {
            "requested": self.requested.value,
            "mode": self.mode.value,
            "as_requested": self.as_requested,
            "readback": dict(self.readback),
            "affinity": self.affinity,
            "affinity_cpus": list(self.affinity_cpus),
            "notes": list(self.notes),
        }

    def affinity_mask(self) -> str:
        """The taskset mask in hex ('' for all CPUs: no taskset)."""
        return f"{sum(1 << c for c in self.affinity_cpus):x}" if self.affinity_cpus else ""

    def taskset_prefix(self) -> list[str]:
        """`taskset MASK` for the benchmark's argv (toybox), or nothing for all CPUs."""
        if not self.affinity_cpus:
            return []
        return ["taskset", self.affinity_mask()]


class ClocksRefused(DevicePermanentError):
    """The experiment requires a clock control this phone cannot do: the phone is skipped."""


def pin_writes(plan: ClockPlan, abilities: ClockAbilities) -> list[tuple[str, str]]:
    """The node writes that pin the plan's clocks, in an order every kernel accepts (the range is
    widened before it is narrowed, so min never passes max)."""
    tables = {t.dir: t for t in abilities.cpu}
    writes: list[tuple[str, str]] = []
    for pin in plan.cpu:
        low = str(tables[pin.dir].freqs_khz[0])
        writes += [(f"{pin.dir}/scaling_governor", pin.governor), (f"{pin.dir}/scaling_min_freq", low)]
        writes += [
            (f"{pin.dir}/scaling_max_freq", str(pin.khz)),
            (f"{pin.dir}/scaling_min_freq", str(pin.khz)),
        ]
    gpu = plan.gpu
    if gpu is not None and abilities.gpu is not None:
        low = str(abilities.gpu.freqs_hz[0])
        writes += [(f"{gpu.dir}/governor", gpu.governor), (f"{gpu.dir}/min_freq", low)]
        writes += [(f"{gpu.dir}/max_freq", str(gpu.hz)), (f"{gpu.dir}/min_freq", str(gpu.hz))]
        if gpu.kgsl_dir is not None and gpu.pwrlevel is not None:
            level = str(gpu.pwrlevel)
            writes += [(f"{gpu.kgsl_dir}/max_pwrlevel", "0"), (f"{gpu.kgsl_dir}/min_pwrlevel", level)]
            writes += [(f"{gpu.kgsl_dir}/max_pwrlevel", level)]
    return writes


def restore_writes(
    plan: ClockPlan, abilities: ClockAbilities, before: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The writes that put back what `before` read for the nodes pinning touches, in the same
    widening order; a node that could not be read before is left as it is."""
    writes: list[tuple[str, str]] = []
    tables = {t.dir: t for t in abilities.cpu}
    for pin in plan.cpu:
        d, low = pin.dir, str(tables[pin.dir].freqs_khz[0])
        writes += [
            (f"{d}/scaling_min_freq", low),
            (f"{d}/scaling_max_freq", before.get(f"{d}/scaling_max_freq", "")),
        ]
        writes += [(f"{d}/scaling_min_freq", before.get(f"{d}/scaling_min_freq", ""))]
        writes += [(f"{d}/scaling_governor", before.get(f"{d}/scaling_governor", ""))]
    gpu = plan.gpu
    if gpu is not None and abilities.gpu is not None:
        # kgsl's power levels bound its devfreq range: they are released first (pinning set
        # them last), or devfreq's min_freq could not go back below the pinned level.
        if gpu.kgsl_dir is not None:
            k = gpu.kgsl_dir
            writes += [(f"{k}/max_pwrlevel", "0"), (f"{k}/min_pwrlevel", before.get(f"{k}/min_pwrlevel", ""))]
            writes += [(f"{k}/max_pwrlevel", before.get(f"{k}/max_pwrlevel", ""))]
        d, low = gpu.dir, str(abilities.gpu.freqs_hz[0])
        writes += [(f"{d}/min_freq", low), (f"{d}/max_freq", before.get(f"{d}/max_freq", ""))]
        writes += [
            (f"{d}/min_freq", before.get(f"{d}/min_freq", "")),
            (f"{d}/governor", before.get(f"{d}/governor", "")),
        ]
    return tuple((node, value) for node, value in writes if value)


def _capped(node: str, read: str | None, written: str) -> bool:
    """A maximum that reads lower than written: a thermal cap on top of it, not a refusal."""
    if not node.endswith("max_freq") or read is None or not read.isdigit() or not written.isdigit():
        return False
    return int(read) < int(written)


def refused_message(refused: Mapping[str, str]) -> str:
    """Which node's value the phone's kernel refused (it failed the write, e.g. EINVAL) (pure);
    the caller's error names the phone."""
    node, value = next(iter(refused.items()))
    more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
    return f"the phone refused {value!r} for {node}{more}"


def mismatches(
    readback: Mapping[str, str], writes: Sequence[tuple[str, str]], *, allow_caps: bool = False
) -> list[str]:
    """The written nodes that do not read what was written to them last (pure)."""
    final = dict(writes)
    wrong = []
    for node, value in final.items():
        read = readback.get(node)
        if read == value or (allow_caps and _capped(node, read, value)):
            continue
        short = "/".join(node.rsplit("/", 2)[-2:])
        wrong.append(f"{short} reads {read or 'nothing'}, not {value}")
    return wrong


def apply_clocks(
    session: DeviceSession, store: Store, device_id: str, spec: Clocks, caps: Capabilities
) -> AppliedClocks:
    """Apply the strongest control of the plan the phone takes (marker first). Raises
    ClocksRefused when the experiment requires a control the phone cannot do."""
    abilities = abilities_of(session, caps)
    plan = plan_clocks(spec, abilities)
    while plan.refusal is None and plan.mode is not ClockMode.NONE:
        mode = plan.mode
        try:
            if mode is ClockMode.PIN:
                return _pin(session, store, device_id, spec, plan, abilities)
            return _fixed_performance(session, store, device_id, spec, plan, abilities)
        except _Refused as refused:
            plan = plan.fallback_after(mode, str(refused))
    if plan.refusal is not None:
        raise ClocksRefused(device_id, f"skipped: clocks: {plan.refusal} (the experiment requires it)")
    return AppliedClocks(
        spec.mode,
        ClockMode.NONE,
        spec.mode in (ClockMode.NONE, ClockMode.AUTO),
        affinity=spec.affinity.value,
        affinity_cpus=plan.affinity_cpus,
        notes=plan.notes,
        kgsl_dir=_kgsl(abilities),
    )


def _kgsl(abilities: ClockAbilities) -> str | None:
    return abilities.gpu.kgsl_dir if abilities.gpu is not None else None


class _Refused(Exception):
    """The phone did not take a control (it was put back); the ladder moves down a step."""


def _pin(
    session: DeviceSession,
    store: Store,
    device_id: str,
    spec: Clocks,
    plan: ClockPlan,
    abilities: ClockAbilities,
) -> AppliedClocks:
    every = pin_writes(plan, abilities)
    nodes = list(dict.fromkeys(n for n, _ in every))
    before = read_nodes(session, nodes)
    # A node that cannot be read is not there on this kernel (kgsl without pwrlevels): leave it.
    pins = [(node, value) for node, value in every if before.get(node)]
    nodes = [node for node in nodes if before.get(node)]
    restore = ClockRestore(restore_writes(plan, abilities, before))
    device_store.mark_clocks_changed(store, device_id, restore.to_json())
    try:
        written = controls.write_many_as_root(session, pins)
    except DevicePermanentError as error:
        device_store.clear_clocks_changed(store, device_id)  # nothing was written
        raise _Refused(str(error)) from None
    readback = written.readback
    if written.refused:
        restore_clocks(session, store, device_id, restore)
        raise _Refused(refused_message(written.refused))
    wrong = mismatches(readback, pins)
    if wrong:
        restore_clocks(session, store, device_id, restore)
        raise _Refused(f"the phone did not keep the pin ({wrong[0]})")
    return AppliedClocks(
        spec.mode,
        ClockMode.PIN,
        True,
        readback={n: readback.get(n, "") for n in nodes},
        affinity=spec.affinity.value,
        affinity_cpus=plan.affinity_cpus,
        notes=plan.notes,
        restore=restore,
        pinned_khz={p.dir: p.khz for p in plan.cpu},
        kgsl_dir=_kgsl(abilities),
        pinned_pwrlevel=plan.gpu.pwrlevel
        if plan.gpu is not None and plan.gpu.kgsl_dir in _dirs(nodes)
        else None,
    )


def _dirs(nodes: Sequence[str]) -> set[str]:
    return {node.rsplit("/", 1)[0] for node in nodes if node.endswith("_pwrlevel")}


def fixed_performance_nodes(abilities: ClockAbilities) -> list[str]:
    """The nodes fixed performance mode sets (the device's powerhint.json decides the values):
    every policy's scaling_min/max_freq and the GPU's devfreq min/max_freq (pure)."""
    nodes = [f"{t.dir}/scaling_{end}_freq" for t in abilities.cpu for end in ("min", "max")]
    if abilities.gpu is not None:
        nodes += [f"{abilities.gpu.dir}/{end}_freq" for end in ("min", "max")]
    return nodes


def _fixed_performance(
    session: DeviceSession,
    store: Store,
    device_id: str,
    spec: Clocks,
    plan: ClockPlan,
    abilities: ClockAbilities,
) -> AppliedClocks:
    restore = ClockRestore(fixed_performance=True)
    device_store.mark_clocks_changed(store, device_id, restore.to_json())
    result = session.shell([*FIXED_PERFORMANCE, "true"])
    if not result.ok:
        device_store.clear_clocks_changed(store, device_id)
        why = (result.stderr or result.stdout).strip().splitlines()
        raise _Refused(why[0] if why else f"exit {result.exit_code}")
    # Read back: AOSP's PowerManagerService keeps no state for the mode (`cmd power` passes it to
    # the HAL: setPowerModeChecked -> nativeSetPowerMode) and `dumpsys power` prints none, so the
    # mode is read back by its effect, the nodes it set; they are then sampled through every run
    # (farm.engine.clockhold) and the mode turned off and on once if something rewrote them.
    readback = {n: v for n, v in read_nodes(session, fixed_performance_nodes(abilities)).items() if v}
    return AppliedClocks(
        spec.mode,
        ClockMode.FIXED_PERFORMANCE,
        spec.mode in (ClockMode.FIXED_PERFORMANCE, ClockMode.AUTO),
        readback=readback,
        affinity=spec.affinity.value,
        affinity_cpus=plan.affinity_cpus,
        notes=plan.notes,
        restore=restore,
        kgsl_dir=_kgsl(abilities),
    )


def restore_clocks(session: DeviceSession, store: Store, device_id: str, restore: ClockRestore) -> None:
    """Put the clocks back, then clear the store marker (kept, for recovery, when it fails)."""
    if restore.writes:
        written = controls.write_many_as_root(session, list(restore.writes))
        if written.refused:
            raise FarmError(f"{device_id}: clocks not restored: {refused_message(written.refused)}")
        wrong = mismatches(written.readback, restore.writes, allow_caps=True)
        if wrong:
            raise FarmError(f"{device_id}: clocks not restored: {wrong[0]}")
    if restore.fixed_performance:
        result = session.shell([*FIXED_PERFORMANCE, "false"])
        if not result.ok:
            raise FarmError(f"{device_id}: fixed performance mode not turned off (exit {result.exit_code})")
    device_store.clear_clocks_changed(store, device_id)


def recover_clocks(store: Store, session: DeviceSession, device_id: str) -> bool:
    """If a dead farm left this phone's clocks changed, put them back. True when it did."""
    marker = device_store.clocks_marker(store, device_id)
    if marker is None:
        return False
    restore_clocks(session, store, device_id, ClockRestore.from_json(marker))
    return True
