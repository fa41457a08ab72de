"""Study sections (pure): for an experiment that reproduces a seed paper (`report.study`), the
section that makes the paper's argument from the data: derived tables (farm.report.views), the
figure the claim rests on, and sentences written from the cells of those tables, so every number
in a sentence is one a reader finds in a table (tests check it).

Phones are never pooled: each sentence is about one phone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from farm.analysis.derived import best_of, relative_to, share_of
from farm.analysis.verdict import Judgement, Verdict
from farm.experiment.sections import FigureKind, Study
from farm.report.claims import ClaimCheck, Runs, claim_checks
from farm.report.derived_figures import render_ratio_figure
from farm.report.export import factor_columns
from farm.report.figures import RenderedFigure, render_figure
from farm.report.frame import tidy_frame
from farm.report.llm_study import CLAIM as LLM_CLAIM
from farm.report.llm_study import PAPER as LLM_PAPER
from farm.report.llm_study import llm_figures, llm_verdicts
from farm.report.llm_study import sentence as llm_sentence
from farm.report.model import FigureSpec, ReportData, TableSpec
from farm.report.numbers import estimate, interval, interval_of, number
from farm.report.views import RenderedTable, render_table, select

# What each seed paper claims, and where (shared/reference/seed-experiments.md).
CLAIMS: dict[Study, tuple[str, str]] = {
    Study.MOBIRNN: (
        "MobiRNN (Cao et al., EMDL 2017)",
        "the phone GPU runs LSTM inference several times faster than the CPU at low background GPU "
        "load, loses that lead above about 70% load, and a multi-threaded CPU reaches at least 70% "
        "of the GPU's gain.",
    ),
    Study.SQUEEZENET: (
        "Motamedi et al. (arXiv 1611.07151)",
        "parallel SqueezeNet on the phone GPU is tens to hundreds of times faster than sequential "
        "code, relaxed (fp16) arithmetic is 2-4x faster than precise (fp32), the best thread "
        "granularity g depends on the layer and the phone, and energy stays below 0.6 J per image.",
    ),
    Study.TRAINING: (
        "Das et al. (PerCom Workshops 2022)",
        "training fully connected networks on the phone GPU is slower than on the CPU because about "
        "91% of the GPU's time moves data between host and device.",
    ),
    Study.GEMM: (
        "Augur (Lu et al., ACM MM 2017)",
        "CNN layers are matrix multiplies, so a GEMM profile of each phone's CPU and GPU predicts "
        "a network's time.",
    ),
}
LATENCY = "latency_median_ms"
MOVED = ("opencl_h2d_total_ms", "opencl_d2h_total_ms")
KERNEL = "opencl_kernel_total_ms"


@dataclass(frozen=True)
class ClaimView:
    """One claim as the report shows it: the claim, a verdict line over the phones, and the table
    of each phone's verdict with its statistical support."""

    claim: str
    paper: str
    verdict: str
    table: RenderedTable


@dataclass(frozen=True)
class StudySection:
    study: Study
    paper: str
    claim: str
    sentences: tuple[str, ...]
    tables: tuple[RenderedTable, ...]
    figures: tuple[RenderedFigure, ...]
    claims: tuple[ClaimView, ...] = ()


def p_text(judgement: Judgement) -> str:
    evidence = judgement.evidence
    return "–" if evidence is None else f"{evidence.p_value:.2g}"


def ci_text(judgement: Judgement) -> str:
    """The effect's 95% CI; one run on a side has none (an interval of one value would look like
    certainty)."""
    evidence = judgement.evidence
    if evidence is None:
        return "–"
    if evidence.ci is None:
        return "none (1 run)"
    return interval(evidence.ci.low, evidence.ci.high)


