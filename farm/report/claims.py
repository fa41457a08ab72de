"""Each seed paper's claims, judged per phone from the study's valid runs (pure: ReportData and
its tidy frame in, ClaimCheck values out; farm.analysis.verdict does the statistics).

A claim is tested on one phone at a time (phones are never pooled) and, where the study has
factors the claim does not name (hidden units, model size), once per cell of them. A claim that
this phone cannot test says why: a GPU that is an OpenCL CPU device (PoCL on the host, as on a
virtual phone) emulates fp16 in CPU code and moves "device" data with a memcpy in host RAM; a
phone without energy metrics cannot say how many joules an image takes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from farm.analysis.resource_model import GemmSample, fit
from farm.analysis.verdict import Hypothesis, Judgement, Verdict, level_test, ratio_test, tally, untestable
from farm.experiment.expand import same_level
from farm.experiment.sections import PowerSource, Study
from farm.report.export import factor_columns
from farm.report.model import ReportData
from farm.report.views import select

LATENCY = "latency_median_ms"
ENERGY = "energy_per_inference_mj"
OPENCL_CPU = "opencl_device_cpu"
MOVED = ("opencl_h2d_total_ms", "opencl_d2h_total_ms")
KERNEL = "opencl_kernel_total_ms"
# MobiRNN: the GPU loses its lead "above about 70%" background load.
HIGH_LOAD = 0.7
# Augur reports predictions close to the measured times; our bar for "predicts": the median
# held-out relative error of a shape's time below 25 %.
PREDICTION_ERROR_BAR = 0.25
CPU_DEVICE_FP16 = (
    "its GPU is an OpenCL CPU device (PoCL on the host CPU, as on a virtual phone): fp16 is emulated "
    "in CPU code, so no fp16 hardware is measured"
)
CPU_DEVICE_MOVES = (
    "its GPU is an OpenCL CPU device (PoCL on the host CPU, as on a virtual phone): host-device "
    "transfers are a memcpy in host RAM, not the phone's bus"
)


@dataclass(frozen=True)
class PhoneVerdict:
    device: str
    cell: str  # the levels of the factors the claim does not name, "" when none
    judgement: Judgement


@dataclass(frozen=True)
class ClaimCheck:
    claim: str  # the paper's claim, one sentence
    paper: str  # what the paper measured, for comparison
    phones: tuple[PhoneVerdict, ...]

    @property
    def tally(self) -> dict[Verdict, int]:
        return tally([p.judgement for p in self.phones])


class Runs:
    """The valid runs' values of one study, looked up by metric, phone and factor levels."""

    def __init__(self, data: ReportData, frame: pd.DataFrame) -> None:
        self.data = data
        self.rows = select(frame, data, ())
        self.column = dict(factor_columns(data))

    @property
    def devices(self) -> list[str]:
        return sorted({str(d) for d in self.rows["device"].dropna()})

    def has(self, factor: str) -> bool:
        return factor in self.column

    def levels(self, factor: str, **where: Hashable) -> list[Hashable]:
        rows = self._where(self.rows, where)
        if factor not in self.column:
            return []
        values = [v for v in rows[self.column[factor]].dropna().unique()]
        return sorted(values, key=lambda v: (str(type(v)), v))

    def _where(self, rows: pd.DataFrame, where: dict[str, Hashable]) -> pd.DataFrame:
        for name, level in where.items():
            if name == "device":
                rows = rows[rows["device"] == level]
            elif name in self.column:
                keep = rows[self.column[name]].map(lambda v, x=level: same_level(v, x))
                rows = rows[keep.astype(bool)]
        return rows

    def values(self, metric: str, **where: Hashable) -> NDArray[np.float64]:
        rows = self._where(self.rows[self.rows["metric"] == metric], where)
        return rows["value"].to_numpy(dtype=np.float64)

    def per_run(self, metrics: Sequence[str], **where: Hashable) -> pd.DataFrame:
        """One row per run, a column per metric (runs missing one of them left out)."""
        rows = self._where(self.rows[self.rows["metric"].isin(metrics)], where)
        if rows.empty:
            return pd.DataFrame(columns=list(metrics))
        wide = rows.pivot_table(index="run_id", columns="metric", values="value")
        return wide.dropna(subset=[m for m in metrics if m in wide.columns]).reindex(columns=list(metrics))

    def opencl_on_cpu(self, device: str) -> bool:
        """Whether this phone's GPU runs were served by an OpenCL CPU device (or, for runs stored
        before the programs reported it, the phone is virtual: its GPU is PoCL on the host)."""
        flags = self.values(OPENCL_CPU, device=device)
        if flags.size:
            return bool(np.any(flags > 0.5))
        return any(p.virtual for p in self.data.phones if p.device_id == device)

    def cells(self, factors: Sequence[str]) -> list[dict[str, Hashable]]:
        """Every combination of these factors' levels the runs have (one empty cell without any)."""
        present = [f for f in factors if f in self.column]
        if not present:
            return [{}]
        combos = self.rows[[self.column[f] for f in present]].drop_duplicates().dropna()
        return [
            dict(zip(present, combo, strict=True))
            for combo in sorted(combos.itertuples(index=False, name=None))
        ]


