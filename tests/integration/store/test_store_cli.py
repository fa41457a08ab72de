"""The CLI on a broken or remote store: one line on stderr naming the store and what to do, a
non-zero exit, no traceback, nothing written; read-only commands work on a read-only store;
`--results postgresql://...` and farm.yaml `store:` select the shared store."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from vphone.testing.phones import free_tcp_port

from farm.store import Metric, Store, StoreLocation
from farm.store import runs as rq
from farm.store.schema import MIGRATIONS
from tests.fixtures.postgres import PostgresServer
from tests.integration.store.conftest import Tmpfs

REPO = Path(__file__).resolve().parents[3]
READERS = (("status",), ("report", "exp"), ("export", "exp", "--csv"))


def farm(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("FARM_")}
    environment["PYTHONPATH"] = str(REPO) + os.pathsep + environment.get("PYTHONPATH", "")
    environment["FARM_CONFIG_DIR"] = str(cwd / "no-config")
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "farm", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _experiment(location: StoreLocation) -> None:
    with Store(location) as store:
        rq.save_experiment(store, "exp", '{"name": "exp"}', "0" * 64, "exp.yaml")
        rq.insert_planned(store, "exp", [rq.PlannedRun("r0", "c", (("n", 1),), 0, None, 0)])
        rq.put_metrics(store, "r0", [Metric("latency_median_ms", 2.5, "ms")])


@pytest.mark.parametrize("argv", READERS)
def test_a_corrupt_store_is_one_line_restore_or_move_aside(tmp_path: Path, argv: tuple[str, ...]) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "farm.db").write_bytes(b"not a database at all\n" * 300)
    before = _digest(results / "farm.db")
    result = farm(*argv, "--results", str(results), cwd=tmp_path)
    one_line_error(result, "farm.db", "restore it from a backup or move it aside")
    assert result.returncode == 2 and _digest(results / "farm.db") == before


def test_readers_work_on_a_read_only_store_and_write_nothing(
    tiny_tmpfs: Callable[[str], Tmpfs], tmp_path: Path
) -> None:
    fs = tiny_tmpfs("8m")
    _experiment(StoreLocation(fs.path))
    fs.remount(read_only=True)
    before = _digest(fs.path / "farm.db")
    status = farm("status", "--json", "--results", str(fs.path), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert '"exp"' in status.stdout
    export = farm("export", "exp", "--csv", "--results", str(fs.path), cwd=tmp_path)
    assert export.returncode == 0 and "r0" in export.stdout, export.stderr
    assert _digest(fs.path / "farm.db") == before


def test_a_missing_store_is_one_line_and_is_not_created(tmp_path: Path) -> None:
    result = farm("status", "--results", str(tmp_path / "nowhere"), cwd=tmp_path)
    one_line_error(result, "nowhere/farm.db", "no results yet")
    assert not (tmp_path / "nowhere").exists()


def test_unreachable_and_refused_postgresql_are_one_line(
    postgres_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    down = farm("status", "--results", f"postgresql://farm:pw@127.0.0.1:{free_tcp_port()}/farm", cwd=tmp_path)
    line = one_line_error(down, "postgresql://farm:***@127.0.0.1", "not reachable")
    assert ":pw@" not in line
    wrong = farm("status", "--results", pg_url.replace("farm-test-password", "nope"), cwd=tmp_path)
    one_line_error(wrong, "wrong user or password")
    missing = farm("status", "--results", postgres_server.url("no_such_db"), cwd=tmp_path)
    one_line_error(missing, "no_such_db", "createdb")
    bad = farm("status", "--results", "postgresql://farm@127.0.0.1:notaport/farm", cwd=tmp_path)
    one_line_error(bad, "--results", "Port")
    assert bad.returncode == 2 and not (tmp_path / "results").exists()


def test_schema_from_a_newer_farm_is_one_line_and_untouched(pg_url: str, tmp_path: Path) -> None:
    location = StoreLocation(tmp_path / "results", pg_url)
    _experiment(location)
    with Store(location) as store:
        store.execute("UPDATE farm_schema SET version = ?", (len(MIGRATIONS) + 5,))
    one_line_error(
        farm("report", "exp", "--results", pg_url, cwd=tmp_path), "newer than this farm", "upgrade farm"
    )


def test_postgresql_store_from_the_option_and_from_farm_yaml(
    postgres_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    location = StoreLocation(tmp_path / "results", pg_url)
    _experiment(location)
    by_option = farm("status", "--json", "--results", pg_url, cwd=tmp_path)
    assert by_option.returncode == 0 and '"exp"' in by_option.stdout, by_option.stderr
    without_password = pg_url.replace(":farm-test-password@", "@")
    (tmp_path / "farm.yaml").write_text(f"store: {without_password}\n")
    by_config = farm("status", "--json", cwd=tmp_path, env={"PGPASSWORD": "farm-test-password"})
    assert by_config.returncode == 0 and '"exp"' in by_config.stdout, by_config.stderr
    assert not (tmp_path / "results" / "farm.db").exists()  # no SQLite store was made beside it
    (tmp_path / "farm.yaml").write_text(f"hosts: []\nstore: {pg_url}\n")
    refused = farm("status", cwd=tmp_path)
    one_line_error(refused, "farm.yaml:2: store: no passwords in config files")
