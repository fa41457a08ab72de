"""`farm doctor`'s reads on one phone (the I/O edge of farm.doctor.checks): farm-probe's
capabilities, a few shell facts in one round trip, and a short discharge trial.

The trial switches charging off (store marker first, as a run does: farm.engine.conditions),
reads the battery's status, capacity, current and voltage every SAMPLE_S for TRIAL_S (longer
for a slow gauge), switches charging back on (verified) and judges the samples as a run's
(farm.analysis.discharge).
"""

from __future__ import annotations

from farm.analysis.discharge import BatteryState, DischargeEvidence, judge_discharge
from farm.device import controls
from farm.device.session import DeviceSession
from farm.doctor.checks import SCREEN_TOOLS, GaugeTrial, PhoneFacts, gauge_interval_s, parse_facts
from farm.engine.conditions import charging_control
from farm.errors import FarmError
from farm.store import Store
from farm.store import devices as device_store
from farm.telemetry.probe import Capabilities

FACTS_SCRIPT = (
    'echo "selinux=$(getenforce 2>/dev/null)"; echo "pagesize=$(getconf PAGESIZE 2>/dev/null)"; '
    'for t in "$@"; do if command -v "$t" >/dev/null 2>&1; then echo "tool.$t=1"; fi; done; '
    "dumpsys power 2>/dev/null | grep -m1 'mWakefulness=' | sed 's/.*mWakefulness=/wakefulness=/'; true"
)
# One sample: `t status|capacity|current|voltage` from the battery's power_supply folder.
SAMPLE_SCRIPT = (
    'd=$1; n=$2; s=$3; i=0; while [ "$i" -lt "$n" ]; do sleep "$s"; '
    'read -r up _ < /proc/uptime; echo "$up|$(cat "$d/status")|$(cat "$d/capacity")|'
    '$(cat "$d/current_now")|$(cat "$d/voltage_now")"; i=$((i + 1)); done 2>/dev/null'
)
TRIAL_S = 4.0
SLOW_GAUGE_TRIAL_S = 25.0  # a gauge that updates every ~10 s (Nexus 6P) needs two updates
SAMPLE_S = 0.5


def read_facts(session: DeviceSession) -> PhoneFacts:
    return parse_facts(session.script(FACTS_SCRIPT, *SCREEN_TOOLS).stdout)


def _samples(text: str) -> list[tuple[float, str, int | None, float, float]]:
    rows = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != 5:
            continue
        try:
            t, current, voltage = float(parts[0]), float(parts[3]), float(parts[4])
        except ValueError:
            continue
        level = int(parts[2]) if parts[2].strip().isdigit() else None
        rows.append((t, parts[1].strip(), level, current, voltage))
    return rows


def _sample(
    session: DeviceSession, battery_dir: str, seconds: float
) -> list[tuple[float, str, int | None, float, float]]:
    count = max(2, round(seconds / SAMPLE_S))
    result = session.script(SAMPLE_SCRIPT, battery_dir, str(count), f"{SAMPLE_S:g}", timeout_s=seconds + 30)
    return _samples(result.stdout)


def discharge_trial(
    session: DeviceSession, device_id: str, caps: Capabilities, store: Store | None
) -> GaugeTrial | None:
    """Charging off for a few seconds, the battery sampled, charging back on; None without a
    usable switch or battery folder. FarmError when the phone refuses the switch."""
    control = charging_control(caps)
    battery_dir = caps.battery.dir
    if control is None or battery_dir is None:
        return None
    if store is not None:
        device_store.mark_charging_disabled(store, device_id, control.node, control.enable_value)
    try:
        controls.set_charging(session, control, enabled=False)
        rows = _sample(session, battery_dir, TRIAL_S)
        if len({r[3] for r in rows}) < 3:  # a slow gauge: sample until it updated twice
            rows += _sample(session, battery_dir, SLOW_GAUGE_TRIAL_S - TRIAL_S)
    finally:
        controls.set_charging(session, control, enabled=True)
        if store is not None:
            device_store.clear_charging_disabled(store, device_id)
    if not rows:
        raise FarmError(f"{device_id}: the battery could not be read during the discharge trial")
    first, last = rows[0], rows[-1]
    currents = [r[3] for r in rows]
    evidence = DischargeEvidence(
        BatteryState(first[1] or None, first[2]),
        BatteryState(last[1] or None, last[2]),
        tuple(after_first_update(currents)),
        tuple(r[4] for r in rows),
    )
    interval = gauge_interval_s([r[0] for r in rows], currents)
    return GaugeTrial(judge_discharge(evidence), interval, len(rows))


def after_first_update(currents: list[float]) -> list[float]:
    """The readings from the gauge's first update on: the ones before may predate the switch
    (the gauge's last value while charging); none when it never updated."""
    changed = next((i for i, c in enumerate(currents) if c != currents[0]), None)
    return [] if changed is None else currents[changed:]