def cell_text(cell: dict[str, Hashable]) -> str:
    return ", ".join(f"{name}={value}" for name, value in cell.items())


def _per_phone(
    runs: Runs, factors: Sequence[str], judge: Callable[[str, dict[str, Hashable]], Judgement]
) -> tuple[PhoneVerdict, ...]:
    cells = runs.cells(factors)
    # a single cell is the whole study: no need to name it on every row
    return tuple(
        PhoneVerdict(device, cell_text(cell) if len(cells) > 1 else "", judge(device, cell))
        for device in runs.devices
        for cell in cells
    )


def _missing(hypothesis: Hypothesis, what: str) -> Judgement:
    return untestable(hypothesis, f"this phone has no valid {what} runs (see Plan vs done)")


# -- MobiRNN ------------------------------------------------------------------------------------


def mobirnn_claims(runs: Runs) -> tuple[ClaimCheck, ...]:
    loads = [float(str(x)) for x in runs.levels("gpu_load")] or [0.0]
    low, high = min(loads), max(loads)
    at_low = {"gpu_load": low} if runs.has("gpu_load") else {}
    at_high = {"gpu_load": high} if runs.has("gpu_load") else {}
    cells = ("hidden", "layers")

    def lead(device: str, cell: dict[str, Hashable]) -> Judgement:
        hypothesis = Hypothesis(f"speedup of gpu over cpu at load {low:g}", 1.0)
        cpu = runs.values(LATENCY, device=device, backend="cpu", **at_low, **cell)
        gpu = runs.values(LATENCY, device=device, backend="gpu", **at_low, **cell)
        if cpu.size == 0 or gpu.size == 0:
            return _missing(hypothesis, "cpu or gpu")
        return ratio_test(cpu, gpu, hypothesis)

    def loses(device: str, cell: dict[str, Hashable]) -> Judgement:
        hypothesis = Hypothesis(f"speedup of gpu over cpu at load {high:g}", 1.0, above=False)
        if high < HIGH_LOAD:
            return untestable(
                hypothesis, f"the highest background load measured is {high:g}, below {HIGH_LOAD:g}"
            )
        if lead(device, cell).verdict is not Verdict.REPRODUCED:
            return untestable(hypothesis, f"the GPU has no lead over cpu at load {low:g} to lose (claim 1)")
        cpu = runs.values(LATENCY, device=device, backend="cpu", **at_high, **cell)
        gpu = runs.values(LATENCY, device=device, backend="gpu", **at_high, **cell)
        if cpu.size == 0 or gpu.size == 0:
            return _missing(hypothesis, f"cpu or gpu runs at load {high:g}")
        return ratio_test(cpu, gpu, hypothesis)

    def multithread(device: str, cell: dict[str, Hashable]) -> Judgement:
        hypothesis = Hypothesis(f"cpu-mt's speedup over cpu / the gpu's, at load {low:g}", 0.7)
        if lead(device, cell).verdict is not Verdict.REPRODUCED:
            return untestable(hypothesis, f"the GPU has no gain over cpu at load {low:g} for cpu-mt to reach")
        gpu = runs.values(LATENCY, device=device, backend="gpu", **at_low, **cell)
        mt = runs.values(LATENCY, device=device, backend="cpu-mt", **at_low, **cell)
        if mt.size == 0:
            return _missing(hypothesis, "cpu-mt")
        # (cpu / mt) / (cpu / gpu) = gpu / mt
        return ratio_test(gpu, mt, hypothesis)

    return (
        ClaimCheck(
            "At low background GPU load the GPU runs LSTM inference faster than the single-threaded CPU.",
            "3-4x faster",
            _per_phone(runs, cells, lead),
        ),
        ClaimCheck(
            f"Above about {HIGH_LOAD:.0%} background GPU load the GPU loses that lead: the CPU wins.",
            "the benefit drops above ~70% load",
            _per_phone(runs, cells, loses),
        ),
        ClaimCheck(
            "A multi-threaded CPU reaches at least 70% of the GPU's speedup over the single-threaded CPU.",
            ">= 70% of the GPU's gain",
            _per_phone(runs, cells, multithread),
        ),
    )


