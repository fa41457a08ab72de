"""farm.yaml `store:`: a folder or a postgresql:// URL without a password (pure)."""

from __future__ import annotations

import pytest

from farm.errors import ConfigError
from farm.fleet.farm_yaml import parse_config


def test_store_is_read_with_its_line() -> None:
    config = parse_config("hosts: []\nstore: postgresql://farm@db.lab:5432/farm\n", "farm.yaml")
    assert (config.store, config.store_location) == ("postgresql://farm@db.lab:5432/farm", "farm.yaml:2")
    assert parse_config("store: /srv/farm-results\n", "f.yaml").store == "/srv/farm-results"
    assert parse_config("hosts: []\n", "f.yaml").store is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("store: postgresql://farm:hunter2@db/farm\n", "f.yaml:1: store: no passwords in config files"),
        ("store: [a, b]\n", "f.yaml:1: store: expected a results folder or a postgresql://"),
        ("store: ''\n", "f.yaml:1: store: expected a results folder"),
    ],
)
def test_store_mistakes_name_file_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "f.yaml")
    assert str(caught.value).startswith(expected) and "hunter2" not in str(caught.value)