def verdict_line(check: ClaimCheck) -> str:
    """`reproduced on 2 of 4 phones; cannot be tested on 2 of 4 phones`: the claim over phones."""
    tally = check.tally
    total = sum(tally.values())
    if not total:
        return "cannot be tested: no phone has runs for it"
    unit = "phones" if all(not p.cell for p in check.phones) else "phone-cells"
    short = {Verdict.UNTESTABLE: "cannot be tested"}
    return "; ".join(
        f"{short.get(verdict, verdict.value)} on {count} of {total} {unit}"
        for verdict, count in tally.items()
    )


def claim_view(check: ClaimCheck) -> ClaimView:
    has_cells = any(p.cell for p in check.phones)
    rows = []
    for phone in check.phones:
        j = phone.judgement
        evidence = j.evidence
        rows.append(
            (
                phone.device,
                *((phone.cell,) if has_cells else ()),
                j.hypothesis.effect,
                "–" if evidence is None else number(evidence.effect),
                ci_text(j),
                "–" if evidence is None else " vs ".join(str(n) for n in evidence.runs),
                p_text(j),
                "–" if evidence is None else f"{evidence.min_p:.2g}",
                j.verdict.value,
                j.reason or "–",
            )
        )
    columns = (
        "device",
        *(("cell",) if has_cells else ()),
        "effect",
        "value",
        "95% CI",
        "runs",
        "p",
        "smallest p possible",
        "verdict",
        "why",
    )
    first = check.phones[0].judgement.hypothesis if check.phones else None
    test = f"the claim holds when {first.effect} {first.relation} {first.threshold:g}" if first else ""
    caption = (
        f"Per phone: {test}, with p < 0.05 (Mann-Whitney U for a ratio of two backends' runs, "
        "exact sign test for a level) and the bootstrap 95% CI on that side. Paper: "
        f"{check.paper}."
    )
    return ClaimView(
        check.claim,
        check.paper,
        verdict_line(check),
        RenderedTable(check.claim, caption, columns, tuple(rows)),
    )


def _declared(data: ReportData, x: str, *, y: str | None = None, relative_to: str | None = None) -> bool:
    """Whether the experiment file already declares a figure of this along x (the study's own
    would repeat it): plain figures of metric y, or ratios against a level of `relative_to`."""
    for spec in data.figures:
        if spec.x != x:
            continue
        if relative_to is not None and spec.relative_to is not None and spec.relative_to[0] == relative_to:
            return True
        if (
            y is not None
            and spec.relative_to is None
            and spec.share_of is None
            and data.metric_name(spec.y) == y
        ):
            return True
    return False


def _present(data: ReportData, *names: str) -> tuple[str, ...]:
    return tuple(name for name in names if name in data.factor_names)


def _levels(data: ReportData, factor: str) -> list[object]:
    seen = dict.fromkeys(run.factor(factor) for run in data.done_runs)
    return [level for level in seen if level is not None]


def _row(table: RenderedTable, **wanted: str) -> tuple[str, ...] | None:
    """The first row of a table whose named columns hold these texts."""
    index = {name: table.columns.index(name) for name in wanted}
    for row in table.rows:
        if all(row[index[name]] == text for name, text in wanted.items()):
            return row
    return None


def _cell(table: RenderedTable, row: tuple[str, ...], column: str) -> str:
    return row[table.columns.index(column)]