# -- Motamedi (SqueezeNet) ----------------------------------------------------------------------


def _best_g(runs: Runs, device: str, **where: Hashable) -> Hashable | None:
    """The g with the lowest median GPU latency on this phone (None without GPU runs)."""
    medians = {
        g: float(np.median(v))
        for g in runs.levels("g", device=device, backend="gpu", **where)
        if (v := runs.values(LATENCY, device=device, backend="gpu", g=g, **where)).size
    }
    return min(medians, key=lambda g: medians[g]) if medians else None


def squeezenet_claims(runs: Runs) -> tuple[ClaimCheck, ...]:
    fp32 = {"precision": "fp32"} if runs.has("precision") else {}

    def parallel(device: str, cell: dict[str, Hashable]) -> Judgement:
        g = _best_g(runs, device, **fp32) if runs.has("g") else None
        at_g = {"g": g} if g is not None else {}
        hypothesis = Hypothesis(
            f"speedup of the gpu (g {g}) over sequential cpu" if g else "speedup of gpu over cpu", 1.0
        )
        cpu = runs.values(LATENCY, device=device, backend="cpu", **fp32)
        gpu = runs.values(LATENCY, device=device, backend="gpu", **fp32, **at_g)
        if cpu.size == 0 or gpu.size == 0:
            return _missing(hypothesis, "cpu or gpu")
        return ratio_test(cpu, gpu, hypothesis)

    def relaxed(device: str, cell: dict[str, Hashable]) -> Judgement:
        hypothesis = Hypothesis("speedup of fp16 over fp32 on the gpu", 1.0)
        if not runs.has("precision"):
            return untestable(hypothesis, "the study does not vary precision")
        if runs.opencl_on_cpu(device):
            return untestable(hypothesis, CPU_DEVICE_FP16)
        g1 = {"g": 1} if runs.has("g") else {}
        fp32_runs = runs.values(LATENCY, device=device, backend="gpu", precision="fp32", **g1)
        fp16_runs = runs.values(LATENCY, device=device, backend="gpu", precision="fp16", **g1)
        if fp32_runs.size == 0 or fp16_runs.size == 0:
            return _missing(hypothesis, "gpu fp32 or fp16")
        return ratio_test(fp32_runs, fp16_runs, hypothesis)

    def granularity(device: str, cell: dict[str, Hashable]) -> Judgement:
        return _granularity(runs, device, fp32)

    def energy(device: str, cell: dict[str, Hashable]) -> Judgement:
        hypothesis = Hypothesis("energy per image on the gpu [mJ]", 600.0, above=False)
        spec = runs.data.spec
        if spec is not None and spec.telemetry.power is PowerSource.NONE:
            return untestable(hypothesis, "this variant measures no power (telemetry.power: none)")
        g = _best_g(runs, device, **fp32) if runs.has("g") else None
        values = runs.values(
            ENERGY, device=device, backend="gpu", **fp32, **({"g": g} if g is not None else {})
        )
        if values.size == 0:
            return untestable(hypothesis, "no energy was measured on this phone (see Data quality)")
        # Net energy at or below zero is idle noise larger than the run's own energy, not a result.
        positive = values[values > 0]
        if positive.size == 0:
            return untestable(hypothesis, "every run's net energy is at or below the idle baseline's noise")
        return level_test(positive, hypothesis)

    return (
        ClaimCheck(
            "Parallel SqueezeNet on the phone GPU is much faster than sequential CPU code (fp32).",
            "59x (Galaxy S7) to 311x (Nexus 5)",
            _per_phone(runs, (), parallel),
        ),
        ClaimCheck(
            "Relaxed (fp16) arithmetic makes the GPU faster than precise (fp32).",
            "2.11-4.16x faster",
            _per_phone(runs, (), relaxed),
        ),
        ClaimCheck(
            "The best thread granularity g depends on the layer (tuned per layer and phone).",
            "best g differs between layers and phones",
            _per_phone(runs, (), granularity),
        ),
        ClaimCheck(
            "An image takes less than 0.6 J on the GPU.",
            "below 0.6 J per image",
            _per_phone(runs, (), energy),
        ),
    )


