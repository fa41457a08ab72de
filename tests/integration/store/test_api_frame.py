"""farm.api.load_frame and `farm export --parquet` on a real SQLite store and a real PostgreSQL:
one row per run and metric, phone identity, validity flags as columns, the same frame both ways."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from farm.api import load_frame
from farm.errors import ConfigError
from farm.store import Metric, Store, StoreLocation
from farm.store import runs as rq
from farm.store.devices import record_device
from farm.store.location import resolve

SPEC = {
    "name": "frame",
    "benchmark": {"program": "lstm", "params": {}},
    "sweep": {"backend": ["cpu", "gpu"], "hidden": [32, 128]},
}
PHONES = {"local/vp-1": "VP6520", "local/vp-2": "VP8050"}
THROTTLED = "gpu-128-local_vp-2-1"


def _fill(location: StoreLocation) -> None:
    with Store(location) as store:
        rq.save_experiment(store, "frame", json.dumps(SPEC), "x", "frame.yaml")
        for device, model in PHONES.items():
            record_device(
                store, device, host="local", serial=device[6:], model=model, abi="x86_64",
                capabilities={"props": {"ro.farm.virtual": "1"}},
            )  # fmt: skip
        planned = [
            rq.PlannedRun(
                f"{b}-{h}-{d.replace('/', '_')}-{r}", f"{b}/{h}", (("backend", b), ("hidden", h)), r, d, 0
            )
            for b in ("cpu", "gpu")
            for h in (32, 128)
            for d in PHONES
            for r in (0, 1)
        ]
        rq.insert_planned(store, "frame", planned)
        for run in planned:
            store.execute(
                "UPDATE runs SET state = 'DONE', ran_on = device_id WHERE run_id = ?", (run.run_id,)
            )
            latency = (2.0 if run.run_id.startswith("gpu") else 8.0) * run.factors[1][1] / 32
            throttled = run.run_id == THROTTLED
            rq.put_metrics(
                store,
                run.run_id,
                [
                    Metric("latency_median_ms", latency + run.repetition * 0.1, "ms"),
                    Metric("energy_per_inference_mj", latency * 3, "mJ"),
                    Metric("valid_not_throttled", 0.0 if throttled else 1.0, "bool"),
                    Metric("valid_min_duration", 1.0, "bool"),
                    Metric("valid", 0.0 if throttled else 1.0, "bool"),
                ],
            )


@pytest.fixture(params=["sqlite", "postgresql"])
def results(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    where = request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "results")
    _fill(resolve(where))
    return where


def test_the_frame_has_a_row_per_run_and_metric_with_phone_and_validity(results: str) -> None:
    frame = load_frame("frame", results)
    assert len(frame) == 16 * 2  # 16 runs x (latency, energy); the flags are columns, not rows
    assert set(frame.metric) == {"latency_median_ms", "energy_per_inference_mj"}
    assert frame.groupby("device").phone_model.first().to_dict() == PHONES
    assert frame.phone_virtual.all()
    assert set(frame.loc[~frame.valid, "run_id"]) == {THROTTLED}
    assert not frame.loc[frame.run_id == THROTTLED, "valid_not_throttled"].any()
    assert frame.valid_clocks_as_requested.isna().all()  # a check that does not apply is missing
    latency = frame[(frame.metric == "latency_median_ms") & frame.valid]
    medians = latency.groupby(["backend", "hidden"]).value.median()
    # cpu/32: 8.0, 8.1 on both phones; gpu/128 lost its throttled 8.1, so its median is 8.0
    assert medians[("cpu", 32)] == pytest.approx(8.05) and medians[("gpu", 128)] == pytest.approx(8.0)
    assert frame.hidden.dtype.kind == "i" and frame.value.dtype.kind == "f"


def test_parquet_export_is_the_same_frame(results: str, tmp_path: Path) -> None:
    out = tmp_path / "frame.parquet"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "farm",
            "export",
            "frame",
            "--parquet",
            "--out",
            str(out),
            "--results",
            results,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == f"{out}: 32 rows"
    pd.testing.assert_frame_equal(pd.read_parquet(out), load_frame("frame", results))


def test_unknown_experiment_and_parquet_without_out_are_one_line(tmp_path: Path) -> None:
    where = str(tmp_path / "results")
    _fill(resolve(where))
    with pytest.raises(ConfigError, match="no experiment named 'nope'"):
        load_frame("nope", where)
    done = subprocess.run(
        [sys.executable, "-m", "farm", "export", "frame", "--parquet", "--results", where],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "--out" in done.stderr
