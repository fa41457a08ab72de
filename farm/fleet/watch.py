"""Which phones are there now, asked often and cheaply while a sweep runs.

`discover` identifies every phone (getprop, dumpsys battery: two shell calls each). A running
sweep looks again every few seconds for phones that joined (a lab host back, a phone plugged in):
PhoneWatch asks each endpoint only for its list (`host:devices`, one call) and identifies a phone
only when its (host, adb serial) is new or was not online when last seen, so phones in the middle
of a benchmark are not disturbed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from farm.errors import FarmError
from farm.fleet.endpoint import AdbState, LocalAdbEndpoint
from farm.fleet.inventory import Phone, PhoneState, identify


class PhoneWatch:
    def __init__(self, known: Sequence[Phone] = ()) -> None:
        self._known: dict[tuple[str, str], Phone] = {(p.host, p.adb_serial): p for p in known}

    def refresh(self, endpoints: Sequence[LocalAdbEndpoint]) -> list[Phone]:
        """The phones listed now (an endpoint that cannot list, a host away, contributes none)."""
        found: list[Phone] = []
        for endpoint in endpoints:
            try:
                listed = endpoint.list()
            except FarmError:
                continue
            for item in listed:
                key = (endpoint.host, item.adb_serial)
                known = self._known.get(key)
                if item.state is not AdbState.DEVICE:
                    state = (
                        PhoneState.UNAUTHORIZED if item.state is AdbState.UNAUTHORIZED else PhoneState.OFFLINE
                    )
                    if known is not None:
                        self._known[key] = replace(known, state=state)
                        found.append(self._known[key])
                    continue
                if known is None or known.state is not PhoneState.ONLINE:
                    known = identify(endpoint, item.adb_serial, item.state)
                    self._known[key] = known
                found.append(known)
        return sorted(found, key=lambda p: p.device_id)
