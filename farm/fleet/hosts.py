"""The fleet's endpoints from the farm config: the local adb server and one tunnel per lab host.

    with open_fleet(config_path, adb_port) as fleet:
        phones = discover(fleet.endpoints)
        session = DeviceSession(fleet.endpoint_for(phone.host).device(phone.adb_serial), ...)

Tunnels are opened in parallel and closed when the fleet closes. A lab host that cannot be reached
at start is left out with a warning; its tunnel keeps trying in the background (exponential
backoff) and `refresh()` adds the host once it is up, so its phones join a running sweep. A host
whose key is unknown or changed stops everything: a security refusal is never a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from farm.errors import ConfigError, EnvironmentProblem, HostError
from farm.fleet.endpoint import LocalAdbEndpoint, adb_port_from_env
from farm.fleet.farm_yaml import FarmConfig, HostConfig, config_dir, load_config
from farm.fleet.hostkeys import KNOWN_HOSTS_FILE_NAME, HostKeyChanged, HostKeyPolicy, HostKeyUnknown
from farm.fleet.inventory import Phone
from farm.fleet.powercycle import CommandResult, run_local
from farm.fleet.ssh import load_ssh_config, resolve_target
from farm.fleet.ssh_endpoint import SshAdbEndpoint
from farm.fleet.tunnel import SshTunnel, TunnelState

log = logging.getLogger("farm.fleet")
FIRST_CONNECT_TIMEOUT_S = 15.0


def default_policy() -> HostKeyPolicy:
    return HostKeyPolicy(config_dir() / KNOWN_HOSTS_FILE_NAME)


class Fleet:
    """Endpoints for every configured host; open() connects, close() tears the tunnels down."""

    def __init__(
        self,
        config: FarmConfig,
        *,
        policy: HostKeyPolicy | None = None,
        local_adb_port: int | None = None,
        require_local: bool = True,
        strict_keys: bool = True,
    ) -> None:
        self.config = config
        self.policy = policy or default_policy()
        self.local_adb_port = local_adb_port
        self.require_local = require_local
        self.strict_keys = strict_keys  # False: only look (farm hosts), a key problem is a state
        self.tunnels: dict[str, SshTunnel] = {}
        self.by_host: dict[str, LocalAdbEndpoint] = {}
        self.unreachable: dict[str, HostError] = {}

    @property
    def endpoints(self) -> list[LocalAdbEndpoint]:
        return list(self.by_host.values())

    def endpoint_for(self, host: str) -> LocalAdbEndpoint:
        try:
            return self.by_host[host]
        except KeyError:
            raise ConfigError(f"no reachable host named {host!r}") from None

    def tags_of(self, host: str) -> frozenset[str]:
        """The config's tags of a host, which every phone on it carries (devices: tags: [...])."""
        for config in self.config.hosts:
            if config.name == host:
                return frozenset(config.tags)
        return frozenset()

    def _host(self, name: str) -> HostConfig | None:
        return next((h for h in self.config.hosts if h.name == name), None)

    def has_power_cycle(self, phone: Phone) -> bool:
        """Does farm.yaml give a power-cycle command for this phone (its host's or its own)?"""
        host = self._host(phone.host)
        return host is not None and host.power_cycle_of(phone.serial) is not None

    def power_cycle(self, phone: Phone) -> CommandResult | None:
        """Run the phone's power-cycle command on its host (this machine for `local`, over SSH for
        a lab host), bounded by its timeout; None when farm.yaml has none for it. ConfigError when
        a placeholder has no value for this phone; HostError when its host cannot be reached."""
        host = self._host(phone.host)
        cycle = host.power_cycle_of(phone.serial) if host is not None else None
        if host is None or cycle is None:
            return None
        values = {
            "serial": phone.serial,
            "adb_serial": phone.adb_serial,
            "device_id": phone.device_id,
            "host": phone.host,
            **host.phones.get(phone.serial, {}),
        }
        argv = cycle.render(values)
        if host.is_local:
            return run_local(argv, cycle.timeout_s)
        tunnel = self.tunnels.get(host.name)
        if tunnel is None:
            raise HostError(host.name, "no tunnel to run the power-cycle command over", retryable=True)
        return tunnel.run(argv, cycle.timeout_s)

    def refresh(self) -> list[str]:
        """Hosts unreachable so far whose tunnel (it keeps retrying, with backoff) is up now join
        the fleet; returns their names. A running sweep calls this to let their phones join."""
        back = []
        for name in list(self.unreachable):
            tunnel = self.tunnels.get(name)
            if tunnel is not None and tunnel.state is TunnelState.UP:
                del self.unreachable[name]
                self.by_host[name] = SshAdbEndpoint(tunnel)
                back.append(name)
                log.info("farm: %s is reachable now: its phones join", name)
        return back

    def open(self) -> Fleet:
        try:
            for host in self.config.hosts:
                if host.is_local:
                    self._open_local(host)
            remote = list(self.config.remote_hosts)
            if remote:
                with ThreadPoolExecutor(max_workers=min(8, len(remote))) as pool:
                    list(pool.map(self._open_remote, remote))
                for host in remote:  # keep the config's order
                    self._settle(host)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for tunnel in self.tunnels.values():
            tunnel.close()
        self.tunnels.clear()

    def __enter__(self) -> Fleet:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _open_local(self, host: HostConfig) -> None:
        explicit = self.local_adb_port or (host.adb_port if self.config.path is not None else None)
        endpoint = LocalAdbEndpoint(adb_port_from_env(explicit), host=host.name)
        if self.require_local:
            try:
                endpoint.check_server()
            except EnvironmentProblem as error:
                if not (host.implicit and self.config.remote_hosts):
                    raise
                # a coordinator without phones of its own: the lab hosts are the fleet
                log.warning(
                    "farm: local: %s; using the lab hosts only (`local: false` in %s says so, silently)",
                    error.message,
                    self.config.path,
                )
                return
        self.by_host[host.name] = endpoint

    def _open_remote(self, host: HostConfig) -> None:
        target = resolve_target(host, load_ssh_config())
        tunnel = SshTunnel(
            target,
            self.policy,
            adb_port=host.adb_port,
            keepalive_s=host.keepalive_s,
            start_adb=host.start_adb,
        )
        self.tunnels[host.name] = tunnel.open()
        tunnel.wait_settled(FIRST_CONNECT_TIMEOUT_S)

    def _settle(self, host: HostConfig) -> None:
        tunnel = self.tunnels[host.name]
        if self.strict_keys and isinstance(tunnel.last_error, HostKeyUnknown | HostKeyChanged):
            raise tunnel.last_error
        if tunnel.state is not TunnelState.UP:
            error = tunnel.down_error()
            self.unreachable[host.name] = error
            if self.strict_keys:
                log.warning(
                    "farm: %s (retrying in the background: its phones join when it is back; "
                    "see `farm hosts check %s`)",
                    error,
                    host.name,
                )
            return
        self.by_host[host.name] = SshAdbEndpoint(tunnel)


def open_fleet(
    config_path: Path | None = None, adb_port: int | None = None, *, hosts: Sequence[str] = ()
) -> Fleet:
    """A Fleet (not yet open) for the config found from `config_path` (see farm.fleet.farm_yaml)."""
    config = load_config(config_path, local_adb_port=adb_port_from_env(adb_port))
    if hosts:
        config = FarmConfig(tuple(config.host(name) for name in hosts), config.path)
    return Fleet(config, local_adb_port=adb_port)
