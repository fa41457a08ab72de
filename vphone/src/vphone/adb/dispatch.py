"""Service name -> handler, in adbd's order (`daemon_service_to_fd`); None means CLSE(0, h)."""

from __future__ import annotations

from functools import partial

from vphone.adb.services import misc, shell, sync
from vphone.adb.services.base import ServiceContext
from vphone.adb.transport import Handler


def open_service(ctx: ServiceContext, name: str) -> Handler | None:
    if name.startswith(("shell:", "shell,")) or name == "shell":
        return partial(shell.shell_service, ctx=ctx, name=name)
    if name.startswith("exec:"):
        return partial(shell.exec_service, ctx=ctx, command=name[len("exec:") :])
    if name.startswith("sync:"):
        return partial(sync.sync_service, ctx=ctx)
    if name.startswith("reboot:"):
        return partial(misc.reboot_service, ctx=ctx)
    if name.startswith("root:"):
        return partial(misc.root_service, ctx=ctx)
    if name.startswith("unroot:"):
        return partial(misc.unroot_service, ctx=ctx)
    if name.startswith("tcpip:"):
        port = misc.parse_tcpip_port(name[len("tcpip:") :])
        return None if port is None else partial(misc.tcpip_service, ctx=ctx, port=port)
    if name.startswith("usb:"):
        return partial(misc.usb_service, ctx=ctx)
    return None
