"""`conditions.clocks.affinity: big | little` through `farm run` on a virtual big.LITTLE phone
(issue 11): each run's env.json records the affinity and its CPUs, the benchmark really ran in
the pin's host cgroup (the phone's taskset, vphone/src/vphone/affinity.py), and little is slower than
big in the direction and about the size the profile's own core capacities say."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest
from vphone.cgroup import FARM_GROUP, phone_group_name, read_host_cgroups
from vphone.profiles import load_profile

from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm, open_store, run_farm, write_experiment

pytestmark = pytest.mark.integration

PROFILE = "adreno-sd865"  # little 0-3 (capacity 256), big 4-6 (900), prime 7 (1024)
CPUS = {"big": [7], "little": [0, 1, 2, 3]}  # clockplan: the policies of the highest / lowest top clock


def _group_periods(serial: str, state_dir: Path, mask: int) -> int:
    """nr_periods of the phone's host cgroup for threads pinned to `mask`: how many CFS periods
    it had work in (0 or absent: nothing ran pinned there). The group is this phone's by its state
    dir: another phone with the same serial (an earlier test's) has a group of its own."""
    host = read_host_cgroups()
    phone_dir = host.cpu_root / FARM_GROUP / phone_group_name(serial, state_dir)
    stat = phone_dir / "cpu" / f"affinity-{mask:x}" / "cpu.stat"
    if not stat.exists():
        return 0
    values = dict(line.split() for line in stat.read_text().splitlines())
    return int(values.get("nr_periods", 0))


@pytest.mark.serial  # a speed ratio: needs the host's cores
def test_affinity_big_and_little_are_recorded_pinned_and_little_is_slower(
    virtual_phones, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=[PROFILE])
    serial, state_dir = phones[0].serial, phones[0].state_dir
    results = tmp_path / "results"
    means: dict[str, list[float]] = {}
    took: dict[str, float] = {}
    for level in ("big", "little"):
        body = fast_lstm(
            sweep="{hidden: [128]}",
            params="layers: 1, seq_len: 32, input_dim: 32, classes: 2, batch: 1, backend: cpu",
            measurement="{warmup: 1, iterations: 5, min_seconds: 1, max_seconds: 20, repetitions: 2}",
            extra=f"  clocks: {{mode: none, affinity: {level}}}\n",
        )
        started = time.monotonic()
        done = run_farm(
            phones.adb_port,
            results,
            "run",
            str(write_experiment(tmp_path, f"aff_{level}", body)),
            "--no-live",
        )
        assert done.returncode == 0, done.stderr
        took[level] = round(time.monotonic() - started, 1)
        mask = sum(1 << c for c in CPUS[level])
        # The physics' view: the benchmark's threads ran in the pin's group.
        assert _group_periods(serial, state_dir, mask) > 0, f"nothing ran pinned to {mask:x}"
        with open_store(results) as store:
            runs = run_store.list_runs(store, f"aff_{level}")
            assert len(runs) == 2 and all(r.state is RunState.DONE for r in runs)
            means[level] = []
            for run in runs:
                env = json.loads((results / (run.artifacts_dir or "") / "env.json").read_text())
                clocks = env["clocks"]
                assert clocks["affinity"] == level and clocks["affinity_cpus"] == CPUS[level], clocks
                metrics = {m.name: m.value for m in run_store.get_metrics(store, run.run_id)}
                means[level].append(metrics["latency_mean_ms"])
    profile = load_profile(PROFILE)
    capacity = {c.name: c.capacity for c in profile.cpu.clusters}
    expected = capacity["prime"] / capacity["little"]  # 4: one thread at each core's top clock
    ratio = statistics.mean(means["little"]) / statistics.mean(means["big"])
    # The mean, not the median: a quota slows ~1 ms iterations by stretching the few that meet
    # the end of a CFS period's budget (see test_run_clocks.py); over >= 1 s the mean is the speed.
    # A busy host holds back the big run more than the little one (its quota is a whole core),
    # so the ratio may fall short of the profile's, never pass it by much. Over both runs of each
    # level: one run of either may meet a burst of the host's other work (CI's serial pass once
    # read little 6.5 and 3.6 ms, big 2.5 and 1.8: the slowest big against the fastest little
    # gave 1.44, the levels' means 2.3).
    assert 1.5 < ratio < 1.4 * expected, (ratio, means, expected, os.getloadavg(), took)
