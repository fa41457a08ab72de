"""The language-model study section (`report.study: llm`, experiments/llm_gpu_load.yaml): what the
literature claims about LLM inference on phones, and a verdict on each claim per phone from the
runs (pure: ReportData and the tidy frame in, a StudySection out).

Claims (MELT: Laskaridis et al., "MELTing point: Mobile Evaluation of Language Transformers",
MobiCom 2024; llama.cpp's pp/tg benchmarks):

1. decode is memory-bound: every generated token reads all the weights, so decode tokens/s falls
   as the model's bytes grow (quantisation helps decode through the bytes it saves);
2. prefill is compute-bound (a prompt is processed in batches) and gains more from the GPU than
   decode does;
3. background GPU load costs the GPU backend more than the CPU backend;
4. per token, decode costs more energy than prefill (each phase measured in its own runs).

A verdict is `holds`, `does not hold`, or `not testable` with the reason (no GPU run succeeded,
a single model, no energy). Every number in a sentence is a cell of the claim's table. Phones are
never pooled; the comparisons use the lowest background load measured unless the claim is about
load.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd

from farm.analysis.validity import FLAG_PREFIX, Check
from farm.experiment.sections import FigureKind, Study
from farm.report.export import factor_columns
from farm.report.figures import RenderedFigure, render_figure
from farm.report.model import FigureSpec, ReportData
from farm.report.numbers import number
from farm.report.views import RenderedTable, select
from farm.store.runs import RunState

PAPER = "MELT (Laskaridis et al., MobiCom 2024) and llama.cpp's prefill/decode benchmarks"
CLAIM = (
    "decode is memory-bound (tokens/s falls with model bytes); prefill is compute-bound and gains "
    "more from the GPU; background GPU load costs the GPU backend more than the CPU; a decode "
    "token costs more energy than a prefill token."
)
DECODE = "decode_tokens_per_s"
PREFILL = "prefill_tokens_per_s"
BYTES = "model_bytes"
E_PREFILL = "energy_per_prefill_token_mj"
E_DECODE = "energy_per_decode_token_mj"
COLD_LOAD = "model_load_cold_ms"
WARM_LOAD = "model_load_warm_ms"
COLD_VALID = "cold_start_valid"
GPU = "gpu"


class Verdict(enum.StrEnum):
    HOLDS = "holds"
    FAILS = "does not hold"
    UNTESTABLE = "not testable"


@dataclass(frozen=True)
class ClaimVerdict:
    claim: int
    device: str
    verdict: Verdict
    because: str


def model_label(path: object) -> str:
    """A model level (a GGUF path) as the report names it: its file name without .gguf."""
    return PurePath(str(path)).name.removesuffix(".gguf")


def _medians(rows: pd.DataFrame, metric: str, by: Sequence[str]) -> dict[tuple[object, ...], float]:
    picked = rows[rows.metric == metric]
    if picked.empty:
        return {}
    grouped = picked.groupby(list(by), dropna=False)["value"].median()
    return {(key if isinstance(key, tuple) else (key,)): float(v) for key, v in grouped.items()}


def _gpu_failure(data: ReportData) -> str:
    """Why no GPU run counted: the first failed GPU run's reason, or that none was planned."""
    for run in data.runs:
        if run.factor("backend") == GPU and run.state is RunState.FAILED and run.reason:
            return f"no GPU run succeeded ({run.reason})"
    return "no GPU run in the data"


