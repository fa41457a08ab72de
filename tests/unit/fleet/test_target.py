"""farm.yaml host + ~/.ssh/config -> SSH target: farm.yaml wins, the alias supplies the rest."""

from __future__ import annotations

import getpass

import paramiko
import pytest

from farm.errors import ConfigError
from farm.fleet.farm_yaml import parse_config
from farm.fleet.ssh import load_ssh_config, resolve_target

SSH_CONFIG = """\
Host lab-alias
    HostName 10.1.2.3
    Port 2200
    User labuser
    IdentityFile /keys/lab_ed25519
"""


def _host(entry: str):
    return parse_config("local: false\nhosts:\n" + entry, "farm.yaml").hosts[0]


def test_alias_supplies_hostname_port_user_and_identity() -> None:
    target = resolve_target(
        _host("  - {name: lab1, address: lab-alias}\n"), paramiko.SSHConfig.from_text(SSH_CONFIG)
    )
    assert (target.hostname, target.port, target.user) == ("10.1.2.3", 2200, "labuser")
    assert target.identity_files == ("/keys/lab_ed25519",) and not target.explicit_identity
    assert target.host_id == "[10.1.2.3]:2200"


def test_farm_yaml_values_win_over_the_alias() -> None:
    entry = "  - {name: lab1, address: lab-alias, port: 22, user: me, identity_file: /k/id}\n"
    target = resolve_target(_host(entry), paramiko.SSHConfig.from_text(SSH_CONFIG))
    assert (target.port, target.user, target.identity_files) == (22, "me", ("/k/id",))
    assert target.explicit_identity and target.host_id == "10.1.2.3"


def test_plain_address_defaults() -> None:
    target = resolve_target(
        _host("  - {name: lab1, address: lab1.example.org}\n"), paramiko.SSHConfig.from_text("")
    )
    assert (target.hostname, target.port, target.user) == ("lab1.example.org", 22, getpass.getuser())


def test_a_broken_ssh_config_is_one_config_error(tmp_path) -> None:
    broken = tmp_path / "config"
    broken.write_text("Host lab\n  NotAKeyValueLine\n")
    with pytest.raises(ConfigError, match="cannot read the SSH config"):
        load_ssh_config(broken)
    assert load_ssh_config(tmp_path / "missing").lookup("lab")["hostname"] == "lab"
