"""The virtual-phone daemon: N phones in one asyncio loop, a control socket, a state file.

Run as `python -m vphone.daemon --state-dir DIR --count N [--profile P ...]`, normally by
`farm virtual up` (vphone.control), which detaches it. Start-up result: exactly one JSON
line on stdout ({"ok": true, "state": {...}} or {"ok": false, "error": "..."}); after that stdout
and stderr go to DIR/daemon.log. State (pid, control socket, phones) is DIR/state.json, rewritten
on every phone state change and removed on a clean exit. Control requests are one JSON line each
on the unix socket: {"op": "ping" | "list" | "stop"} or {"op": "fault", "serial", "kind", "seconds"}.

A world factory is called as factory(profile, serial, state_dir, keep_data=bool): keep_data asks
it to keep a phone's data even when the state dir holds another profile's (`--keep-data`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import faulthandler
import hashlib
import importlib
import json
import logging
import os
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vphone import daemoncpu, faults, logcap
from vphone.adb import auth
from vphone.adb.link import PRESETS, LinkKind
from vphone.adb.server import PhoneServer
from vphone.adb.services import process
from vphone.errors import ConfigError, EnvironmentProblem, VphoneError
from vphone.phone_api import PhoneWorld

log = logging.getLogger("vphone.daemon")

FIRST_PORT = 6520
EMULATOR_PORTS = range(5554, 5586)  # the adb server probes these as emulators
STATE_FILE = "state.json"
ADB_KEYS_FILE = "adb_keys"  # the phones' /data/misc/adb/adb_keys: the host keys they trust
LOG_FILE = "daemon.log"
DEFAULT_WORLD_FACTORY = "vphone.world:make_world"
PHONES_DIR = "phones"  # <state_dir>/phones/<serial>: one phone's files
MAX_UNIX_PATH_BYTES = 100


class WorldFactory(Protocol):
    def __call__(self, profile: str, serial: str, state_dir: Path, *, keep_data: bool) -> PhoneWorld: ...


@dataclass(frozen=True)
class DaemonConfig:
    state_dir: Path
    profiles: tuple[str, ...]  # one per phone
    first_port: int | None
    world_factory: str
    adb_port: int | None
    keep_data: bool = False
    link: LinkKind | None = None  # --link: every phone's cable; None: each profile's own `link:`
    adb_keys: Path | None = None  # --adb-keys: an adb_keys file; None trusts no key


def control_socket_path(state_dir: Path) -> Path:
    """DIR/control.sock, or a short /tmp name when DIR is too deep for a unix socket path."""
    path = state_dir.resolve() / "control.sock"
    if len(str(path).encode()) <= MAX_UNIX_PATH_BYTES:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"farm-virtual-{digest}.sock"


def phone_state_dir(state_dir: Path, serial: str) -> Path:
    """Where one phone's world keeps its files (its sandbox root, ground-truth log...)."""
    return state_dir / PHONES_DIR / serial


def load_world_factory(spec: str) -> WorldFactory:
    module_name, _, attribute = spec.partition(":")
    try:
        factory: WorldFactory = getattr(importlib.import_module(module_name), attribute or "make_world")
    except (ImportError, AttributeError) as error:
        raise EnvironmentProblem(f"cannot load the virtual phone world {spec!r}: {error}") from error
    return factory


def bind_port(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def bind_ports(count: int, first_port: int | None) -> list[socket.socket]:
    """Listening sockets for `count` phones: from first_port (or 6520) upward, skipping ports in use
    and the emulator range. An explicitly requested first port that is taken is an error."""
    sockets: list[socket.socket] = []
    port = first_port or FIRST_PORT
    try:
        while len(sockets) < count:
            if port > 65535:
                raise EnvironmentProblem("no free TCP port left for virtual phones")
            if port in EMULATOR_PORTS:
                port += 1
                continue
            try:
                sockets.append(bind_port(port))
            except OSError as error:
                if error.errno != errno.EADDRINUSE:
                    raise
                if first_port is not None and not sockets:
                    raise EnvironmentProblem(
                        f"port {port} is already in use", hint="choose another --port or leave it out"
                    ) from None
            port += 1
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def read_adb_keys(path: Path) -> list[auth.AdbKey]:
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"cannot read the phones' adb keys {path}: {error.strerror}") from None
    try:
        return auth.parse_keys(text, str(path))
    except auth.BadAdbKey as error:
        raise ConfigError(str(error)) from None