def _mobirnn(data: ReportData, frame: pd.DataFrame) -> StudySection:
    rows = _present(data, "hidden", "layers", "gpu_load")
    speed = render_table(
        data, TableSpec(rows=rows, relative_to=("backend", "cpu"), speedup=True, title="Speedup over cpu")
    )
    cross = render_table(
        data,
        TableSpec(
            rows=rows,
            relative_to=("backend", "cpu"),
            speedup=True,
            crossover="gpu_load",
            title="Background GPU load where the speedup over cpu crosses 1",
        ),
    )
    speed_col = "speedup vs backend=cpu"
    sentences = []
    share_rows = []
    for row in speed.rows:
        if _cell(speed, row, "backend") != "cpu-mt":
            continue
        key = {c: _cell(speed, row, c) for c in ("device", *rows)}
        gpu = _row(speed, **key, backend="gpu")
        if gpu is not None:
            share = float(_cell(speed, row, speed_col)) / float(_cell(speed, gpu, speed_col))
            share_rows.append(
                (*key.values(), _cell(speed, row, speed_col), _cell(speed, gpu, speed_col), number(share))
            )
    share_table = RenderedTable(
        "CPU-MT's speedup as a share of the GPU's",
        "cpu-mt speedup / gpu speedup, both over cpu, per phone and cell (from the speedup table).",
        ("device", *rows, "cpu-mt speedup", "gpu speedup", "cpu-mt share of gpu"),
        tuple(share_rows),
    )
    for row in cross.rows:
        if _cell(cross, row, "backend") != "gpu":
            continue
        # the loads this phone has valid runs at on both sides (an invalid run leaves a gap)
        low, high = _cell(cross, row, "measured").split("..")
        key = {c: _cell(cross, row, c) for c in ("device", *(r for r in rows if r != "gpu_load"))}
        first = _row(speed, **key, gpu_load=low, backend="gpu")
        last = _row(speed, **key, gpu_load=high, backend="gpu")
        if first is None or last is None:
            continue
        where = ", ".join(f"{k}={v}" for k, v in key.items() if k != "device")
        at_low = estimate(_cell(speed, first, speed_col), _cell(speed, first, "95% CI"))
        at_high = estimate(_cell(speed, last, speed_col), _cell(speed, last, "95% CI"))
        text = (
            f"On {key['device']}{f' ({where})' if where else ''}, the GPU is {at_low} times as fast as "
            f"cpu at background GPU load {low} and {at_high} at {high}"
        )
        direction = _cell(cross, row, "direction")
        at = _cell(cross, row, "speedup crosses 1 at gpu_load")
        if direction == "falls below 1":
            text += f"; it loses its lead at load {at} {_cell(cross, row, '95% CI')}"
        elif direction == "rises above 1":
            text += f"; it overtakes cpu at load {at} {_cell(cross, row, '95% CI')}"
        elif direction == "stays above 1":
            text += f"; it stays ahead up to load {high}"
        else:
            text += f"; it is never ahead between loads {low} and {high}"
        mt = _row(speed, **key, gpu_load=low, backend="cpu-mt")
        if mt is not None and float(_cell(speed, first, speed_col)) > 1.0:
            # share rows: device, the rows' levels (gpu_load last), the two speedups, the share
            mt_share = next((s for s in share_rows if s[: len(key) + 1] == (*key.values(), low)), None)
            if mt_share is not None:
                text += f", and cpu-mt reaches {mt_share[-1]} of its speedup at load {low}"
        elif mt is not None:
            text += f", while cpu-mt is {_cell(speed, mt, speed_col)} times as fast as cpu at load {low}"
        sentences.append(text + ".")
    # A phone without a sentence says why, rather than going missing from the argument.
    said = {sentence.split(" ", 2)[1].rstrip(",") for sentence in sentences}
    for device in sorted({run.device_id for run in data.done_runs if run.device_id} - said):
        sentences.append(
            f"On {device}, the GPU's speedup over cpu cannot be followed over background load: it has "
            "valid gpu and cpu runs at fewer than two loads (see Plan vs done and Data quality)."
        )
    figures = []
    ratios = relative_to(
        select(frame, data, ()), LATENCY, ("backend", "cpu"), [*rows, "backend"], speedup=True
    )
    if "gpu_load" in rows and not _declared(data, "gpu_load", relative_to="backend"):
        figure = render_ratio_figure(
            data,
            FigureSpec(
                x="gpu_load",
                y="speedup_over_cpu",
                color="backend",
                facet="device",
                title="Speedup over cpu vs background GPU load",
            ),
            ratios,
            ylabel="speedup over cpu [x]",
            caption_text=(
                "median cpu latency / median latency per phone, error bars = bootstrap 95% CI, dashed: 1"
            ),
        )
        figures += [figure] if figure else []
    return StudySection(
        Study.MOBIRNN, *CLAIMS[Study.MOBIRNN], tuple(sentences), (speed, cross, share_table), tuple(figures)
    )


