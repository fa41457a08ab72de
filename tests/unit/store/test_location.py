"""Which store a command uses: --results, $FARM_RESULTS, farm.yaml store:, ./results (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.errors import ConfigError
from farm.store.location import Backend, StoreLocation, redact, resolve

URL = "postgresql://lab:s3cret@db.lab:5432/farm"


def test_default_is_sqlite_in_results() -> None:
    location = resolve(None, env={})
    assert location == StoreLocation(Path("results"))
    assert location.backend is Backend.SQLITE and location.label == "results/farm.db"


def test_precedence_explicit_then_environment_then_config() -> None:
    assert resolve("here", configured=URL, env={"FARM_RESULTS": "env"}).artifacts == Path("here")
    assert resolve(None, configured=URL, env={"FARM_RESULTS": "env"}) == StoreLocation(Path("env"))
    assert resolve(None, configured=URL, env={}) == StoreLocation(Path("results"), URL)


def test_a_url_keeps_artifacts_in_the_local_results_folder() -> None:
    assert resolve(URL, env={"FARM_RESULTS": "/data/results"}) == StoreLocation(Path("/data/results"), URL)
    assert resolve(URL, env={}).artifacts == Path("results")
    assert resolve(None, env={"FARM_RESULTS": URL}) == StoreLocation(Path("results"), URL)


def test_the_password_never_reaches_a_message() -> None:
    assert redact(URL) == "postgresql://lab:***@db.lab:5432/farm"
    assert resolve(URL, env={}).label == "postgresql://lab:***@db.lab:5432/farm"
    assert redact("postgresql://lab@db/farm") == "postgresql://lab@db/farm"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("mysql://u:pw@h/farm", "unsupported store URL scheme 'mysql'"),
        ("postgresql://u:pw@h:port/farm", "Port could not be cast"),
        ("postgresql://u:pw@h:5432", "no database name"),
        ("postgresql://u:pw@h:5432/", "no database name"),
    ],
)
def test_misconfigured_urls_are_one_line_naming_the_source(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve(None, configured=value, configured_at="farm.yaml:3", env={})
    message = str(raised.value)
    assert message.startswith("farm.yaml:3: ") and says in message and "pw" not in message