class Daemon:
    def __init__(self, config: DaemonConfig) -> None:
        self._config = config
        self._phones: list[PhoneServer] = []
        self._stopping = asyncio.Event()
        self._control: asyncio.Server | None = None
        self._socket_path = control_socket_path(config.state_dir)

    # State file ---------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "control_socket": str(self._socket_path),
            "adb_port": self._config.adb_port,
            "world_factory": self._config.world_factory,
            "phones": [
                {
                    "serial": phone.serial,
                    "adb_serial": f"127.0.0.1:{phone.port}",
                    "port": phone.port,
                    "profile": phone.profile,
                    "state": phone.state.value,
                    "daemon_cpu_s": round(phone.cpu.charged_s, 3),
                    "daemon_wait_s": round(phone.cpu.waited_s, 3),
                }
                for phone in self._phones
            ],
        }

    def _write_state(self, _phone: PhoneServer | None = None) -> None:
        path = self._config.state_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.snapshot(), indent=2) + "\n")
        tmp.replace(path)

    # Lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        factory = load_world_factory(self._config.world_factory)
        # Charge the daemon's work for each phone to that phone (vphone.daemoncpu).
        try:
            cores = daemoncpu.daemon_cores_of(os.environ.get(daemoncpu.DAEMON_CORES_ENV))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        listeners = bind_ports(len(self._config.profiles), self._config.first_port)
        link_override = PRESETS[self._config.link] if self._config.link is not None else None
        keys = tuple(read_adb_keys(self._config.adb_keys)) if self._config.adb_keys else ()
        daemoncpu.install(asyncio.get_running_loop())
        share = daemoncpu.share_cores(len(self._config.profiles), cores)
        for listener, profile in zip(listeners, self._config.profiles, strict=True):
            port = listener.getsockname()[1]
            serial = f"VP{port}"
            state_dir = phone_state_dir(self._config.state_dir, serial)
            world = factory(profile, serial, state_dir, keep_data=self._config.keep_data)
            self._phones.append(
                PhoneServer(
                    world, listener, profile, link=link_override, trusted_keys=keys, cpu_share_cores=share
                )
            )
        try:
            await asyncio.gather(*(phone.start() for phone in self._phones))
        except BaseException:
            await self.stop_phones()
            raise
        for phone in self._phones:
            phone.on_state = self._write_state  # wired once all are up
        with contextlib.suppress(FileNotFoundError):
            self._socket_path.unlink()
        self._control = await asyncio.start_unix_server(self._handle_control, path=str(self._socket_path))
        self._write_state()

    async def stop_phones(self) -> None:
        await asyncio.gather(*(phone.stop() for phone in self._phones), return_exceptions=True)
        await process.wait_for_background(timeout_s=2.0)

    async def serve_until_stopped(self) -> None:
        await self._stopping.wait()
        if self._control is not None:
            self._control.close()
        await self.stop_phones()
        for path in (self._socket_path, self._config.state_dir / STATE_FILE):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def request_stop(self) -> None:
        self._stopping.set()

    # Control socket -----------------------------------------------------------------------------
    async def _handle_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=10)
            try:
                reply = self._answer(json.loads(line))
            except VphoneError as error:
                reply = {"ok": False, "error": str(error)}
            except (ValueError, TypeError, KeyError) as error:
                reply = {"ok": False, "error": f"bad control request: {error}"}
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op in ("ping", "list"):
            return {"ok": True, "state": self.snapshot()}
        if op == "stop":
            asyncio.get_running_loop().call_soon(self.request_stop)
            return {"ok": True}
        if op == "fault":
            serial = str(request["serial"])
            phone = next((p for p in self._phones if serial in (p.serial, f"127.0.0.1:{p.port}")), None)
            if phone is None:
                known = ", ".join(p.serial for p in self._phones)
                raise ConfigError(f"no virtual phone {serial!r}", hint=f"running: {known}")
            seconds = request.get("seconds")
            fault = faults.parse_fault(str(request["kind"]), None if seconds is None else float(seconds))
            faults.apply_fault(phone, fault)
            return {"ok": True, "state": self.snapshot()}
        raise ConfigError(f"unknown control op {op!r}")


