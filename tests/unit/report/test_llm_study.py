"""The language-model study section (farm.report.llm_study) on synthetic runs with known effects:
each claim's verdict per phone, the reason a claim cannot be tested, and every number of a
sentence in the section's tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from farm.experiment import load_text
from farm.report.llm_study import Verdict, llm_verdicts, model_label
from farm.report.model import PhoneInfo, ReportData
from farm.report.query import figure_specs, table_specs
from farm.report.studies import study_section
from farm.store.results import StoredResult
from farm.store.runs import RunState
from tests.fixtures.study_samples import numbers_not_in_tables

PHONES = ("local/vp-1", "local/vp-2")
SPEC = """\
name: llm_gpu_load
benchmark:
  program: external
  binary: {x86_64: llama-bench}
  args: [-m, "{model}", -t, "{threads}", -ngl, "{ngl}", -p, "{prompt}", -n, "{gen}", -pg, "{first_token}"]
  assets: [m/small.gguf, m/big.gguf]
  output: llama_bench
sweep:
  model: [m/small.gguf, m/big.gguf]
  backend: [cpu-4t, gpu]
  threads: [4, 4]
  ngl: [0, 99]
  prompt: [64, 0]
  gen: [0, 16]
  first_token: ["64,1", "0,0"]
  gpu_load: [0, 0.6]
zip: [[backend, threads, ngl], [prompt, gen, first_token]]
report: {study: llm}
"""
BYTES = {"m/small.gguf": 4e6, "m/big.gguf": 40e6}


def _metrics(factors: Mapping[str, object]) -> dict[str, float]:
    gpu = factors["backend"] == "gpu"
    size = BYTES[str(factors["model"])]
    load = float(factors["gpu_load"])  # type: ignore[arg-type]
    slowdown = (1 - 0.8 * load) if gpu else (1 - 0.05 * load)
    values = {"model_bytes": size, "model_load_cold_ms": size / 1e5, "model_load_warm_ms": size / 4e5}
    values["cold_start_valid"] = 1.0
    if factors["gen"] == 0:
        values["prefill_tokens_per_s"] = 4e11 / size * (3.0 if gpu else 1.0) * slowdown
        values["energy_per_prefill_token_mj"] = 0.5
    else:
        values["decode_tokens_per_s"] = 4e10 / size * (1.2 if gpu else 1.0) * slowdown
        values["energy_per_decode_token_mj"] = 2.0
    return values


def _data(
    tmp_path: Path,
    *,
    gpu_fails: bool = False,
    flags: Mapping[str, Mapping[str, float]] | None = None,
) -> ReportData:
    """Runs on PHONES; `flags` per phone: what farm.engine.collect stores about energy (and then
    drops the energy figures, as it does when charging ran or the gauge was too slow)."""
    (tmp_path / "llama-bench").write_bytes(b"\x7fELF")
    (tmp_path / "m").mkdir(exist_ok=True)
    for name in BYTES:
        (tmp_path / name).write_bytes(b"GGUF")
    spec = load_text(SPEC, "llm_gpu_load.yaml", source_dir=tmp_path)
    rng = np.random.default_rng(30)
    runs = []
    for device in PHONES:
        for cell in spec.cells():
            factors = cell.as_dict()
            failed = gpu_fails and factors["backend"] == "gpu"
            for rep in range(3):
                exact = {} if failed else _metrics(factors)
                if flags is not None and device in flags:
                    exact = {k: v for k, v in exact.items() if not k.startswith("energy_")}
                noisy = {k: v * (1 + 0.01 * rng.standard_normal()) for k, v in exact.items()}
                runs.append(
                    StoredResult(
                        run_id=f"r{len(runs):04d}",
                        cell_id=cell.cell_id,
                        factors=factors,
                        repetition=rep,
                        device_id=device,
                        state=RunState.FAILED if failed else RunState.DONE,
                        reason="llama_bench output: the program reported an error: no GPU"
                        if failed
                        else None,
                        metrics={**noisy, **(flags or {}).get(device, {})},
                        units={},
                    )
                )
    return ReportData(
        experiment=spec.name,
        benchmark="external",
        spec=spec,
        factor_names=spec.factor_names,
        phones=tuple(PhoneInfo(device, f"VP{i}", virtual=True) for i, device in enumerate(PHONES)),
        runs=tuple(runs),
        figures=figure_specs(spec),
        tables=table_specs(spec),
    )


def test_each_claim_gets_a_verdict_per_phone_from_the_data(tmp_path: Path) -> None:
    section = study_section(_data(tmp_path))
    assert section is not None and section.figures and section.tables
    assert len(section.sentences) == 4 * len(PHONES)
    assert all(" holds (" in s for s in section.sentences), section.sentences
    assert numbers_not_in_tables(section) == {}
    assert model_label("m/big.gguf") == "big"


def test_claims_that_need_the_gpu_say_why_they_cannot_be_tested(tmp_path: Path) -> None:
    data = _data(tmp_path, gpu_fails=True)
    from farm.report.frame import tidy_frame

    _, verdicts = llm_verdicts(data, tidy_frame(data))
    by_claim = {(v.claim, v.device): v for v in verdicts}
    for device in PHONES:
        assert by_claim[(1, device)].verdict is Verdict.HOLDS
        for claim in (2, 3):
            judged = by_claim[(claim, device)]
            assert judged.verdict is Verdict.UNTESTABLE and "no GPU run succeeded" in judged.because
            assert "the program reported an error: no GPU" in judged.because


def test_energy_per_token_untestable_says_why_per_phone(tmp_path: Path) -> None:
    from farm.report.frame import tidy_frame

    flags = {
        PHONES[0]: {"charging_disabled": 0.0},  # no charging switch it may write
        PHONES[1]: {"charging_disabled": 1.0, "valid_fuel_gauge_readings": 0.0, "energy_valid": 0.0},
    }
    data = _data(tmp_path, flags=flags)
    _, verdicts = llm_verdicts(data, tidy_frame(data))
    energy = {v.device: v for v in verdicts if v.claim == 4}
    assert all(v.verdict is Verdict.UNTESTABLE for v in energy.values())
    assert "charging could not be stopped" in energy[PHONES[0]].because
    assert "fuel gauge updated three times" in energy[PHONES[1]].because
    section = study_section(data)
    assert section is not None and numbers_not_in_tables(section) == {}


def test_cold_and_warm_loads_per_phone_and_model_count_only_proven_cold_starts(tmp_path: Path) -> None:
    """A run whose drop did not take (cold_start_valid 0) is counted in the table, never pooled
    into the cold median; its warm load still counts."""
    from farm.report.frame import tidy_frame

    data = _data(tmp_path)
    first = data.runs[0]
    spoiled = replace(first, metrics={**first.metrics, "cold_start_valid": 0.0, "model_load_cold_ms": 1e6})
    data = replace(data, runs=(spoiled, *data.runs[1:]))
    tables, _ = llm_verdicts(data, tidy_frame(data))
    (loads,) = [t for t in tables if t.title == "Model load, cold and warm"]
    rows = {(r[0], r[1]): r[2:] for r in loads.rows}
    device, model = str(first.device_id), model_label(str(first.factors["model"]))
    cold_ms, warm_ms, not_cold = rows[(device, model)]
    size = BYTES[str(first.factors["model"])]
    assert float(cold_ms) == pytest.approx(size / 1e5, rel=0.05) and not_cold == "1"
    assert float(warm_ms) == pytest.approx(size / 4e5, rel=0.05)
    assert all(row[2] == "0" for key, row in rows.items() if key != (device, model))
