"""SshAdbEndpoint: a lab host's adb server, reached through its SSH tunnel, as a fleet Endpoint.

It is a LocalAdbEndpoint on the tunnel's local port (adbutils talks to the forwarded port exactly
as to a local server) whose `host` is the config name, so its phones are `NAME/serial`. What differs
is what "the server is not there" means: the host is down, a HostError that may pass, and waiting
for a lost phone keeps waiting through it while the tunnel reconnects.
"""

from __future__ import annotations

import time

from farm.errors import DeviceTransientError, EnvironmentProblem, HostError
from farm.fleet.endpoint import AdbState, Listed, LocalAdbEndpoint
from farm.remote.tunnel import SshTunnel


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

    def wait_online(self, adb_serial: str, device_id: str, timeout_s: float, poll_s: float = 0.5) -> None:
        """Wait until the phone is back as `device`; a host that is down counts as not back yet."""
        deadline = time.monotonic() + timeout_s
        state = AdbState.MISSING
        while True:
            try:
                state = self.state_of(adb_serial)
            except HostError as error:
                if time.monotonic() >= deadline:
                    raise DeviceTransientError(device_id, f"host still unreachable: {error}") from None
                self.tunnel.wait_up(min(poll_s * 4, max(0.0, deadline - time.monotonic())))
                continue
            if state is AdbState.DEVICE:
                return
            if time.monotonic() >= deadline:
                raise DeviceTransientError(device_id, f"still {state} after {timeout_s:.0f} s")
            if state in (AdbState.MISSING, AdbState.OFFLINE):
                self.reconnect(adb_serial)
            time.sleep(poll_s)
