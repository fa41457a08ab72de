"""Fault injection on a running virtual phone: what `farm virtual fault` asks the daemon to do.

disconnect  drop the phone's TCP connections now (the adb server reconnects by itself)
offline N   drop connections and refuse new ones for N seconds
hang [N]    stop reading and answering packets until the next fault / recover, or for N seconds
reboot      what `adb reboot` does: offline while the phone's processes are reset, then back
recover     end a hang or an offline period now
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vphone.adb.server import PhoneServer
from vphone.errors import ConfigError


class FaultKind(enum.StrEnum):
    DISCONNECT = "disconnect"
    OFFLINE = "offline"
    HANG = "hang"
    REBOOT = "reboot"
    RECOVER = "recover"


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    seconds: float | None = None


def parse_fault(kind: str, seconds: float | None) -> Fault:
    """Validate a fault request; raises ConfigError with what to do instead."""
    try:
        fault_kind = FaultKind(kind)
    except ValueError:
        choices = ", ".join(k.value for k in FaultKind)
        raise ConfigError(f"unknown fault {kind!r}", hint=f"choose one of: {choices}") from None
    if seconds is not None and seconds <= 0:
        raise ConfigError(f"fault {kind}: seconds must be positive, got {seconds}")
    if fault_kind is FaultKind.OFFLINE and seconds is None:
        raise ConfigError("fault offline needs a duration", hint="e.g. `farm virtual fault SERIAL offline 5`")
    if fault_kind in (FaultKind.DISCONNECT, FaultKind.REBOOT, FaultKind.RECOVER) and seconds is not None:
        raise ConfigError(f"fault {kind} takes no duration")
    return Fault(fault_kind, seconds)


def apply_fault(phone: PhoneServer, fault: Fault) -> None:
    if fault.kind is FaultKind.DISCONNECT:
        phone.recover()  # any next fault ends a hang
        phone.drop_connections()
    elif fault.kind is FaultKind.OFFLINE:
        assert fault.seconds is not None
        phone.go_offline(fault.seconds)
    elif fault.kind is FaultKind.HANG:
        phone.hang(fault.seconds)
    elif fault.kind is FaultKind.REBOOT:
        phone.begin_reboot()
    else:
        phone.recover()
