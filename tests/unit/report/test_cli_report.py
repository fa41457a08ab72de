"""farm report / export / import trepn through the CLI entry, on a real SQLite store in tmp_path."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from farm.cli.main import main
from farm.metric import Metric
from farm.store import events as store_events
from farm.store.db import Store
from farm.store.devices import record_device
from farm.store.events import EventKind
from farm.store.runs import PlannedRun, insert_planned, put_metrics, save_experiment
from tests.fixtures.trepn_exports import TREPN_DIR

EVIL = "<script>alert(1)</script>"


def _fill(results: Path) -> None:
    spec = {
        "name": "lstm_small",
        "benchmark": {"program": "lstm", "params": {}},
        "sweep": {"backend": ["cpu", "gpu"], "gpu_load": [0.0, 0.5]},
        "report": {"figures": [{"x": "gpu_load", "y": "latency_ms", "color": "backend", "kind": "line"}]},
    }
    with Store.in_results(results) as store:
        save_experiment(store, "lstm_small", json.dumps(spec), "x", "experiments/lstm_small.yaml")
        record_device(
            store,
            f"local/{EVIL}",
            host="local",
            serial=EVIL,
            model=EVIL,
            abi="x86_64",
            capabilities={"props": {"ro.farm.virtual": "1", "ro.product.model": EVIL}},
        )
        planned = []
        for backend in ("cpu", "gpu"):
            for load in (0.0, 0.5):
                for rep in range(2):
                    run_id = f"{backend}-{load}-{rep}"
                    factors = (("backend", backend), ("gpu_load", load))
                    planned.append(
                        PlannedRun(run_id, f"{backend}/{load}", factors, rep, f"local/{EVIL}", len(planned))
                    )
        insert_planned(store, "lstm_small", planned)
        for run in planned:
            failed = run.run_id == "gpu-0.5-1"
            state = "FAILED" if failed else "DONE"
            store.execute(
                "UPDATE runs SET state = ?, reason = ?, ran_on = device_id WHERE run_id = ?",
                (state, "benchmark exited 3: no OpenCL" if failed else None, run.run_id),
            )
            if not failed:
                latency = 10.0 + 5 * dict(run.factors)["gpu_load"] + run.repetition
                put_metrics(
                    store,
                    run.run_id,
                    [
                        Metric("latency_median_ms", latency, "ms"),
                        Metric("energy_per_inference_mj", latency * 2, "mJ"),
                        Metric("gpu_load_mean", dict(run.factors)["gpu_load"], "fraction"),
                    ],
                )
        store.execute(
            "INSERT INTO attempts (run_id, attempt, device_id, started_at, outcome, env_json) "
            "VALUES (?, 1, ?, 1, 'done', ?)",
            (
                "cpu-0.0-0",
                f"local/{EVIL}",
                json.dumps({"notes": ["screen could not be kept awake"], "farm_version": "0.1"}),
            ),
        )
        store_events.emit(
            store,
            EventKind.QUALITY,
            "charging could not be disabled (no root)",
            experiment="lstm_small",
            device_id=f"local/{EVIL}",
        )


def test_report_command_writes_html_md_and_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(tmp_path / "results")
    out = tmp_path / "out"
    main(["report", "lstm_small", "--results", str(tmp_path / "results"), "--out", str(out)])
    printed = capsys.readouterr().out
    assert str(out / "report.html") in printed
    html = (out / "report.html").read_text()
    assert EVIL not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "charging could not be disabled" in html
    assert "screen could not be kept awake" in html  # a note from the run's environment snapshot
    assert "benchmark exited 3: no OpenCL" in html
    assert "(virtual)" in html
    svgs = sorted(p.name for p in (out / "figures").glob("*.svg"))
    assert "latency_ms_vs_gpu_load_by_backend.svg" in svgs  # the declared figure
    assert "energy_per_inference_mj_vs_gpu_load_by_backend.svg" in svgs  # a default
    assert all((out / "figures" / name.replace(".svg", ".pdf")).exists() for name in svgs)
    assert html.count("<svg") == len(svgs)
    assert (out / "results.csv").read_text().startswith("experiment,run_id,")
    # without --out: next to the runs' artifacts, in results/EXPERIMENT/
    main(["report", "lstm_small", "--results", str(tmp_path / "results"), "--format", "md"])
    assert (tmp_path / "results" / "lstm_small" / "report.md").exists()
    assert not (tmp_path / "results" / "lstm_small" / "report.html").exists()


def test_report_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "results")
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "nope", "--results", str(tmp_path / "results")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("farm: no experiment named 'nope'") and "lstm_small" in err
    assert len(err.splitlines()) == 1
    with pytest.raises(SystemExit):
        main(["report", "lstm_small", "--results", str(tmp_path / "results"), "--format", "pdf"])
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "x", "--results", str(tmp_path / "empty")])
    assert "no results database" in capsys.readouterr().err


def test_export_tidy_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "results")
    out = tmp_path / "tidy.csv"
    main(["export", "lstm_small", "--csv", "--results", str(tmp_path / "results"), "--out", str(out)])
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    # 7 DONE runs x 3 metrics; the failed run has none
    assert len(rows) == 21
    assert set(rows[0]) == {
        "experiment",
        "run_id",
        "cell_id",
        "repetition",
        "device",
        "state",
        "valid",
        "backend",
        "gpu_load",
        "metric",
        "value",
        "unit",
    }
    row = next(r for r in rows if r["run_id"] == "gpu-0.5-0" and r["metric"] == "latency_median_ms")
    assert (row["backend"], row["gpu_load"], row["unit"], float(row["value"])) == ("gpu", "0.5", "ms", 12.5)
    main(["export", "lstm_small", "--csv", "--results", str(tmp_path / "results")])
    assert capsys.readouterr().out.count("\n") == 22


def test_import_trepn_json_and_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    files = [str(TREPN_DIR / "nexus6p-run1-parallel.csv")]
    main(
        [
            "import",
            "trepn",
            *files,
            "--baseline",
            str(TREPN_DIR / "nexus6p-run1-baseline.csv"),
            "--inferences",
            "100",
            "--json",
            "--experiment",
            "squeeze",
            "--results",
            str(results),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    metrics = doc[0]["metrics"]
    assert metrics["power_mean_mw"]["unit"] == "mW"
    assert metrics["power_mean_mw"]["value"] / 1e3 == pytest.approx(5.44, abs=0.02)
    assert metrics["energy_per_inference_mj"]["value"] > 0
    # stored as a DONE run: importing twice keeps one run
    main(["import", "trepn", *files, "--experiment", "squeeze", "--results", str(results)])
    assert "5.44" in capsys.readouterr().out
    with Store.in_results(results) as store:
        rows = store.query("SELECT run_id, state FROM runs WHERE experiment = 'squeeze'")
    assert [r["state"] for r in rows] == ["DONE"]
    main(["report", "squeeze", "--results", str(results), "--out", str(tmp_path / "rep"), "--format", "md"])
    assert "power_mean_mw" in (tmp_path / "rep" / "report.md").read_text()


def test_import_trepn_rejects_other_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["import", "trepn", str(bad)])
    assert exit_info.value.code == 2
    assert f"{bad}:1: " in capsys.readouterr().err
