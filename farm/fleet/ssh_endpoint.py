"""SshAdbEndpoint: a lab host's adb server, reached through its SSH tunnel, as a fleet Endpoint.

It is a LocalAdbEndpoint on the tunnel's local port (adbutils talks to the forwarded port exactly
as to a local server) whose `host` is the config name, so its phones are `NAME/serial`. What differs
is what "the server is not there" means: the host is down, a HostError that may pass; a phone's
state is then MISSING, so waiting for a lost phone keeps waiting while the tunnel reconnects.
"""

from __future__ import annotations

from farm.errors import EnvironmentProblem, HostError
from farm.fleet.endpoint import AdbState, Listed, LocalAdbEndpoint
from farm.fleet.tunnel import SshTunnel


class SshAdbEndpoint(LocalAdbEndpoint):
    """The adb server of a lab host, through an open SshTunnel (which the caller owns)."""

    def __init__(self, tunnel: SshTunnel) -> None:
        if not tunnel.local_port:
            raise ValueError("open the tunnel before building its endpoint")
        super().__init__(tunnel.local_port, host=tunnel.name, address="127.0.0.1")
        self.tunnel = tunnel

    def check_server(self) -> None:
        if not self.tunnel.is_up:
            raise self.tunnel.down_error()

    def list(self) -> list[Listed]:
        self.check_server()
        try:
            return super().list()
        except EnvironmentProblem as error:
            raise HostError(self.host, error.message, retryable=True) from None

    def state_of(self, adb_serial: str) -> AdbState:
        """While the host is down its phones are MISSING, so waiting for a lost phone (the base
        class's wait_online) keeps waiting through the outage while the tunnel reconnects."""
        try:
            return super().state_of(adb_serial)
        except HostError:
            return AdbState.MISSING

    def reconnect(self, adb_serial: str) -> None:
        if self.tunnel.is_up:
            super().reconnect(adb_serial)

    def reset_transport(self, adb_serial: str) -> None:
        if self.tunnel.is_up:
            super().reset_transport(adb_serial)
