"""reboot:, root:, unroot:, tcpip:<port>, usb: with adbd's exact reply texts (reference 2.6)."""

from __future__ import annotations

from vphone.adb.services.base import ServiceContext
from vphone.adb.transport import Stream

TCP_PORT_PROPERTY = "service.adb.tcp.port"


def root_reply(*, is_root: bool, can_root: bool) -> tuple[str, bool]:
    """(text, restarting) for `root:`."""
    if is_root:
        return "adbd is already running as root\n", False
    if not can_root:
        return "adbd cannot run as root in production builds\n", False
    return "restarting adbd as root\n", True


def unroot_reply(*, is_root: bool) -> tuple[str, bool]:
    if not is_root:
        return "adbd not running as root\n", False
    return "restarting adbd as non root\n", True


def parse_tcpip_port(argument: str) -> int | None:
    """The port of `tcpip:<port>`; None (the open fails) when it is not a number."""
    try:
        return int(argument.strip())
    except ValueError:
        return None


async def _reply_then_maybe_restart(stream: Stream, ctx: ServiceContext, text: str, restarting: bool) -> None:
    await stream.write(text.encode())
    stream.close()
    if restarting:
        # The adb client waits for the transport to drop and come back after "restarting".
        ctx.control.restart_adbd()


async def root_service(stream: Stream, ctx: ServiceContext) -> None:
    world = ctx.world
    text, restarting = root_reply(is_root=world.adbd_root, can_root=world.can_root())
    if restarting:
        world.set_adbd_root(True)
    await _reply_then_maybe_restart(stream, ctx, text, restarting)


async def unroot_service(stream: Stream, ctx: ServiceContext) -> None:
    world = ctx.world
    text, restarting = unroot_reply(is_root=world.adbd_root)
    if restarting:
        world.set_adbd_root(False)
    await _reply_then_maybe_restart(stream, ctx, text, restarting)


async def tcpip_service(stream: Stream, ctx: ServiceContext, port: int) -> None:
    if port <= 0:
        await _reply_then_maybe_restart(stream, ctx, f"invalid port {port}\n", False)
        return
    ctx.world.set_property(TCP_PORT_PROPERTY, str(port))
    await _reply_then_maybe_restart(stream, ctx, f"restarting in TCP mode port: {port}\n", True)


async def usb_service(stream: Stream, ctx: ServiceContext) -> None:
    await _reply_then_maybe_restart(stream, ctx, "restarting in USB mode\n", True)


async def reboot_service(stream: Stream, ctx: ServiceContext) -> None:
    """adbd never closes the reboot stream itself: it waits for the reboot to take the device
    down, so that `adb reboot && adb wait-for-device` waits for the phone to come back rather
    than returning at once to the phone that is about to go (Mobly's reboot does just that). The
    stream ends when the reboot drops the connection."""
    ctx.control.begin_reboot()
    while await stream.read():  # b"" once the reboot's drop (or the host) closed it
        pass
