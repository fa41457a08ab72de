"""The fleet from a farm config: reachable lab hosts become endpoints named by the config; an
unreachable one is left out (and keeps being retried); an unknown host key stops everything."""

from __future__ import annotations

from pathlib import Path

import pytest
from vphone.testing.phones import free_tcp_port, kill_adb_server

from farm.errors import EnvironmentProblem
from farm.fleet.farm_yaml import parse_config
from farm.fleet.hostkeys import KNOWN_HOSTS_FILE_NAME, HostKeyUnknown
from farm.fleet.hosts import Fleet
from farm.fleet.ssh_endpoint import SshAdbEndpoint
from tests.integration.remote.labs import fleet_in, policy_in, write_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(lab_hosts):
    return lab_hosts("lab1", "127.0.0.6", phones=1)


def test_reachable_host_is_an_endpoint_and_a_dead_one_is_left_out(lab, tmp_path: Path) -> None:
    path = write_config(tmp_path, [lab], local=False)
    dead = lab.config_entry(name="dead", port=free_tcp_port())
    path.write_text(path.read_text() + dead)
    with fleet_in(tmp_path) as fleet:
        assert list(fleet.by_host) == ["lab1"]
        assert "dead: not connected: TCP connection" in str(fleet.unreachable["dead"])
        endpoint = fleet.endpoint_for("lab1")
        assert isinstance(endpoint, SshAdbEndpoint) and endpoint.host == "lab1"
        assert [item.adb_serial for item in endpoint.list()] == [lab.phones[0].adb_serial]
        assert fleet.tunnels["dead"].state.value == "down"
        tunnels = dict(fleet.tunnels)
    assert {name: t.state.value for name, t in tunnels.items()} == {"lab1": "closed", "dead": "closed"}


def test_unknown_host_key_stops_the_fleet(lab, tmp_path: Path) -> None:
    write_config(tmp_path, [lab], local=False, trust=False)
    (tmp_path / KNOWN_HOSTS_FILE_NAME).write_text("")
    with pytest.raises(HostKeyUnknown, match="farm hosts trust lab1"):
        fleet_in(tmp_path).open()


def test_start_adb_starts_a_stopped_adb_server_on_the_host_over_ssh(lab_hosts, tmp_path: Path) -> None:
    bare = lab_hosts("bare", "127.0.0.7", phones=0)
    kill_adb_server(bare.adb)
    write_config(tmp_path, [bare], local=False)
    (tmp_path / "farm.yaml").write_text("local: false\nhosts:\n" + bare.config_entry(start_adb="true"))
    with fleet_in(tmp_path) as fleet:
        assert fleet.tunnels["bare"].adb_started
        assert fleet.endpoint_for("bare").list() == []
        version, _rtt_s = fleet.tunnels["bare"].adb_round_trip_s()
        assert version > 30


def test_without_a_local_adb_server_the_lab_hosts_are_the_fleet(lab, tmp_path: Path, caplog) -> None:
    write_config(tmp_path, [lab])  # the local host is implicit
    config = parse_config((tmp_path / "farm.yaml").read_text(), str(tmp_path / "farm.yaml"))
    with Fleet(config, policy=policy_in(tmp_path), local_adb_port=free_tcp_port()) as fleet:
        assert list(fleet.by_host) == ["lab1"]
    assert "using the lab hosts only" in caplog.text


def test_an_explicit_local_host_without_its_adb_server_is_an_error(lab, tmp_path: Path) -> None:
    path = write_config(tmp_path, [lab])
    path.write_text(path.read_text().replace("hosts:\n", "hosts:\n  - name: local\n", 1))
    config = parse_config(path.read_text(), str(path))
    with pytest.raises(EnvironmentProblem, match="no adb server"):
        Fleet(config, policy=policy_in(tmp_path), local_adb_port=free_tcp_port()).open()
