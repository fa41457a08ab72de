"""The live view shows the running phone's GPU load, battery power and temperature, refreshed about
once a second from the run's own sampler trace (farm.engine.watch), and they agree with the metrics
the run stores afterwards."""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

import pytest

from farm.engine.model import Phase
from farm.engine.runner import RunOptions, run_experiment
from farm.engine.scheduler import Sweep
from farm.live.from_engine import snapshot_of
from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, write_experiment

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def phone(module_virtual_phones):  # type: ignore[no-untyped-def]
    """One phone for both tests: the second finds the programs deployed already."""
    return module_virtual_phones(count=1, profiles=["adreno-sd865"])


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FARM_CONFIG_DIR", str(tmp_path / "config"))  # no lab hosts of the user's


def test_running_rows_carry_live_gpu_power_and_temperature(phone, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Iterations of a few ms: a tiny LSTM over 6 s prints a million per-iteration events (100 MB)
    # when the phone is not pre-empted, and the host then spends minutes on them.
    body = fast_lstm(
        "{hidden: [128], gpu_load: [0.4]}",
        "{warmup: 1, iterations: 3, min_seconds: 6, max_seconds: 20, repetitions: 1}",
        params="layers: 1, seq_len: 32, input_dim: 32, classes: 2, batch: 1, backend: cpu",
        extra="gpu_load: {settle_s: 1}\n",
        telemetry="{idle_baseline_s: 0, disable_charging: true}",
    )
    spec = write_experiment(tmp_path, "live", body)
    results = tmp_path / "results"
    started = time.time()
    running: list[tuple[int | None, float | None, float | None, float | None]] = []

    def tick(sweep: Sweep) -> None:
        snapshot = snapshot_of(sweep, started_at=started)
        for row in snapshot.phones:
            status = sweep.status[f"{row.host}/{row.phone}"]
            if row.state is Phase.RUNNING and status.live is not None:
                running.append((status.live.t_ns, row.gpu_load_achieved, row.power_mw, row.temperature_c))

    options = RunOptions(spec, results=results, adb_port=phone.adb_port, live_telemetry=True)
    summary = run_experiment(options, tick=tick)
    assert summary.done == 1, summary

    refreshed = sorted({t_ns for t_ns, *_ in running if t_ns is not None})
    # ~1 Hz over a run of at least 6 s: several distinct readings, not one frozen value
    assert len(refreshed) >= 3, refreshed
    gaps_s = [(b - a) / 1e9 for a, b in itertools.pairwise(refreshed)]
    assert statistics.median(gaps_s) < 3.0, gaps_s
    assert all(g is not None and 0.0 <= g <= 1.0 for _t, g, _p, _c in running)
    # Discharging: charging is off before the sampler starts, but the fuel gauge latches its
    # current once a second (the profile's fuel_gauge_interval_s; later on a loaded host), so the
    # first readings may still be the charger's. From the middle of the run on, all are discharge.
    settled = running[len(running) // 2 :]
    assert all(p is not None and p > 0 for _t, _g, p, _c in settled), running
    assert all(c is not None and 15.0 < c < 90.0 for _t, _g, _p, c in running)

    with open_store(results) as store:
        (run,) = run_store.list_runs(store, "live")
        assert run.state is RunState.DONE
        stored = {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}
    live_gpu = statistics.mean(g for _t, g, _p, _c in running if g is not None)
    live_power = statistics.mean(p for _t, _g, p, _c in settled if p is not None)
    # the live numbers come from the same trace, read the same way as the stored metrics
    assert live_gpu == pytest.approx(stored["gpu_load_mean"], abs=0.25)
    assert live_power == pytest.approx(stored["power_mean_mw"], rel=0.35)


def test_without_a_live_view_no_phone_is_polled(phone, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = write_experiment(tmp_path, "quiet", fast_lstm())
    seen: list[object] = []

    def tick(sweep: Sweep) -> None:
        seen.extend(status.live for status in sweep.status.values() if status.live is not None)

    summary = run_experiment(
        RunOptions(spec, results=tmp_path / "results", adb_port=phone.adb_port), tick=tick
    )
    assert summary.done == 1 and seen == []
