"""A run id or run folder in the store that farm did not make (`../../x`, written by anyone who can
write to a shared PostgreSQL store) is refused with one line wherever runs are read, on both
backends: it never becomes a folder name outside the results folder (issue 27)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.cli.main import main
from farm.errors import StoreError
from farm.store import Store, StoreLocation
from farm.store import runs as run_store
from farm.store.runs import PlannedRun


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> StoreLocation:
    if request.param == "sqlite":
        return StoreLocation(tmp_path / "results")
    return StoreLocation(tmp_path / "results", request.getfixturevalue("pg_url"))


def _results_arg(location: StoreLocation) -> str:
    return location.url or str(location.artifacts)


@pytest.mark.parametrize(
    ("run_id", "folder"),
    [("../../x", None), ("0123456789abcdef", "../../x"), ("0123456789abcdef", "hostile/../../x")],
)
def test_a_stored_run_id_or_folder_farm_did_not_make_is_refused_in_one_line(
    location: StoreLocation, run_id: str, folder: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store(location) as store:
        run_store.save_experiment(store, "hostile", "{}", "0" * 64, "test")
        run_store.insert_planned(store, "hostile", [PlannedRun(run_id, "c1", (("n", 1),), 0, None, 0)])
        if folder is not None:
            store.execute("UPDATE runs SET artifacts_dir = ? WHERE run_id = ?", (folder, run_id))
        with pytest.raises(StoreError, match="is not one farm makes"):
            run_store.list_runs(store, "hostile")
    with pytest.raises(SystemExit) as exited:
        main(["status", "hostile", "--results", _results_arg(location)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "is not one farm makes" in err, err
    assert not (location.artifacts.parent.parent / "x").exists()