def _granularity(runs: Runs, device: str, fp32: Mapping[str, Hashable]) -> Judgement:
    """Layers whose best g is clear (the runner-up significantly slower): reproduced when two of
    them prefer different g, not reproduced when at least two are clear and all prefer one."""
    hypothesis = Hypothesis("runner-up g's layer time / best g's", 1.0)
    gs = runs.levels("g", device=device, backend="gpu", **fp32)
    if len(gs) < 2:
        return untestable(hypothesis, "fewer than two levels of g were measured on this phone's gpu")
    layers = sorted(
        m
        for m in runs.rows.loc[runs.rows["device"] == device, "metric"].unique()
        if str(m).startswith("layer_")
    )
    if not layers:
        return untestable(hypothesis, "no per-layer times were stored for this phone")
    clear: list[tuple[str, Hashable, Judgement]] = []
    undecided: Judgement | None = None
    for layer in layers:
        samples = {g: runs.values(layer, device=device, backend="gpu", g=g, **fp32) for g in gs}
        samples = {g: v for g, v in samples.items() if v.size}
        if len(samples) < 2:
            continue
        order = sorted(samples, key=lambda g: float(np.median(samples[g])))
        best, second = order[0], order[1]
        judged = ratio_test(samples[second], samples[best], hypothesis)
        if judged.verdict is Verdict.REPRODUCED:
            clear.append((layer, best, judged))
        elif undecided is None:
            undecided = judged
    preferred = {g for _, g, _ in clear}
    if len(preferred) >= 2:
        # the weakest of the clear layers carries the evidence
        layer, g, weakest = max(clear, key=lambda c: c[2].evidence.p_value if c[2].evidence else 1.0)
        return Judgement(hypothesis, Verdict.REPRODUCED, weakest.evidence, "")
    if len(clear) >= 2:
        layer, g, weakest = max(clear, key=lambda c: c[2].evidence.p_value if c[2].evidence else 1.0)
        return Judgement(
            hypothesis,
            Verdict.NOT_REPRODUCED,
            weakest.evidence,
            f"every layer whose best g is clear ({len(clear)} of {len(layers)}) prefers g {g}",
        )
    base = undecided or (clear[0][2] if clear else None)
    return Judgement(
        hypothesis,
        Verdict.UNDECIDED,
        base.evidence if base else None,
        f"only {len(clear)} of {len(layers)} layers have a clear best g"
        + (f" ({base.reason})" if base is not None and base.reason else ""),
    )


# -- Das et al. (training) ----------------------------------------------------------------------