def _squeezenet(data: ReportData, frame: pd.DataFrame) -> StudySection:
    g1 = (("g", (1,)),) if "g" in data.factor_names else ()
    tables = []
    best = (
        render_table(
            data,
            TableSpec(
                rows=_present(data, "precision"),
                best_of="g",
                where=(("backend", ("gpu",)),),
                title="Best g for the whole network on the GPU",
            ),
        )
        if "g" in data.factor_names
        else None
    )
    speed = render_table(
        data,
        TableSpec(
            rows=_present(data, "precision"),
            relative_to=("backend", "cpu"),
            speedup=True,
            where=g1,
            title="Parallel over sequential (speedup over cpu, g 1)",
        ),
    )
    fp16 = (
        render_table(
            data,
            TableSpec(
                rows=_present(data, "backend"),
                relative_to=("precision", "fp32"),
                speedup=True,
                where=g1,
                title="Relaxed over precise arithmetic (fp16 over fp32, g 1)",
            ),
        )
        if "precision" in data.factor_names
        else None
    )
    energy_metric = (
        "energy_per_inference_mj"
        if any("energy_per_inference_mj" in r.metrics for r in data.done_runs)
        else "energy_per_inference_gross_mj"
    )
    energy = render_table(
        data,
        TableSpec(
            rows=_present(data, "backend", "precision"),
            metrics=(energy_metric,),
            where=g1,
            title="Energy per image (g 1)",
        ),
    )
    tables = [t for t in (best, speed, fp16, energy) if t is not None]
    layers = _layer_table(data, frame)
    if layers is not None:
        tables.append(layers)
    sentences = []
    speed_col = "speedup vs backend=cpu"
    for row in speed.rows:
        if _cell(speed, row, "backend") != "gpu":
            continue
        device = _cell(speed, row, "device")
        precision = _cell(speed, row, "precision") if "precision" in speed.columns else None
        gain = f"{estimate(_cell(speed, row, speed_col), _cell(speed, row, '95% CI'))}"
        text = f"On {device}{f' in {precision}' if precision else ''}, the GPU at g 1 is {gain} times"
        text += " as fast as sequential cpu"
        mt = _row(speed, device=device, backend="cpu-mt", **({"precision": precision} if precision else {}))
        if mt is not None:
            text += f" (cpu-mt: {_cell(speed, mt, speed_col)})"
        if best is not None:
            b = _row(best, device=device, **({"precision": precision} if precision else {}))
            if b is not None:
                fastest = _cell(best, b, f"{LATENCY} median")
                text += f"; its fastest g is {_cell(best, b, 'best g')} at {fastest} ms per image"
        sentences.append(text + ".")
    if fp16 is not None:
        for row in fp16.rows:
            if _cell(fp16, row, "backend") == "gpu":
                gain = estimate(_cell(fp16, row, "speedup vs precision=fp32"), _cell(fp16, row, "95% CI"))
                sentences.append(
                    f"On {_cell(fp16, row, 'device')}, fp16 makes the GPU {gain} times as fast as fp32."
                )
    for row in energy.rows:
        if _cell(energy, row, "backend") == "gpu" and _cell(energy, row, f"{energy_metric} median") != "–":
            precision = f" in {_cell(energy, row, 'precision')}" if "precision" in energy.columns else ""
            joules = _cell(energy, row, f"{energy_metric} median")
            sentences.append(
                f"On {_cell(energy, row, 'device')}, an image takes {joules} mJ on the GPU{precision}."
            )
    figures = []
    if "g" in data.factor_names and not _declared(data, "g", y=LATENCY):
        figure = render_figure(
            data,
            FigureSpec(
                x="g",
                color=_present(data, "precision")[0] if _present(data, "precision") else None,
                facet="device",
                where=(("backend", ("gpu",)),),
                title="GPU latency vs thread granularity g",
            ),
        )
        figures += [figure] if figure else []
    return StudySection(
        Study.SQUEEZENET, *CLAIMS[Study.SQUEEZENET], tuple(sentences), tuple(tables), tuple(figures)
    )


