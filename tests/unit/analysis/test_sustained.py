"""Sustained-run drift metrics and the sustained_s spec key."""

from __future__ import annotations

import numpy as np
import pytest

from farm.analysis.iterations import Iterations
from farm.analysis.sustained import sustained_metrics
from farm.errors import ConfigError
from farm.experiment import load_text


def _iterations(latencies_ms: list[float]) -> Iterations:
    ends = np.cumsum(np.array(latencies_ms) * 1e6).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    return Iterations(starts, ends, None, None, None)


def test_a_phone_that_slows_down_has_a_steady_initial_ratio_above_one() -> None:
    # 100 iterations of 10 ms, then 100 of 20 ms (throttled): initial 10, steady 20.
    metrics = {m.name: m.value for m in sustained_metrics(_iterations([10.0] * 100 + [20.0] * 100))}
    assert metrics["latency_initial_ms"] == pytest.approx(10.0)
    assert metrics["latency_steady_ms"] == pytest.approx(20.0)
    assert metrics["steady_initial_ratio"] == pytest.approx(2.0)
    flat = {m.name: m.value for m in sustained_metrics(_iterations([5.0] * 50))}
    assert flat["steady_initial_ratio"] == pytest.approx(1.0)
    assert sustained_metrics(_iterations([5.0])) == []


HEAD = "name: x\nbenchmark: {program: lstm}\n"


def test_sustained_runs_measure_for_exactly_that_long() -> None:
    experiment = load_text(HEAD + "measurement: {sustained_s: 120}\n")
    args = experiment.program_args(experiment.cells()[0])
    assert "--min-seconds=120" in args and "--max-seconds=120" in args and "--iters=1000000000" in args
    assert load_text(HEAD).settings_digest == load_text(HEAD + "measurement: {}\n").settings_digest


def test_a_run_timeout_shorter_than_the_sustained_window_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(HEAD + "measurement:\n  sustained_s: 900\n", "x.yaml")
    assert str(caught.value).startswith(
        "x.yaml:4: measurement.sustained_s: 900 s runs need timeouts.run_timeout_s"
    )
