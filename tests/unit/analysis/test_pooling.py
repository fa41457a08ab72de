"""The pooling rule: which factors a view averages over, on cells with zip and exclude shapes."""

from __future__ import annotations

import pytest

from farm.analysis.pooling import Pooled, pooled_factors, pooled_phrase
from farm.errors import ConfigError
from farm.experiment import load_text

SQUEEZE = [
    *({"backend": b, "precision": p, "g": 1} for b in ("cpu", "cpu-mt") for p in ("fp32", "fp16")),
    *({"backend": "gpu", "precision": p, "g": g} for p in ("fp32", "fp16") for g in (1, 4)),
]
FACTORS = ["backend", "precision", "g"]


def test_a_factor_varying_inside_one_group_only_is_pooled() -> None:
    # g varies only for the gpu rows: x=backend, color=precision still averages g=1 and g=4 there.
    assert pooled_factors(SQUEEZE, ("backend", "precision"), FACTORS) == [Pooled("g", (1, 4))]


def test_a_factor_the_named_ones_determine_is_not_pooled() -> None:
    # Holding backend=gpu (rows filtered), x=g and color=precision name everything that varies.
    gpu = [row for row in SQUEEZE if row["backend"] == "gpu"]
    assert pooled_factors(gpu, ("g", "precision"), FACTORS) == []
    # Every backend at g=1: g is constant, so naming backend and precision is enough.
    at_g1 = [row for row in SQUEEZE if row["g"] == 1]
    assert pooled_factors(at_g1, ("backend", "precision"), FACTORS) == []


def test_every_unnamed_varying_factor_is_reported_in_factor_order() -> None:
    assert pooled_factors(SQUEEZE, ("g",), FACTORS) == [
        Pooled("backend", ("cpu", "cpu-mt", "gpu")),
        Pooled("precision", ("fp32", "fp16")),
    ]


def test_zipped_factors_pool_only_where_they_share_a_level() -> None:
    shapes = [{"m": m, "k": k} for m, k in ((96, 147), (64, 512), (1000, 512))]
    assert pooled_factors(shapes, ("k",), ["m", "k"]) == [Pooled("m", (96, 64, 1000))]
    assert pooled_factors(shapes[:1] + shapes[1:2], ("k",), ["m", "k"]) == []


def test_phrase_names_levels_and_phones() -> None:
    assert pooled_phrase([], 1) == ""
    assert pooled_phrase([], 3) == "each point pools 3 phones"
    assert pooled_phrase([Pooled("g", (1, 4))], 2) == "each point pools g (2 levels: 1, 4) and 2 phones"


SPEC = """\
name: x
benchmark: {program: cnn, params: {model: squeezenet1.0}}
sweep: {backend: [cpu, gpu], precision: [fp32, fp16], g: [1, 4]}
exclude: [{backend: cpu, g: 4}]
report:
  figures:
    - FIGURE
"""


@pytest.mark.parametrize(
    "figure",
    [
        "{x: g, color: precision, where: {backend: gpu}}",
        "{x: backend, color: precision, where: {g: 1}}",
        "{x: backend, color: precision, pool: [g]}",
        "{x: g, color: precision, facet: backend}",
    ],
)
def test_figures_that_name_or_hold_or_pool_every_factor_load(figure: str) -> None:
    load_text(SPEC.replace("FIGURE", figure), "x.yaml")


def test_a_figure_that_pools_silently_is_refused_at_its_line() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(SPEC.replace("FIGURE", "{x: g, color: precision}"), "x.yaml")
    assert str(caught.value).startswith("x.yaml:7: report.figures[0]: backend varies within each point")
    assert "pool: [backend]" in str(caught.value)


def test_a_where_that_keeps_no_cell_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"x.yaml:7: report.figures\[0\].where: no cell"):
        load_text(SPEC.replace("FIGURE", "{x: precision, where: {backend: cpu, g: 4}}"), "x.yaml")