def _table(title: str, caption: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> RenderedTable:
    return RenderedTable(title, caption, columns, tuple(rows))


def _decode_bytes(rows: pd.DataFrame) -> tuple[RenderedTable, list[ClaimVerdict]]:
    rate = _medians(rows, DECODE, ("device", "backend", "model"))
    size = _medians(rows, BYTES, ("device", "model"))
    table_rows: list[tuple[str, ...]] = []
    verdicts = []
    for device in sorted({k[0] for k in rate}, key=str):
        checks = []
        for backend in sorted({k[1] for k in rate if k[0] == device}, key=str):
            models = [(size[(device, k[2])], rate[k], k[2]) for k in rate if k[:2] == (device, backend)]
            models = sorted(m for m in models if m[0] == m[0])
            for bytes_, tps, model in models:
                table_rows.append(
                    (
                        str(device),
                        str(backend),
                        model_label(model),
                        number(bytes_ / 1e6),
                        number(tps),
                        number(bytes_ * tps / 1e9),
                    )
                )
            if len(models) >= 2:
                falling = all(b[1] < a[1] for a, b in itertools.pairwise(models))
                checks.append((backend, falling, models))
        if not checks:
            verdicts.append(ClaimVerdict(1, str(device), Verdict.UNTESTABLE, "fewer than two models decoded"))
            continue
        failed = [c for c in checks if not c[1]]
        words = "; ".join(
            f"{b}: " + ", ".join(f"{model_label(m)} {number(t)}" for _, t, m in models)
            for b, _, models in checks
        )
        verdict = Verdict.FAILS if failed else Verdict.HOLDS
        verdicts.append(ClaimVerdict(1, str(device), verdict, f"decode tokens/s by model bytes ({words})"))
    table = _table(
        "Decode tokens/s against the model's bytes (lowest background load)",
        "median over runs per phone, backend and model; GB/s = bytes x tokens/s, the weights read per second",
        ("device", "backend", "model", "MB", "decode tok/s", "GB/s"),
        table_rows,
    )
    return table, verdicts


def _gpu_gain(rows: pd.DataFrame, data: ReportData) -> tuple[RenderedTable, list[ClaimVerdict]]:
    table_rows: list[tuple[str, ...]] = []
    verdicts = []
    prefill = _medians(rows, PREFILL, ("device", "backend", "model"))
    decode = _medians(rows, DECODE, ("device", "backend", "model"))
    devices = sorted({k[0] for k in (*prefill, *decode)}, key=str)
    for device in devices:
        gains = []
        for model in sorted({k[2] for k in prefill if k[0] == device}, key=str):
            pair = []
            for metric in (prefill, decode):
                cpu = [v for k, v in metric.items() if k[0] == device and k[2] == model and k[1] != GPU]
                gpu = metric.get((device, GPU, model))
                pair.append(gpu / max(cpu) if cpu and gpu is not None else None)
            if pair[0] is not None and pair[1] is not None:
                gains.append((model, pair[0], pair[1]))
                table_rows.append((str(device), model_label(model), number(pair[0]), number(pair[1])))
        if not gains:
            verdicts.append(ClaimVerdict(2, str(device), Verdict.UNTESTABLE, _gpu_failure(data)))
            continue
        holds = all(p > d and p > 1 for _, p, d in gains)
        words = ", ".join(
            f"{model_label(m)} prefill x{number(p)} vs decode x{number(d)}" for m, p, d in gains
        )
        verdicts.append(ClaimVerdict(2, str(device), Verdict.HOLDS if holds else Verdict.FAILS, words))
    table = _table(
        "GPU over the best CPU setting, prefill and decode (lowest background load)",
        "ratio of median tokens/s, GPU / fastest CPU thread count, per phone and model",
        ("device", "model", "prefill GPU/CPU", "decode GPU/CPU"),
        table_rows,
    )
    return table, verdicts


def _load_cost(
    rows: pd.DataFrame, data: ReportData, loads: list[float]
) -> tuple[RenderedTable, list[ClaimVerdict]]:
    table_rows: list[tuple[str, ...]] = []
    verdicts = []
    if len(loads) < 2:
        return _table("Background GPU load", "", (), []), [
            ClaimVerdict(3, str(d), Verdict.UNTESTABLE, "one background load level")
            for d in sorted(set(rows.device), key=str)
        ]
    low, high = loads[0], loads[-1]
    rate = _medians(rows, DECODE, ("device", "backend", "model", "gpu_load"))
    for device in sorted({k[0] for k in rate}, key=str):
        kept: dict[str, list[float]] = {}
        for key in sorted({k[1:3] for k in rate if k[0] == device}, key=str):
            backend, model = key
            base, loaded = rate.get((device, backend, model, low)), rate.get((device, backend, model, high))
            if base and loaded is not None:
                ratio = loaded / base
                kept.setdefault(str(backend), []).append(ratio)
                table_rows.append(
                    (str(device), str(backend), model_label(model), number(low), number(high), number(ratio))
                )
        cpu = [r for b, rs in kept.items() if b != GPU for r in rs]
        gpu = kept.get(GPU, [])
        if not gpu:
            verdicts.append(ClaimVerdict(3, str(device), Verdict.UNTESTABLE, _gpu_failure(data)))
            continue
        worst_cpu = min(cpu) if cpu else None
        holds = worst_cpu is not None and max(gpu) < worst_cpu
        gpu_text = ", ".join(number(r) for r in gpu)
        because = f"decode tokens/s at load {number(high)} over load {number(low)}: GPU {gpu_text}"
        if worst_cpu is not None:
            because += f"; CPU at worst {number(worst_cpu)}"
        verdicts.append(ClaimVerdict(3, str(device), Verdict.HOLDS if holds else Verdict.FAILS, because))
    table = _table(
        f"Decode tokens/s at background load {number(high)} over load {number(low)}",
        "ratio of medians per phone, backend and model; below 1: the load slowed it",
        ("device", "backend", "model", "load", "load'", "tok/s at load' / at load"),
        table_rows,
    )
    return table, verdicts


def _flag_values(rows: pd.DataFrame, device: object, metric: str) -> list[float]:
    picked = rows[(rows.device == device) & (rows.metric == metric)]
    return [float(v) for v in picked["value"]]


def _no_energy(rows: pd.DataFrame, device: object) -> str:
    """Why a phone has no energy per token for both phases, from the flags its runs stored
    (farm.engine.collect drops energy figures when charging ran or the window was invalid)."""
    charging = _flag_values(rows, device, "charging_disabled")
    if not charging:
        return "its runs measured no power (no battery telemetry, or power: none)"
    if not any(charging):
        return (
            "charging could not be stopped (no charging switch this phone lets farm write, e.g. "
            "no root), so the battery did not power the runs alone and energy was not kept"
        )
    gauge = rows.loc[rows.device == device, FLAG_PREFIX + Check.FUEL_GAUGE_READINGS.value]
    if (gauge.dropna() == 0).any():  # a column of the tidy frame (farm.report.frame)
        return (
            "runs ended before the fuel gauge updated three times (a slow gauge: its runs need to "
            "be longer), so their energy was not kept"
        )
    return "no run with both phases' energy kept (idle power not measured, or at or above the runs' power)"


def _energy(rows: pd.DataFrame) -> tuple[RenderedTable, list[ClaimVerdict]]:
    prefill = _medians(rows, E_PREFILL, ("device", "backend", "model"))
    decode = _medians(rows, E_DECODE, ("device", "backend", "model"))
    table_rows: list[tuple[str, ...]] = []
    verdicts = []
    for device in sorted({k[0] for k in (*prefill, *decode)} or set(rows.device), key=str):
        pairs = []
        for key in sorted({k for k in (*prefill, *decode) if k[0] == device}, key=str):
            p, d = prefill.get(key), decode.get(key)
            table_rows.append(
                (
                    str(device),
                    str(key[1]),
                    model_label(key[2]),
                    number(p) if p is not None else "–",
                    number(d) if d is not None else "–",
                )
            )
            if p is not None and d is not None:
                pairs.append((key, p, d))
        if not pairs:
            verdicts.append(ClaimVerdict(4, str(device), Verdict.UNTESTABLE, _no_energy(rows, device)))
            continue
        holds = all(d > p for _, p, d in pairs)
        words = ", ".join(f"{k[1]} {model_label(k[2])}: {number(p)} vs {number(d)} mJ" for k, p, d in pairs)
        verdicts.append(
            ClaimVerdict(
                4,
                str(device),
                Verdict.HOLDS if holds else Verdict.FAILS,
                f"prefill vs decode per token: {words}",
            )
        )
    table = _table(
        "Net energy per token by phase (lowest background load)",
        "median over runs, mJ per token; each phase from its own runs (its own measuring window)",
        ("device", "backend", "model", "prefill mJ/token", "decode mJ/token"),
        table_rows,
    )
    return table, verdicts


def _loads(rows: pd.DataFrame) -> RenderedTable:
    """Model load time, cold and warm, per phone and model (no claim: a measurement). A cold load
    counts only where its run proved the model out of the page cache (`cold_start_valid`); runs
    whose drop did not take are counted, never pooled in."""
    proof = rows[rows.metric == COLD_VALID]
    proven = set(proof[proof.value >= 0.5].run_id)
    unproven = proof[proof.value < 0.5].groupby(["device", "model"])["run_id"].nunique()
    cold = _medians(rows[rows.run_id.isin(proven)], COLD_LOAD, ("device", "model"))
    warm = _medians(rows, WARM_LOAD, ("device", "model"))
    table_rows: list[tuple[str, ...]] = [
        (
            str(key[0]),
            model_label(key[1]),
            number(cold[key]) if key in cold else "–",
            number(warm[key]) if key in warm else "–",
            str(int(unproven.get(key, 0))),
        )
        for key in sorted({*cold, *warm}, key=str)
    ]
    return _table(
        "Model load, cold and warm",
        "median over runs, ms: llama.cpp's load to the end of the first evaluation; cold after the "
        "model's pages were dropped from the page cache (proven by mincore), warm the same run's "
        "second load from the page cache",
        ("device", "model", "cold ms", "warm ms", "runs not cold"),
        table_rows,
    )


CLAIM_NAMES = {
    1: "decode is memory-bound",
    2: "prefill gains more from the GPU",
    3: "background GPU load costs the GPU more",
    4: "decode costs more energy per token",
}


def llm_verdicts(data: ReportData, frame: pd.DataFrame) -> tuple[list[RenderedTable], list[ClaimVerdict]]:
    """Each claim's table and per-phone verdicts."""
    rows = select(frame, data, ())
    names = dict(factor_columns(data))
    needed = ("backend", "model", "gpu_load")
    if rows.empty or any(n not in names for n in needed):
        return [], [ClaimVerdict(c, "all phones", Verdict.UNTESTABLE, "no counted runs") for c in CLAIM_NAMES]
    rows = rows.rename(columns={names[n]: n for n in needed})
    loads = sorted({float(v) for v in rows.gpu_load.dropna()})
    unloaded = rows[rows.gpu_load == loads[0]] if loads else rows
    decode_table, v1 = _decode_bytes(unloaded)
    gain_table, v2 = _gpu_gain(unloaded, data)
    load_table, v3 = _load_cost(rows, data, loads)
    energy_table, v4 = _energy(unloaded)
    tables = [t for t in (decode_table, gain_table, load_table, energy_table, _loads(rows)) if t.rows]
    return tables, [*v1, *v2, *v3, *v4]


def llm_figures(data: ReportData) -> list[RenderedFigure]:
    """Per phone (faceted by device): decode and prefill tokens/s per model and backend at the
    lowest background load, and decode tokens/s against the load."""
    names = set(data.factor_names)
    if not {"backend", "model", "gpu_load", "gen"} <= names:
        return []
    loads = sorted(
        {float(run.factor("gpu_load")) for run in data.done_runs if run.factor("gpu_load") is not None}
    )
    held = ("prompt", "first_token", "threads", "ngl")
    pool = tuple(n for n in held if n in names)
    low = (("gpu_load", (loads[0],)),) if loads else ()
    specs = [
        FigureSpec(
            x="model",
            y=DECODE,
            color="backend",
            facet="device",
            kind=FigureKind.BAR,
            where=(*low, ("gen", (16,))),
            pool=pool,
            title="Decode tokens/s per model, per phone",
        ),
        FigureSpec(
            x="model",
            y=PREFILL,
            color="backend",
            facet="device",
            kind=FigureKind.BAR,
            where=(*low, ("gen", (0,))),
            pool=pool,
            title="Prefill tokens/s per model, per phone",
        ),
        FigureSpec(
            x="gpu_load",
            y=DECODE,
            color="backend",
            facet="device",
            where=(("gen", (16,)),),
            pool=(*pool, "model"),
            title="Decode tokens/s vs background GPU load, per phone",
        ),
    ]
    figures = []
    for spec in specs:
        figure = render_figure(data, spec)
        if figure is not None:
            figures.append(figure)
    return figures


def sentence(verdict: ClaimVerdict) -> str:
    """One claim's verdict on one phone; its numbers are cells of the claim's table."""
    name = CLAIM_NAMES[verdict.claim][0].upper() + CLAIM_NAMES[verdict.claim][1:]
    return f"{name}, on {verdict.device}: {verdict.verdict.value} ({verdict.because})."


__all__ = [
    "CLAIM",
    "CLAIM_NAMES",
    "PAPER",
    "ClaimVerdict",
    "Study",
    "Verdict",
    "llm_figures",
    "llm_verdicts",
    "model_label",
    "sentence",
]
