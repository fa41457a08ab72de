"""farm.yaml `hosts:` parsing: values, defaults, the implicit local host, and FILE:LINE errors."""

from __future__ import annotations

import pytest

from farm.errors import ConfigError
from farm.fleet.farm_yaml import DEFAULT_ADB_PORT, parse_config

GOOD = """\
hosts:
  - name: lab1
    address: lab1.example.org
    port: 2222
    user: farm
    identity_file: ~/.ssh/farm_ed25519
    adb_port: 5038
    tags: [pixel, rack-a]
  - name: lab2
    address: lab2-alias
"""


def test_hosts_parse_with_values_defaults_and_an_implicit_local_first() -> None:
    config = parse_config(GOOD, "farm.yaml", local_adb_port=6000)
    assert [h.name for h in config.hosts] == ["local", "lab1", "lab2"]
    local, lab1, lab2 = config.hosts
    assert local.is_local and local.adb_port == 6000
    assert (lab1.address, lab1.port, lab1.user, lab1.adb_port) == ("lab1.example.org", 2222, "farm", 5038)
    assert lab1.identity_file == "~/.ssh/farm_ed25519" and lab1.tags == ("pixel", "rack-a")
    assert lab1.location == "farm.yaml:2"
    assert (lab2.port, lab2.user, lab2.identity_file, lab2.adb_port) == (None, None, None, DEFAULT_ADB_PORT)
    assert [h.name for h in config.remote_hosts] == ["lab1", "lab2"]


def test_an_explicit_local_entry_is_kept_and_local_false_drops_it() -> None:
    explicit = parse_config("hosts:\n  - name: local\n    adb_port: 5040\n", "f.yaml")
    assert [(h.name, h.adb_port, h.is_local) for h in explicit.hosts] == [("local", 5040, True)]
    none = parse_config("local: false\nhosts:\n  - {name: lab1, address: a}\n", "f.yaml")
    assert [h.name for h in none.hosts] == ["lab1"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "hosts:\n  - name: lab1\n    address: a\n    password: hunter2\n",
            "f.yaml:4: hosts[0].password: no passwords",
        ),
        ("hosts:\n  - name: lab1\n    adress: a\n", "f.yaml:3: hosts[0].adress: unknown key"),
        ("hosts:\n  - name: lab1\n", "f.yaml:2: hosts.lab1: address is missing"),
        ("hosts:\n  - address: a\n", "f.yaml:2: hosts[0]: name is missing"),
        (
            "hosts:\n  - name: lab1\n    address: a\n    port: 70000\n",
            "f.yaml:4: hosts.lab1.port: expected a port",
        ),
        ("hosts:\n  - name: lab1\n    address: a\n    adb_port: '5037'\n", "f.yaml:4: hosts.lab1.adb_port"),
        (
            "hosts:\n  - name: lab1\n    address: a\n    tags: pixel\n",
            "f.yaml:4: hosts.lab1.tags: expected a list",
        ),
        (
            "hosts:\n  - {name: a, address: x}\n  - {name: a, address: y}\n",
            "f.yaml:3: hosts.a: defined twice",
        ),
        ("hosts:\n  - name: local\n    user: me\n", "f.yaml:3: hosts.local.user: only for remote hosts"),
        ("hosts:\n  - name: 'bad name'\n    address: a\n", "f.yaml:2: hosts[0].name: expected a short name"),
        ("hosts: lab1\n", "f.yaml:1: hosts: expected a list"),
        ("hostz: []\n", "f.yaml:1: hostz: unknown key"),
        ("hosts:\n  - {name: a, address: x, start_adb: yes}\n", "f.yaml:2: hosts.a.start_adb: expected true"),
        ("hosts:\n  - name: lab1\n   address: a\n", "f.yaml:3: invalid YAML"),
    ],
)
def test_mistakes_name_file_line_and_key(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "f.yaml")
    assert str(caught.value).startswith(expected), str(caught.value)


def test_unknown_host_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"no host named 'lab9'.*local, lab1, lab2"):
        parse_config(GOOD, "farm.yaml").host("lab9")