def _layer_table(data: ReportData, frame: pd.DataFrame) -> RenderedTable | None:
    """Best g per layer and phone (GPU), from the per-layer times the cnn program reports."""
    if "g" not in data.factor_names:
        return None
    rows = select(frame, data, (("backend", ("gpu",)),))
    layer_metrics = sorted(m for m in rows["metric"].unique() if str(m).startswith("layer_"))
    if not layer_metrics:
        return None
    column = dict(factor_columns(data))
    keep = [column[f] for f in _present(data, "precision")]
    body = []
    for metric in layer_metrics:
        for b in best_of(rows, metric, column["g"], [*keep, column["g"]]):
            body.append(
                (
                    b.device,
                    *(str(v) for _, v in b.cell),
                    metric.removeprefix("layer_").removesuffix("_ms"),
                    str(b.level),
                    number(b.median),
                )
            )
    body.sort()
    return RenderedTable(
        "Best g per layer and phone (GPU)",
        "per layer, the g with the lowest median layer time over runs, per phone and precision.",
        ("device", *_present(data, "precision"), "layer", "best g", "layer time median [ms]"),
        tuple(body),
    )


def _training(data: ReportData, frame: pd.DataFrame) -> StudySection:
    column = dict(factor_columns(data))
    factors = [column[f] for f in _present(data, "layers", "buffers")]
    gpu = select(frame, data, (("backend", ("gpu",)),))
    shares = share_of(gpu, list(MOVED), [*MOVED, KERNEL], factors)
    share_table = RenderedTable(
        "Share of the GPU's OpenCL time moving data",
        "(host-to-device + device-to-host) / (those + kernel time) per run; median over runs per phone, "
        "bootstrap 95% CI.",
        ("device", *_present(data, "layers", "buffers"), "data movement share [%]", "95% CI [%]", "runs"),
        tuple(
            (
                s.device,
                *(str(v) for _, v in s.cell),
                number(100.0 * s.value),
                interval_of(100.0 * s.ci.low, 100.0 * s.ci.high, s.runs),
                str(s.runs),
            )
            for s in shares
        ),
    )
    copy = (("buffers", ("copy",)),) if "buffers" in data.factor_names else ()
    ratio = render_table(
        data,
        TableSpec(
            rows=_present(data, "layers"),
            relative_to=("backend", "cpu"),
            where=copy,
            title="Training step time relative to cpu (copy buffers)",
        ),
    )
    sentences = []
    ratio_col = "ratio vs backend=cpu"
    runs = Runs(data, frame)
    for s, row in zip(shares, share_table.rows, strict=True):
        cell = dict(s.cell)
        if cell.get("buffers", "copy") != "copy":
            continue
        layers = row[1] if "layers" in cell else None
        text = (
            f"On {s.device}{f' for layers {layers}' if layers else ''} with copy buffers, moving data takes "
        )
        text += f"{estimate(row[-3], row[-2])} % of the GPU's OpenCL time (the paper: 91 %)"
        r = _row(ratio, device=s.device, backend="gpu", **({"layers": layers} if layers else {}))
        if r is not None:
            slower = f"{estimate(_cell(ratio, r, ratio_col), _cell(ratio, r, '95% CI'))}"
            text += f", and a GPU training step takes {slower} times as long as on cpu"
        if runs.opencl_on_cpu(s.device):
            # the number is right, but it measures something else than the paper's bus transfers
            text += (
                "; its GPU is an OpenCL CPU device (PoCL on the host, as on a virtual phone), where a "
                "transfer is a memcpy in host RAM, so this share cannot stand for the paper's"
            )
        sentences.append(text + ".")
    figures = []
    if "buffers" in data.factor_names and not _declared(data, "buffers", y="data_movement_share"):
        figure = render_figure(
            data,
            FigureSpec(
                x="buffers",
                y="data_movement_share",
                color=_present(data, "layers")[0] if _present(data, "layers") else None,
                facet="device",
                kind=FigureKind.BAR,
                where=(("backend", ("gpu",)),),
                title="Share of GPU time moving data",
            ),
        )
        figures += [figure] if figure else []
    return StudySection(
        Study.TRAINING, *CLAIMS[Study.TRAINING], tuple(sentences), (share_table, ratio), tuple(figures)
    )


