"""The layers table (migration 6) on both backends: a run's layers round-trip with every field,
storing them twice leaves one row each, and --fresh forgets them with the runs."""

from __future__ import annotations

from farm.store import Store
from farm.store import runs as rq
from farm.store.layers import LayerResult, experiment_layers, put_layers

LAYERS = (
    LayerResult(0, "conv1", "conv", 5.25, 5.0, 2.1e8, 1.2e6, 4, "direct", 96, 12321, 147, None),
    LayerResult(1, "pool1", "maxpool", 0.5),
    LayerResult(2, "fire2/expand1x1", "conv", 0.125, fused_with="fire2/expand3x3"),
)


def _plan(store: Store, experiment: str, run_ids: list[str]) -> None:
    planned = [rq.PlannedRun(r, "c0", (("backend", "gpu"),), 0, None, i) for i, r in enumerate(run_ids)]
    rq.insert_planned(store, experiment, planned)


def test_layers_round_trip_and_are_idempotent(store: Store) -> None:
    _plan(store, "exp", ["r1", "r2"])
    _plan(store, "other", ["r3"])
    put_layers(store, "r1", LAYERS)
    put_layers(store, "r1", (LayerResult(1, "pool1", "maxpool", 0.75),))  # the same layer again
    put_layers(store, "r3", LAYERS[:1])
    put_layers(store, "r2", ())  # nothing to store: no rows, no error
    found = experiment_layers(store, "exp")
    assert list(found) == ["r1"]
    assert found["r1"] == (LAYERS[0], LayerResult(1, "pool1", "maxpool", 0.75), LAYERS[2])
    assert list(experiment_layers(store, "other")) == ["r3"]


def test_fresh_forgets_the_experiments_layers_only(store: Store) -> None:
    _plan(store, "exp", ["r1"])
    _plan(store, "other", ["r3"])
    put_layers(store, "r1", LAYERS)
    put_layers(store, "r3", LAYERS)
    assert rq.forget_experiment_runs(store, "exp") == 1
    assert experiment_layers(store, "exp") == {}
    assert len(experiment_layers(store, "other")["r3"]) == 3