def _report(result: dict[str, Any]) -> None:
    """The one start-up line for the launcher; the pipe may already be gone."""
    with contextlib.suppress(OSError):
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


async def _main(config: DaemonConfig) -> int:
    daemon = Daemon(config)
    loop = asyncio.get_running_loop()
    # A launcher that gives up waiting sends SIGTERM: the start is cancelled, and its clean-up
    # (Daemon.start stops every phone) unmounts the phones' userdata partitions. Before, the
    # launcher's SIGKILL left them mounted, loop devices and all.
    starting = loop.create_task(daemon.start())
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, starting.cancel)
    try:
        await starting
    except asyncio.CancelledError:
        log.warning("start-up cancelled by a signal: every phone stopped")
        _report({"ok": False, "error": "virtual phones' start cancelled"})
        return 1
    except VphoneError as error:
        _report({"ok": False, "error": str(error)})
        return error.exit_code
    except Exception as error:
        log.exception("start-up failed")
        _report({"ok": False, "error": f"virtual phones failed to start: {error}"})
        return 1
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, daemon.request_stop)
    # Survive the terminal closing. A handler, not SIG_IGN: an ignored SIGHUP would be inherited by
    # every phone process, and hanging up a stream's processes would then do nothing.
    loop.add_signal_handler(signal.SIGHUP, lambda: None)
    _report({"ok": True, "state": daemon.snapshot()})
    logcap.install(config.state_dir / LOG_FILE, os.environ.get("FARM_VIRTUAL_LOG", "INFO"))
    log.info("serving %d phones", len(config.profiles))
    await daemon.serve_until_stopped()
    log.info("stopped")
    return 0


def parse_args(argv: list[str] | None = None) -> DaemonConfig:
    parser = argparse.ArgumentParser(prog="python -m vphone.daemon", description=__doc__)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--profile", action="append", required=True, help="one per phone, in order")
    parser.add_argument("--port", type=int, default=None, help="first TCP port (default: 6520 upward)")
    parser.add_argument("--world-factory", default=DEFAULT_WORLD_FACTORY)
    parser.add_argument("--adb-port", type=int, default=None, help="recorded in the state file only")
    parser.add_argument("--keep-data", action="store_true", help="keep data of another profile too")
    parser.add_argument("--adb-keys", type=Path, default=None, help="adb_keys file the phones trust")
    parser.add_argument("--link", choices=[LinkKind.USB2.value, LinkKind.USB3.value], default=None)
    args = parser.parse_args(argv)
    return DaemonConfig(
        state_dir=args.state_dir,
        profiles=tuple(args.profile),
        first_port=args.port,
        world_factory=args.world_factory,
        adb_port=args.adb_port,
        keep_data=args.keep_data,
        link=LinkKind(args.link) if args.link is not None else None,
        adb_keys=args.adb_keys,
    )


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    config.state_dir.mkdir(parents=True, exist_ok=True)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` dumps every stack to daemon.log
    logging.basicConfig(
        level=os.environ.get("FARM_VIRTUAL_LOG", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return asyncio.run(_main(config))


if __name__ == "__main__":
    sys.exit(main())
