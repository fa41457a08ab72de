"""farm compare through the CLI entry, on a real SQLite store: two levels of a factor, two
experiments, invalid runs left out unless asked, --json, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from farm.analysis.validity import Check, Validity
from farm.cli.main import main
from farm.metric import Metric
from farm.store.db import Store
from farm.store.runs import PlannedRun, insert_planned, put_metrics, save_experiment

PHONES = ("local/phone-a", "local/phone-b")
REPS = 7  # 6 valid a side: exact p down to 0.002, Holm over 2 phones 0.004


def _experiment(
    store: Store, name: str, speed: dict[str, float], seed: int, invalid_rep: int | None = None
) -> None:
    spec = {"name": name, "benchmark": {"program": "lstm", "params": {}}, "sweep": {"backend": list(speed)}}
    save_experiment(store, name, json.dumps(spec), "x", f"experiments/{name}.yaml")
    rng = np.random.default_rng(seed)
    planned = [
        PlannedRun(f"{name}-{p}-{b}-{r}".replace("/", "_"), b, (("backend", b),), r, p, i)
        for i, (p, b, r) in enumerate((p, b, r) for p in PHONES for b in speed for r in range(REPS))
    ]
    insert_planned(store, name, planned)
    for run in planned:
        store.execute("UPDATE runs SET state = 'DONE', ran_on = device_id WHERE run_id = ?", (run.run_id,))
        backend = dict(run.factors)["backend"]
        metrics = [Metric("latency_median_ms", speed[backend] * float(rng.lognormal(0, 0.05)), "ms")]
        if run.repetition == invalid_rep:
            # A throttled outlier, flagged invalid: 100x slower.
            flags = Validity({Check.NOT_THROTTLED: False}).to_metrics()
            metrics = [Metric("latency_median_ms", 1000.0 * speed[backend], "ms"), *flags]
        put_metrics(store, run.run_id, metrics)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    with Store.in_results(folder) as store:
        _experiment(store, "clocks", {"min": 20.0, "max": 10.0}, seed=1, invalid_rep=0)
        _experiment(store, "same_a", {"cpu": 10.0}, seed=2)
        _experiment(store, "same_b", {"cpu": 10.0}, seed=3)
        _few_runs_and_a_failed_phone(store)
    return folder


def _few_runs_and_a_failed_phone(store: Store) -> None:
    """`few`: 3 runs a side on phone-a, gpu 8x faster; phone-c's runs all failed."""
    spec = {
        "name": "few",
        "benchmark": {"program": "lstm", "params": {}},
        "sweep": {"backend": ["cpu", "gpu"]},
    }
    save_experiment(store, "few", json.dumps(spec), "x", "experiments/few.yaml")
    planned = [
        PlannedRun(f"few-{p}-{b}-{r}".replace("/", "_"), b, (("backend", b),), r, p, i)
        for i, (p, b, r) in enumerate(
            (p, b, r) for p in ("local/phone-a", "local/phone-c") for b in ("cpu", "gpu") for r in range(3)
        )
    ]
    insert_planned(store, "few", planned)
    for run in planned:
        if run.device_id == "local/phone-c":
            store.execute(
                "UPDATE runs SET state = 'FAILED', reason = 'no OpenCL driver' WHERE run_id = ?",
                (run.run_id,),
            )
            continue
        store.execute("UPDATE runs SET state = 'DONE', ran_on = device_id WHERE run_id = ?", (run.run_id,))
        latency = (80.0 if dict(run.factors)["backend"] == "cpu" else 10.0) + run.repetition
        put_metrics(store, run.run_id, [Metric("latency_median_ms", latency, "ms")])


def test_too_few_runs_say_so_and_a_failed_phone_stays_with_its_reason(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "compare", "few", "--by", "backend=cpu,gpu", "--results", str(results))
    assert code == 0
    phone_a = next(line for line in out.splitlines() if line.startswith("local/phone-a"))
    assert (
        "no detectable difference (too few runs to reach alpha 0.05: 3 vs 3 runs give no p below 0.1"
        in phone_a
    )
    phone_c = next(line for line in out.splitlines() if line.startswith("local/phone-c"))
    assert "6 failed" in phone_c and "no OpenCL driver" in phone_c


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exited.value.code or 0), out.out, out.err


def test_pinned_max_against_min_is_found_faster_per_phone(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        capsys, "compare", "clocks", "--by", "backend=min,max", "--json", "--results", str(results)
    )
    assert code == 0
    document = json.loads(out)
    assert [c["device"] for c in document["cells"]] == list(PHONES)
    for cell in document["cells"]:
        assert cell["verdict"] == "faster"
        assert cell["p_holm"] < 0.01
        assert 0.45 <= cell["ratio"] <= 0.55 and cell["ratio_ci"][1] < 1.0
        assert (cell["n_a"], cell["n_b"]) == (REPS - 1, REPS - 1)  # the invalid run is left out
    assert document["invalid_left_out"] == 2 * 2


def test_invalid_runs_count_only_when_asked(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(
        capsys,
        "compare",
        "clocks",
        "--by",
        "backend=min,max",
        "--json",
        "--include-invalid",
        "--results",
        str(results),
    )
    assert {(c["n_a"], c["n_b"]) for c in json.loads(out)["cells"]} == {(REPS, REPS)}


def test_two_identical_experiments_show_no_difference(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "compare", "same_a", "same_b", "--results", str(results))
    assert code == 0
    assert out.count("no detectable difference") == len(PHONES)
    assert "per phone, never pooled" in out


@pytest.mark.parametrize(
    ("args", "piece"),
    [
        (("compare", "clocks"), "name two experiments, or one experiment and --by"),
        (("compare", "clocks", "--by", "backend"), "--by 'backend': expected FACTOR=LEVEL_A,LEVEL_B"),
        (("compare", "clocks", "--by", "hidden=1,2"), "clocks has no factor 'hidden'"),
        (("compare", "clocks", "--by", "backend=min,mid"), "backend has no level 'mid'"),
        (("compare", "nope", "same_a"), "no experiment named 'nope'"),
        (("compare", "same_a", "same_b", "--metric", "latency_typo"), "nothing to compare"),
    ],
)
def test_bad_input_is_one_line(
    results: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], piece: str
) -> None:
    code, out, err = _run(capsys, *args, "--results", str(results))
    assert code == 2, (out, err)
    assert piece in err and err.count("\n") == 1 and "Traceback" not in err
