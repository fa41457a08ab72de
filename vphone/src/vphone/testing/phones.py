"""pytest fixtures: a private adb server and virtual phones registered to it.

Loaded for the whole suite by tests/conftest.py (`pytest_plugins = ["vphone.testing.phones"]`).

`adb_server` (function scope)
    A private adb server on a free port, started with `adb -P PORT start-server` (emulator port
    scan off, so other people's listeners on 5555-5585 never show up) and always stopped with
    `adb -P PORT kill-server`. Attributes: `.port`, `.client()` (an adbutils.AdbClient on it),
    `.adb(*args)` (runs `adb -P PORT ...`, returns CompletedProcess with text output).

`virtual_phones` (function scope), a factory: `virtual_phones(count=2, profiles=None, link=None,
adb_keys=None)`
    Starts a real phone daemon (`python -m vphone.daemon`, a subprocess with its own tmp
    state dir, so a crash cannot take the test process down), connects every phone to the
    `adb_server` and waits until `adb devices` shows them as `device`. `profiles` are profile
    names from vphone/src/vphone/profiles/, cycled over `count` (default: the first profile). Returns a
    `PhoneSet` (a list of `VirtualPhone`) with `.adb_port`, `.state_dir`, `.daemon_pid`, `.client()` and
    `.fault(phone, kind, seconds=None)` (disconnect | offline N | hang [N] | reboot | recover).
    Each `VirtualPhone` has `.serial` (ro.serialno), `.adb_serial` ("127.0.0.1:PORT"), `.port`,
    `.profile`, `.state_dir` (the phone world's files on the host) and `.ground_truth` (the
    world's ground-truth log, `state_dir/ground_truth.jsonl`, when the world writes one), plus
    `.device(client)` for an adbutils device. Everything is torn down after the test, also on
    failure: phones disconnected, daemon stopped, no process left. Phones of user builds
    (ro.adb.secure=1) trust only `adb_keys` (lines of an adb_keys file), by default this host's
    adb key (~/.android/adbkey.pub): every adb server of the tests shares it unless started
    with its own HOME (`start_adb_server(port, home=DIR)`).

`module_adb_server` / `module_virtual_phones` (module scope)
    The same, shared by the tests of one module (start phones once, e.g. in a module fixture,
    to save ~1-2 s per test). Tests then share phone state: leave no faults or root behind.

Example:

    def test_getprop(virtual_phones):
        phones = virtual_phones(count=1)
        device = phones[0].device(phones.client())
        assert device.getprop("ro.serialno") == phones[0].serial

The daemon's log is `phones.state_dir / "daemon.log"` (look there when a phone misbehaves).
Set FARM_TEST_WORLD=hostdir to run against tests/fixtures/hostdir_world.py (a bare host
directory behind bubblewrap: no Android tools, no telemetry, no `reboot`/`dumpsys`) instead of
the real vphone.world; useful to tell an ADB-side bug from a phone-side one.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import adbutils
import pytest

from vphone import control
from vphone.adb.link import LinkKind
from vphone.daemon import DEFAULT_WORLD_FACTORY, phone_state_dir

HOSTDIR_WORLD_FACTORY = "vphone.testing.hostdir_world:make_world"
HOSTDIR_PROFILE = "hostdir"


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def world_factory() -> str:
    """The real phone world when it imports, else the host-dir stand-in (or as FARM_TEST_WORLD says)."""
    choice = os.environ.get("FARM_TEST_WORLD", "auto")
    if choice == "hostdir":
        return HOSTDIR_WORLD_FACTORY
    if choice == "real":
        return DEFAULT_WORLD_FACTORY
    try:
        import vphone.world  # noqa: F401
    except ImportError:
        return HOSTDIR_WORLD_FACTORY
    return DEFAULT_WORLD_FACTORY


@dataclass(frozen=True)
class AdbServer:
    port: int
    adb_binary: str = "adb"

    def client(self) -> adbutils.AdbClient:
        return adbutils.AdbClient(host="127.0.0.1", port=self.port)

    def adb(
        self, *args: str, timeout_s: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`adb -P PORT *args`; stdin is /dev/null unless `input` is given."""
        return subprocess.run(
            [self.adb_binary, "-P", str(self.port), *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
        )


def _adb_env(home: Path | None = None) -> dict[str, str]:
    # No emulator scan of 5555-5585 (other engineers' listeners) and no mDNS discovery.
    env = {**os.environ, "ADB_LOCAL_TRANSPORT_MAX_PORT": "5553", "ADB_MDNS": "0"}
    if home is not None:  # a server with its own key (~/.android/adbkey, made on its first start)
        env["HOME"] = str(home)
        for name in ("ADB_VENDOR_KEYS", "ANDROID_USER_HOME", "ANDROID_SDK_HOME"):
            env.pop(name, None)
    return env


# Free ports come from the ephemeral range the suite's own outgoing connections draw from, so one
# can be taken between choosing it and adb's bind (adb exits 255: "cannot bind"): choose again.
PORT_ATTEMPTS = 5


def start_adb_server(port: int | None = None, adb_binary: str = "adb", home: Path | None = None) -> AdbServer:
    """`adb start-server` on `port`, else on a free port (another one when it was taken meanwhile);
    with `home`, a server whose key is HOME/.android/adbkey."""
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
    attempts = 1 if port is not None else PORT_ATTEMPTS
    for _ in range(attempts):
        chosen = port if port is not None else free_tcp_port()
        # The server adb forks keeps whatever stdout/stderr it inherits: a file, never a pipe
        # (a pipe would not reach EOF while the server runs).
        with tempfile.TemporaryFile() as stderr:
            result = subprocess.run(
                [adb_binary, "-P", str(chosen), "start-server"],
                env=_adb_env(home),
                timeout=60,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            stderr.seek(0)
            said = stderr.read().decode(errors="replace")
        if result.returncode == 0:
            return AdbServer(chosen, adb_binary)
    raise subprocess.CalledProcessError(result.returncode, result.args, stderr=said)


def kill_adb_server(server: AdbServer) -> None:
    subprocess.run(
        [server.adb_binary, "-P", str(server.port), "kill-server"],
        timeout=60,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@dataclass(frozen=True)
class VirtualPhone:
    serial: str
    adb_serial: str
    port: int
    profile: str
    state_dir: Path

    @property
    def ground_truth(self) -> Path:
        return self.state_dir / "ground_truth.jsonl"

    def device(self, client: adbutils.AdbClient) -> adbutils.AdbDevice:
        return client.device(serial=self.adb_serial)


class PhoneSet(list[VirtualPhone]):
    """The phones of one daemon, in port order."""

    def __init__(
        self,
        phones: Sequence[VirtualPhone],
        *,
        adb_port: int,
        state_dir: Path,
        daemon_pid: int | None = None,
    ) -> None:
        super().__init__(phones)
        self.adb_port = adb_port
        self.state_dir = state_dir
        self.daemon_pid = daemon_pid

    def client(self) -> adbutils.AdbClient:
        return adbutils.AdbClient(host="127.0.0.1", port=self.adb_port)

    def fault(self, phone: VirtualPhone, kind: str, seconds: float | None = None) -> None:
        control.fault(self.state_dir, phone.serial, kind, seconds)


PhoneFactory = Callable[..., PhoneSet]


@contextmanager
def running_adb_server() -> Iterator[AdbServer]:
    server = start_adb_server()
    try:
        yield server
    finally:
        kill_adb_server(server)


@contextmanager
def phone_factory(adb_server: AdbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoneFactory]:
    """The `virtual_phones` factory as a context manager: every daemon it started is stopped."""
    started: list[control.DaemonState] = []
    factory = world_factory()

    def start(
        count: int = 2,
        profiles: Sequence[str] | None = None,
        link: LinkKind | None = None,
        adb_keys: Sequence[str] | None = None,
    ) -> PhoneSet:
        """`adb_keys`: the adb_keys lines the phones trust (None: this host's adb server's key)."""
        state_dir = tmp_path_factory.mktemp("virtual")
        if factory == HOSTDIR_WORLD_FACTORY:
            names = control.cycle_profiles(count, list(profiles or [HOSTDIR_PROFILE]))
        else:
            names = control.resolve_profiles(count, list(profiles or []))
        state = control.start_daemon(
            state_dir, names, world_factory=factory, adb_port=adb_server.port, link=link, adb_keys=adb_keys
        )
        started.append(state)
        control.connect_phones(state.phones, adb_server.port)
        phones = [
            VirtualPhone(p.serial, p.adb_serial, p.port, p.profile, phone_state_dir(state_dir, p.serial))
            for p in state.phones
        ]
        return PhoneSet(phones, adb_port=adb_server.port, state_dir=state_dir, daemon_pid=state.pid)

    try:
        yield start
    finally:
        for state in started:
            control.disconnect_phones(state.phones, adb_server.port)
            control.stop_daemon(state)


@pytest.fixture
def adb_server() -> Iterator[AdbServer]:
    with running_adb_server() as server:
        yield server


@pytest.fixture
def virtual_phones(adb_server: AdbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoneFactory]:
    with phone_factory(adb_server, tmp_path_factory) as start:
        yield start


@pytest.fixture(scope="module")
def module_adb_server() -> Iterator[AdbServer]:
    with running_adb_server() as server:
        yield server


@pytest.fixture(scope="module")
def module_virtual_phones(
    module_adb_server: AdbServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PhoneFactory]:
    with phone_factory(module_adb_server, tmp_path_factory) as start:
        yield start