def _gemm(data: ReportData, frame: pd.DataFrame) -> StudySection:
    backends = [str(b) for b in _levels(data, "backend")]
    reference = "cpu-mt" if "cpu-mt" in backends else (backends[0] if backends else "cpu")
    shape = _present(data, "m", "n", "k")
    speed = render_table(
        data,
        TableSpec(
            rows=(*shape, *_present(data, "precision")),
            relative_to=("backend", reference),
            speedup=True,
            title=f"GEMM speedup over {reference} per shape",
        ),
    )
    gflops = render_table(
        data,
        TableSpec(
            rows=_present(data, "backend", "precision"),
            metrics=("gflops",),
            pool=shape,
            title="GFLOP/s per backend over all shapes",
        ),
    )
    sentences = []
    col = "gflops median"
    for row in gflops.rows:
        if _cell(gflops, row, "backend") != "gpu":
            continue
        device = _cell(gflops, row, "device")
        precision = {"precision": _cell(gflops, row, "precision")} if "precision" in gflops.columns else {}
        ref = _row(gflops, device=device, backend=reference, **precision)
        text = f"On {device}{' in ' + precision['precision'] if precision else ''}, the GPU's GEMM reaches "
        text += f"{_cell(gflops, row, col)} GFLOP/s (median over shapes)"
        if ref is not None:
            text += f" against {_cell(gflops, ref, col)} on {reference}"
        sentences.append(text + ".")
    figures = []
    if "k" in data.factor_names and not _declared(data, "k", y=LATENCY):
        figure = render_figure(
            data,
            FigureSpec(
                x="k",
                color="backend",
                facet="device",
                pool=("m", "n"),
                where=(("precision", ("fp32",)),) if "precision" in data.factor_names else (),
                title="GEMM time by k (fp32)",
            ),
        )
        figures += [figure] if figure else []
    return StudySection(Study.GEMM, *CLAIMS[Study.GEMM], tuple(sentences), (speed, gflops), tuple(figures))


def _llm(data: ReportData, frame: pd.DataFrame) -> StudySection:
    # Its claims, verdicts and figures live in farm.report.llm_study.
    tables, verdicts = llm_verdicts(data, frame)
    sentences = tuple(llm_sentence(v) for v in verdicts)
    return StudySection(Study.LLM, LLM_PAPER, LLM_CLAIM, sentences, tuple(tables), tuple(llm_figures(data)))


SECTIONS: dict[Study, Callable[[ReportData, pd.DataFrame], StudySection]] = {
    Study.MOBIRNN: _mobirnn,
    Study.SQUEEZENET: _squeezenet,
    Study.TRAINING: _training,
    Study.GEMM: _gemm,
    Study.LLM: _llm,
}


def study_section(data: ReportData, frame: pd.DataFrame | None = None) -> StudySection | None:
    """The section of the study the experiment reproduces, None when it declares none."""
    study = data.spec.report.study if data.spec is not None else None
    if study is None or study not in SECTIONS:
        return None
    frame = tidy_frame(data) if frame is None else frame
    section = SECTIONS[study](data, frame)
    return replace(section, claims=tuple(claim_view(c) for c in claim_checks(study, data, frame)))


def sections_of(data: ReportData) -> Sequence[StudySection]:
    section = study_section(data)
    return [section] if section is not None else []
