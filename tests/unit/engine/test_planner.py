"""Planner: counts, stable ids, excludes, zip, order properties (hypothesis), estimates, text."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from farm.engine.planner import SHARED, PhoneAbilities, estimate_run_s, expand, plan, render_plan, run_id
from farm.errors import ConfigError
from farm.experiment import Cell, Experiment, load_text

STUDY = """\
name: study
benchmark: {program: lstm, params: {seq_len: 16}}
sweep:
  backend: [cpu, gpu]
  hidden: [32, 64, 128]
  gpu_load: [0, 0.5]
measurement: {repetitions: 3, seed: 5}
"""

STUDY_REORDERED = """\
measurement: {seed: 5, repetitions: 3}
sweep:
  gpu_load: [0.5, 0]
  hidden: [128, 32, 64]
  backend: [gpu, cpu]
benchmark: {params: {seq_len: 16}, program: lstm}
name: study
"""

PHONES = ["p1", "p2", "p3"]


def _experiment(**overrides: Any) -> Experiment:
    data: dict[str, Any] = {
        "name": "study",
        "benchmark": {"program": "lstm"},
        "sweep": {"backend": ["cpu", "gpu"], "hidden": [32, 64, 128], "gpu_load": [0.0, 0.5]},
        "measurement": {"repetitions": 3, "seed": 5},
    }
    for key, value in overrides.items():
        data[key] = {**data[key], **value} if key == "measurement" else value
    return Experiment.model_validate(data)


def _ids(queue: tuple[Any, ...]) -> list[str]:
    return [run.run_id for run in queue]


def test_pinned_plan_runs_every_cell_and_repetition_on_every_phone() -> None:
    planned = plan(_experiment(), PHONES)
    assert len(planned.cells) == 12
    assert len(planned.runs) == 12 * 3 * 3
    assert set(planned.queues) == set(PHONES)
    for phone, queue in planned.queues.items():
        assert len(queue) == 36 and {run.device for run in queue} == {phone}
    assert len({run.run_id for run in planned.runs}) == len(planned.runs)


def test_spread_plan_runs_each_cell_and_repetition_once_on_any_phone() -> None:
    planned = plan(_experiment(devices={"spread": True}), PHONES)
    assert planned.spread and list(planned.queues) == [SHARED]
    assert len(planned.runs) == 12 * 3
    assert {run.device for run in planned.runs} == {None}


def test_ids_and_order_survive_reordering_the_yaml() -> None:
    first = plan(load_text(STUDY), PHONES)
    second = plan(load_text(STUDY_REORDERED), PHONES)
    for phone in PHONES:
        assert _ids(first.queues[phone]) == _ids(second.queues[phone])


def test_ids_do_not_depend_on_order_seed_or_the_phone_list() -> None:
    base = {run.run_id for run in plan(_experiment(), PHONES).runs}
    for order in ("grouped", "random"):
        assert {r.run_id for r in plan(_experiment(measurement={"order": order}), PHONES).runs} == base
    assert {r.run_id for r in plan(_experiment(measurement={"seed": 99}), PHONES).runs} == base
    assert {r.run_id for r in plan(_experiment(), list(reversed(PHONES))).runs} == base


@pytest.mark.parametrize("spread", [False, True])
def test_planned_ids_are_run_id_of_their_run(spread: bool) -> None:
    planned = plan(_experiment(devices={"spread": spread}), ['lab/ü"x', "p2"])
    for run in planned.runs:
        assert run.run_id == run_id(run.experiment, run.cell, run.repetition, run.device)


def test_ids_depend_on_what_identifies_a_run() -> None:
    cell = Cell.of({"backend": "gpu", "hidden": 64})
    reference = run_id("study", cell, 0, "p1")
    assert run_id("study.quick", cell, 0, "p1") != reference
    assert run_id("study", Cell.of({"backend": "gpu", "hidden": 32}), 0, "p1") != reference
    assert run_id("study", cell, 1, "p1") != reference
    assert run_id("study", cell, 0, "p2") != reference
    assert run_id("study", cell, 0, None) != reference
    assert run_id("study", Cell.of({"hidden": 64, "backend": "gpu"}), 0, "p1") == reference


def test_excluded_cells_get_no_runs() -> None:
    experiment = _experiment(
        exclude=[{"backend": "cpu", "gpu_load": 0.5}, {"hidden": [64, 128], "backend": "gpu"}]
    )
    cells = [cell.as_dict() for cell in expand(experiment)]
    assert len(cells) == 12 - 3 - 4  # (cpu, any hidden, 0.5) and (gpu, 64|128, any load): disjoint
    assert not any(c["backend"] == "cpu" and c["gpu_load"] == 0.5 for c in cells)
    assert not any(c["backend"] == "gpu" and c["hidden"] in (64, 128) for c in cells)


def test_zip_groups_vary_together() -> None:
    experiment = _experiment(
        sweep={"hidden": [32, 64, 128], "layers": [1, 2, 3], "backend": ["cpu", "gpu"]},
        zip=[["hidden", "layers"]],
    )
    cells = [cell.as_dict() for cell in expand(experiment)]
    assert len(cells) == 3 * 2
    assert {(c["hidden"], c["layers"]) for c in cells} == {(32, 1), (64, 2), (128, 3)}
    assert [c["hidden"] for c in cells[:2]] == [32, 32]  # file order: first factor slowest


def test_interleaved_is_repetition_major_with_every_cell_once_per_round() -> None:
    planned = plan(_experiment(), PHONES)
    for queue in planned.queues.values():
        reps = [run.repetition for run in queue]
        assert reps == sorted(reps)
        for rep in range(3):
            assert Counter(run.cell_id for run in queue if run.repetition == rep) == Counter(
                cell.cell_id for cell in planned.cells
            )
        rounds = [[run.cell_id for run in queue if run.repetition == rep] for rep in range(3)]
        assert len({tuple(r) for r in rounds}) > 1  # shuffled per round, not one fixed order


def test_phones_get_different_shuffles_but_the_same_seed_gives_the_same_plan() -> None:
    first = plan(_experiment(), PHONES)
    cells_of = {phone: [r.cell_id for r in q] for phone, q in first.queues.items()}
    assert cells_of["p1"] != cells_of["p2"]
    assert [r.run_id for r in plan(_experiment(), PHONES).runs] == [r.run_id for r in first.runs]
    other_seed = plan(_experiment(measurement={"seed": 6}), PHONES)
    assert [r.run_id for r in other_seed.runs] != [r.run_id for r in first.runs]


def test_grouped_runs_repetitions_back_to_back_in_file_order() -> None:
    planned = plan(_experiment(measurement={"order": "grouped"}), ["p1"])
    queue = planned.queues["p1"]
    assert [run.cell_id for run in queue] == [cell.cell_id for cell in planned.cells for _ in range(3)]
    assert [run.repetition for run in queue[:3]] == [0, 1, 2]


def test_runs_interleave_the_queues_round_robin() -> None:
    planned = plan(_experiment(), ["p1", "p2"])
    assert [run.device for run in planned.runs[:4]] == ["p1", "p2", "p1", "p2"]


def test_too_few_phones_is_a_config_error_and_duplicates_a_bug() -> None:
    with pytest.raises(ConfigError, match=r"needs at least 2 phone\(s\).*1 selected"):
        plan(_experiment(devices={"min_count": 2}), ["p1"])
    with pytest.raises(ConfigError):
        plan(_experiment(), [])
    with pytest.raises(ValueError, match="unique"):
        plan(_experiment(), ["p1", "p1"])


def test_estimates_count_settling_and_bounded_measurement() -> None:
    experiment = _experiment(
        measurement={"warmup": 0, "iterations": 10, "min_seconds": 2, "max_seconds": 30},
        gpu_load={"settle_s": 7},
    )
    idle, loaded = (next(c for c in experiment.cells() if c.get("gpu_load") == level) for level in (0.0, 0.5))
    assert estimate_run_s(experiment, loaded) - estimate_run_s(experiment, idle) == pytest.approx(7)
    assert estimate_run_s(experiment, idle, iteration_s=0.01) == estimate_run_s(
        experiment, idle, iteration_s=0.1
    )
    assert estimate_run_s(experiment, idle, iteration_s=100) == estimate_run_s(
        experiment, idle, iteration_s=10
    )
    pinned = plan(experiment, PHONES)
    spread = plan(_experiment(devices={"spread": True}, gpu_load={"settle_s": 7}), PHONES)
    per_queue = sum(pinned.run_estimates_s[run.cell_id] for run in pinned.queues["p1"])
    assert pinned.estimated_s == pytest.approx(per_queue)
    assert spread.estimated_s < pinned.estimated_s


def test_without_done_runs_keeps_order_and_shrinks_the_estimate() -> None:
    planned = plan(_experiment(), PHONES)
    done = {run.run_id for run in planned.queues["p1"][:10]} | {planned.queues["p2"][0].run_id}
    left = planned.without(done)
    assert len(left.runs) == len(planned.runs) - 11
    assert _ids(left.queues["p1"]) == _ids(planned.queues["p1"])[10:]
    assert _ids(left.queues["p3"]) == _ids(planned.queues["p3"])
    assert left.estimated_s == pytest.approx(planned.estimated_s)  # p3 still has its whole queue
    assert planned.without({r.run_id for r in planned.runs}).estimated_s == 0.0


def test_render_plan_summarises_and_truncates() -> None:
    text = render_plan(plan(_experiment(description="why"), ["p1", "p2"]), max_runs_shown=5)
    assert "12 cells x 3 repetitions on 2 phone(s)" in text and "= 72 runs" in text
    assert "queue p1 (36 runs)" in text and "... 31 more" in text
    for cell in expand(_experiment()):
        assert cell.cell_id in text
    capped = render_plan(plan(_experiment(), ["p1"]), max_cells_shown=4)
    assert "... 8 more cells" in capped
    assert sum(cell.cell_id in capped for cell in expand(_experiment())) == 4


# ---------------------------------------------------------------- properties

LEVELS = {
    "hidden": st.lists(st.sampled_from([16, 32, 64, 128, 256]), min_size=1, max_size=4, unique=True),
    "layers": st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True),
    "backend": st.lists(st.sampled_from(["cpu", "cpu-mt", "gpu"]), min_size=1, max_size=3, unique=True),
    "gpu_load": st.lists(st.sampled_from([0.0, 0.3, 0.5, 0.9]), min_size=1, max_size=4, unique=True),
}


@st.composite
def experiments(draw: st.DrawFn) -> Experiment:
    names = draw(st.lists(st.sampled_from(sorted(LEVELS)), min_size=0, max_size=4, unique=True))
    return Experiment.model_validate(
        {
            "name": "prop",
            "benchmark": {"program": "lstm"},
            "sweep": {name: draw(LEVELS[name]) for name in names},
            "measurement": {
                "repetitions": draw(st.integers(1, 3)),
                "order": draw(st.sampled_from(["interleaved", "grouped", "random"])),
                "seed": draw(st.integers(0, 2**31)),
            },
            "devices": {"spread": draw(st.booleans())},
        }
    )


PHONE_LISTS = st.lists(st.sampled_from(["a", "b", "lab/c", "lab/d"]), min_size=1, max_size=4, unique=True)


@settings(max_examples=60, deadline=None)
@given(experiments(), PHONE_LISTS)
def test_every_cell_repetition_and_phone_exactly_once(experiment: Experiment, phones: list[str]) -> None:
    planned = plan(experiment, phones)
    reps = experiment.measurement.repetitions
    owners = [None] if experiment.devices.spread else phones
    expected = Counter(
        (cell.cell_id, rep, owner) for cell in expand(experiment) for rep in range(reps) for owner in owners
    )
    assert Counter((run.cell_id, run.repetition, run.device) for run in planned.runs) == expected
    assert len({run.run_id for run in planned.runs}) == len(planned.runs)


@settings(max_examples=40, deadline=None)
@given(experiments(), PHONE_LISTS)
def test_same_inputs_same_plan(experiment: Experiment, phones: list[str]) -> None:
    first, second = plan(experiment, phones), plan(experiment, phones)
    assert {k: _ids(q) for k, q in first.queues.items()} == {k: _ids(q) for k, q in second.queues.items()}


@settings(max_examples=40, deadline=None)
@given(experiments(), PHONE_LISTS, st.randoms(use_true_random=False))
def test_order_of_levels_in_the_file_changes_no_id(
    experiment: Experiment, phones: list[str], rnd: Any
) -> None:
    shuffled_sweep = {}
    for name in rnd.sample(list(experiment.sweep), len(experiment.sweep)):
        levels = list(experiment.sweep[name])
        rnd.shuffle(levels)
        shuffled_sweep[name] = levels
    other = experiment.model_copy(update={"sweep": shuffled_sweep})
    assert {r.run_id for r in plan(other, phones).runs} == {r.run_id for r in plan(experiment, phones).runs}
    if experiment.measurement.order.value != "grouped":  # grouped follows the file on purpose
        for key, queue in plan(other, phones).queues.items():
            assert _ids(queue) == _ids(plan(experiment, phones).queues[key])


@settings(max_examples=60, deadline=None)
@given(experiments(), st.data())
def test_excludes_remove_exactly_the_matching_cells(experiment: Experiment, data: st.DataObject) -> None:
    if not experiment.sweep:
        return
    name = data.draw(st.sampled_from(list(experiment.sweep)))
    levels = list(experiment.sweep[name])
    wanted = data.draw(st.lists(st.sampled_from(levels), min_size=1, max_size=len(levels), unique=True))
    everything = expand(experiment)
    if all(cell.get(name) in wanted for cell in everything):
        return  # excluding every cell is an error, tested with the bad files
    pruned = expand(experiment.model_copy(update={"exclude": ({name: tuple(wanted)},)}))
    assert [c for c in everything if c.get(name) not in wanted] == pruned


SKIP_SPEC = """\
name: skips
benchmark: {program: lstm}
sweep: {backend: [cpu, gpu], gpu_load: [0, 0.5]}
exclude: [{backend: gpu, gpu_load: 0.5}]
measurement: {repetitions: 2}
"""


def test_runs_a_phone_cannot_do_are_skipped_at_plan_time_with_the_reason() -> None:
    spec = load_text(SKIP_SPEC, "skips.yaml")
    abilities = {"a": PhoneAbilities(opencl=True, root=True), "b": PhoneAbilities(opencl=False, root=True)}
    planned = plan(spec, ["a", "b"], abilities=abilities)
    assert len(planned.queues["a"]) == 6  # 3 cells x 2 repetitions
    # b without OpenCL: only cpu at no background load is left
    assert {run.cell.as_dict()["backend"] for run in planned.queues["b"]} == {"cpu"}
    assert all(run.cell.as_dict()["gpu_load"] == 0 for run in planned.queues["b"])
    reasons = {run.cell.label(spec.factor_names): why for run, why in planned.skipped}
    assert len(planned.skipped) == 4 and all(run.device == "b" for run, _ in planned.skipped)
    assert any("backend gpu needs OpenCL" in why for why in reasons.values())
    assert any("background GPU load needs OpenCL" in why for why in reasons.values())
    text = render_plan(planned)
    assert "= 12 runs, 4 of them SKIPPED (below)" in text
    assert "4 runs SKIPPED at plan time" in text and "b: 2 runs: backend gpu needs OpenCL" in text
    # the same runs keep their ids: a phone that gains a driver runs them under the same id
    assert {r.run_id for r, _ in planned.skipped} <= {r.run_id for r in plan(spec, ["a", "b"]).runs}


def test_required_pinned_clocks_skip_a_phone_without_root() -> None:
    spec = load_text(SKIP_SPEC + "conditions: {clocks: {mode: pin, required: true}}\n", "skips.yaml")
    planned = plan(spec, ["a"], abilities={"a": PhoneAbilities(opencl=True, root=False)})
    assert planned.queues["a"] == () and len(planned.skipped) == 6
    assert "requires pinned clocks, which need root" in planned.skipped[0][1]
