"""Crash recovery: what a farm process repairs when it starts, and when a lost phone comes back.

- executions whose process is gone are marked crashed; their leases freed; their RUNNING runs go
  back to PENDING (the in-flight attempt is recorded as interrupted and not counted);
- phones farm left with charging off (the store marker) get charging back on, and phones whose
  clocks it left changed get them back (farm.engine.clocks);
- farm programs still running on a phone from a dead process (benchmark, load, sampler: they
  run detached) are killed before the phone is used again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from farm.device import controls
from farm.device.session import BIN_DIR, DeviceSession
from farm.engine.baseline import idle_power_mw_of
from farm.engine.clocks import recover_clocks
from farm.engine.collect import charging_disabled_of, compute_metrics, energy_invalid_of
from farm.engine.conditions import restore_charging
from farm.engine.measurement import layers_of
from farm.engine.onphone import RUNS_DIR
from farm.errors import FarmError
from farm.experiment.external import OutputSpec
from farm.store import Store, events, ownership, views
from farm.store import devices as device_store
from farm.store import runs as run_store
from farm.store.events import EventKind
from farm.store.layers import put_layers
from farm.store.location import check_relative_run_dir
from farm.telemetry.probe import Capabilities, ProbeOutputError, capabilities_of

KILL_SETTLE_S = 0.3

# Kills the process group of every process whose argv[0] is a farm program, or that is a
# benchmark's wrapper still waiting for its memory sampler (runscript.gated_argv: it would exec
# the benchmark later): the group leader is the wrapper shell that would otherwise write the dead
# program's exit code into a run folder. `sh BIN_DIR/...` is a farm script run by its interpreter
# (farm-run.sh: a run whose host died), which would go on through the run and write its folder.
_KILL_STALE = (
    'for p in /proc/[0-9]*; do pid=${p#/proc/}; [ "$pid" = "$$" ] && continue; '
    'cl=$(tr "\\000" " " < "$p/cmdline" 2>/dev/null); '
    'case "$cl" in "$1"/*|"sh $1/"*|"sh -c "*" $2/"*"/mem.bin "*) '
    'pg=$(cut -d " " -f 5 "$p/stat" 2>/dev/null); '
    '[ -n "$pg" ] && [ "$pg" != 0 ] && kill -s KILL -- "-$pg" 2>/dev/null; '
    'kill -9 "$pid" 2>/dev/null; echo "$pid";; '
    "esac; done; true"
)


def recover_store(store: Store, experiment: str | None) -> list[str]:
    """Free what dead farm processes held; returns the run ids put back to PENDING."""
    ownership.mark_dead_executions(store)
    return run_store.reset_orphans(store, experiment)  # runs of executions no longer running


def kill_stale_processes(session: DeviceSession) -> list[int]:
    result = session.script(_KILL_STALE, BIN_DIR, RUNS_DIR)
    pids = [int(x) for x in result.stdout.split() if x.isdigit()]
    if pids:
        time.sleep(KILL_SETTLE_S)
    return pids


def restore_charging_marker(store: Store, session: DeviceSession, device_id: str) -> bool:
    """If farm left charging off on this phone, turn it back on. Returns True when it did."""
    for marker in device_store.charging_markers(store):
        if marker.device_id == device_id:
            try:
                restore_charging(session, device_id, store, marker.node, marker.enable_value)
            except FarmError as error:
                events.emit(store, EventKind.RECOVERY, f"charging not restored: {error}", device_id=device_id)
                return False
            events.emit(
                store, EventKind.RECOVERY, "charging restored after an interrupted run", device_id=device_id
            )
            return True
    return False


def restore_clocks_marker(store: Store, session: DeviceSession, device_id: str) -> bool:
    """If farm left this phone's clocks changed (farm.engine.clocks), put them back."""
    try:
        restored = recover_clocks(store, session, device_id)
    except FarmError as error:
        events.emit(store, EventKind.RECOVERY, f"clocks not restored: {error}", device_id=device_id)
        return False
    if restored:
        events.emit(
            store, EventKind.RECOVERY, "clocks restored after an interrupted run", device_id=device_id
        )
    return restored


def restore_screen_marker(store: Store, session: DeviceSession, device_id: str) -> bool:
    """If farm left this phone's screen timeout at its maximum (a run or baseline that died
    holding the screen), put the phone's own value back. Returns True when it did."""
    timeout = device_store.screen_marker(store, device_id)
    if timeout is None:
        return False
    try:
        controls.release_screen(session, timeout)
    except FarmError as error:
        events.emit(store, EventKind.RECOVERY, f"screen timeout not restored: {error}", device_id=device_id)
        return False
    device_store.clear_screen_held(store, device_id)
    events.emit(
        store, EventKind.RECOVERY, "screen timeout restored after an interrupted run", device_id=device_id
    )
    return True


def recover_phone(store: Store, session: DeviceSession, device_id: str) -> None:
    kill_stale_processes(session)
    restore_charging_marker(store, session, device_id)
    restore_clocks_marker(store, session, device_id)
    restore_screen_marker(store, session, device_id)
    session.shell(["dumpsys", "battery", "reset"])


def _stored_capabilities(text: str | None) -> Capabilities | None:
    """The phone's capabilities as the store kept them (probe JSON), or None when absent or from a
    probe this farm does not read."""
    if not text:
        return None
    try:
        return capabilities_of(json.loads(text))
    except (ValueError, ProbeOutputError):
        return None


def backfill_metrics(
    store: Store, results: Path, experiment: str, *, output: OutputSpec | None = None
) -> int:
    """DONE runs without metrics (a crash came between the result and its metrics): compute them
    from the artifacts on disk (`output`: an external program's adapter). Returns how many runs
    got metrics."""
    filled = 0
    for row in views.unmeasured_runs(store, experiment):
        if not row.artifacts_dir:
            continue
        check_relative_run_dir(row.artifacts_dir, "runs.artifacts_dir")
        if not (results / row.artifacts_dir).is_dir():
            continue  # its folder is on the machine of the coordinator that ran it (shared store)
        factors = row.factors
        caps = _stored_capabilities(row.capabilities_json)
        env = dict(views.last_done_env(store, row.run_id))
        try:
            charging_disabled = charging_disabled_of(env)
            energy_invalid = energy_invalid_of(env)
            metrics = compute_metrics(
                results / row.artifacts_dir,
                float(factors.get("gpu_load", 0.0) or 0.0),
                caps,
                discharging=charging_disabled is True and energy_invalid is None,
                idle_power_mw=idle_power_mw_of(env),
                charging_disabled=charging_disabled,
                output=output,
                energy_invalid=energy_invalid,
            )
        except Exception as error:  # keep going: one bad artifact must not block a resume
            events.emit(
                store,
                EventKind.NOTE,
                f"metrics not computed: {error}",
                experiment=experiment,
                run_id=row.run_id,
            )
            continue
        run_store.put_metrics(store, row.run_id, metrics)
        put_layers(store, row.run_id, layers_of(results / row.artifacts_dir))
        filled += 1
    return filled