def training_claims(runs: Runs) -> tuple[ClaimCheck, ...]:
    copy = {"buffers": "copy"} if runs.has("buffers") else {}

    def slower(device: str, cell: dict[str, Hashable]) -> Judgement:
        hypothesis = Hypothesis("gpu step time / cpu step time (copy buffers)", 1.0)
        gpu = runs.values(LATENCY, device=device, backend="gpu", **copy, **cell)
        cpu = runs.values(LATENCY, device=device, backend="cpu", **cell)
        if cpu.size == 0 or gpu.size == 0:
            return _missing(hypothesis, "cpu or gpu")
        return ratio_test(gpu, cpu, hypothesis)

    def movement(device: str, cell: dict[str, Hashable]) -> Judgement:
        # moving > computing is a share above 1/2; per-run times on both sides let 4 vs 4 runs
        # decide (a sign test on 4 shares never reaches p < 0.05)
        hypothesis = Hypothesis("the gpu's data movement time / kernel time (copy buffers)", 1.0)
        if runs.opencl_on_cpu(device):
            return untestable(hypothesis, CPU_DEVICE_MOVES)
        wide = runs.per_run([*MOVED, KERNEL], device=device, backend="gpu", **copy, **cell)
        if wide.empty:
            return _missing(hypothesis, "gpu runs with an OpenCL time split")
        moved = wide[list(MOVED)].sum(axis=1).to_numpy(dtype=np.float64)
        return ratio_test(moved, wide[KERNEL].to_numpy(dtype=np.float64), hypothesis)

    return (
        ClaimCheck(
            "Training a fully connected network on the phone GPU is slower than on the CPU.",
            "GPU slower than CPU",
            _per_phone(runs, ("layers",), slower),
        ),
        ClaimCheck(
            "Most of the GPU's training time moves data between host and device.",
            "about 91% of the time",
            _per_phone(runs, ("layers",), movement),
        ),
    )


# -- Augur (GEMM) -------------------------------------------------------------------------------


def held_out_errors(samples: Sequence[GemmSample]) -> NDArray[np.float64]:
    """Per shape, the relative error of the time predicted by a model fitted on the other shapes
    (farm model fit's default form, per-call cost + GFLOP + MB moved; fastest run per shape)."""
    fastest: dict[tuple[int, int, int], GemmSample] = {}
    for s in samples:
        if s.shape not in fastest or s.time_ms < fastest[s.shape].time_ms:
            fastest[s.shape] = s
    shapes = list(fastest.values())
    errors = []
    for left in shapes:
        rest = [s for s in shapes if s.shape != left.shape]
        model = fit(rest, "flops+bytes")
        errors.append(abs(model.predict_ms(*left.shape, left.precision) - left.time_ms) / left.time_ms)
    return np.asarray(errors, dtype=np.float64)


def gemm_claims(runs: Runs) -> tuple[ClaimCheck, ...]:
    fp32 = {"precision": "fp32"} if runs.has("precision") else {}

    def predicts(device: str, cell: dict[str, Hashable]) -> Judgement:
        hypothesis = Hypothesis(
            "held-out relative error of the time predicted from (m, n, k)", PREDICTION_ERROR_BAR, above=False
        )
        wide = runs.per_run([LATENCY], device=device, **fp32, **cell)
        if wide.empty or not all(runs.has(f) for f in ("m", "n", "k")):
            return _missing(hypothesis, "gemm")
        factors = runs.rows.drop_duplicates("run_id").set_index("run_id")
        samples = [
            GemmSample(
                int(factors.at[run_id, runs.column["m"]]),
                int(factors.at[run_id, runs.column["n"]]),
                int(factors.at[run_id, runs.column["k"]]),
                float(time_ms),
            )
            for run_id, time_ms in wide[LATENCY].items()
        ]
        if len({s.shape for s in samples}) < 3:
            return untestable(hypothesis, "fewer than 3 shapes: a shape left out leaves too few to fit")
        return level_test(held_out_errors(samples), hypothesis)

    return (
        ClaimCheck(
            "A GEMM profile of the phone predicts a layer's time from its matrix dimensions (m, n, k).",
            "time predicted from the layer's GEMM dimensions",
            _per_phone(runs, ("backend",), predicts),
        ),
    )


CLAIMS: dict[Study, Callable[[Runs], tuple[ClaimCheck, ...]]] = {
    Study.MOBIRNN: mobirnn_claims,
    Study.SQUEEZENET: squeezenet_claims,
    Study.TRAINING: training_claims,
    Study.GEMM: gemm_claims,
}


def claim_checks(study: Study, data: ReportData, frame: pd.DataFrame) -> tuple[ClaimCheck, ...]:
    """The study's claims judged per phone; () for a study without claims here."""
    judge = CLAIMS.get(study)
    return judge(Runs(data, frame)) if judge is not None else ()
