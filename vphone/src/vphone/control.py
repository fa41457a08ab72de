"""Client side of the virtual-phone daemon: start it detached, talk to its control socket,
register its phones with an adb server, stop it. `farm virtual ...` and the test fixture use this.

State lives in a state dir: `$FARM_VIRTUAL_DIR`, else `.farm/virtual/` in the current directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vphone import userdata
from vphone.adb import auth
from vphone.adb.link import LinkKind
from vphone.daemon import ADB_KEYS_FILE, DEFAULT_WORLD_FACTORY, LOG_FILE, PHONES_DIR, STATE_FILE
from vphone.errors import ConfigError, EnvironmentProblem, PhoneTransientError, VphoneError

DEFAULT_ADB_PORT = 5037
START_TIMEOUT_S = 120.0
ADB_READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
CONTROL_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PhoneInfo:
    serial: str  # ro.serialno
    adb_serial: str  # 127.0.0.1:PORT, what `adb devices` shows
    port: int
    profile: str
    state: str
    daemon_cpu_s: float = 0.0  # the daemon's CPU spent on this phone, charged to it (daemoncpu)
    daemon_wait_s: float = 0.0  # how long its requests waited for being over its share


@dataclass(frozen=True)
class DaemonState:
    pid: int
    control_socket: Path
    adb_port: int | None
    phones: tuple[PhoneInfo, ...]

    @staticmethod
    def from_json(data: dict[str, Any]) -> DaemonState:
        return DaemonState(
            pid=int(data["pid"]),
            control_socket=Path(data["control_socket"]),
            adb_port=data.get("adb_port"),
            phones=tuple(PhoneInfo(**phone) for phone in data["phones"]),
        )


def default_state_dir() -> Path:
    env = os.environ.get("FARM_VIRTUAL_DIR")
    return Path(env) if env else Path.cwd() / ".farm" / "virtual"


def default_adb_port() -> int:
    env = os.environ.get("ANDROID_ADB_SERVER_PORT")
    return int(env) if env and env.isdigit() else DEFAULT_ADB_PORT


# adb ----------------------------------------------------------------------------------------------
def adb_path() -> str:
    path = shutil.which("adb")
    if path is None:
        raise EnvironmentProblem("adb not found on PATH", hint="install it: apt-get install adb")
    return path


def adb(adb_port: int, *args: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [adb_path(), "-P", str(adb_port), *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as error:
        raise EnvironmentProblem(
            f"`adb -P {adb_port} {' '.join(args)}` timed out after {timeout_s:.0f} s"
        ) from error


def adb_devices(adb_port: int) -> dict[str, str]:
    """{adb serial: state} as `adb devices` lists them."""
    result = adb(adb_port, "devices")
    devices = {}
    for line in result.stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2:
            devices[parts[0]] = parts[1]
    return devices


def connect_phones(
    phones: Sequence[PhoneInfo], adb_port: int, timeout_s: float = ADB_READY_TIMEOUT_S
) -> None:
    """`adb connect` each phone and wait until all show `device`."""
    for phone in phones:
        result = adb(adb_port, "connect", phone.adb_serial)
        if "connected to" not in result.stdout:
            message = (result.stdout + result.stderr).strip().splitlines()
            hint = None
            if "failed to authenticate" in result.stdout:
                hint = "the phone trusts other adb keys: give it this server's with --adb-key PATH"
            raise PhoneTransientError(
                phone.adb_serial, f"adb connect failed: {message[-1] if message else '?'}", hint=hint
            )
    deadline = time.monotonic() + timeout_s
    while True:
        devices = adb_devices(adb_port)
        waiting = [p.adb_serial for p in phones if devices.get(p.adb_serial) != "device"]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise PhoneTransientError(waiting[0], f"not `device` in adb after {timeout_s:.0f} s")
        time.sleep(0.2)


def disconnect_phones(phones: Sequence[PhoneInfo], adb_port: int) -> None:
    for phone in phones:
        with contextlib.suppress(VphoneError):
            adb(adb_port, "disconnect", phone.adb_serial, timeout_s=10)


def adb_key_lines(paths: Sequence[Path]) -> list[str]:
    """The phones' adb_keys lines for host key files (--adb-key), each checked to be an adb key."""
    lines = []
    for path in paths:
        try:
            lines.append(auth.key_line(path))
        except OSError as error:
            raise ConfigError(f"cannot read adb key {path}: {error.strerror}") from None
        except auth.BadAdbKey as error:
            raise ConfigError(str(error), hint="give the adb server's adbkey.pub (or adbkey)") from None
    return lines


def host_adb_keys() -> list[str]:
    """The keys this host's adb server signs with ($ADB_VENDOR_KEYS, ~/.android/adbkey.pub): a lab
    phone has \"always allow\"ed them once. Empty if the server has never made its key."""
    return adb_key_lines(auth.host_key_files(dict(os.environ), Path.home()))


# State and control socket -------------------------------------------------------------------------
def read_state(state_dir: Path) -> DaemonState | None:
    try:
        return DaemonState.from_json(json.loads((state_dir / STATE_FILE).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def request(
    state: DaemonState, payload: dict[str, Any], timeout_s: float = CONTROL_TIMEOUT_S
) -> dict[str, Any]:
    """One JSON request/response on the daemon's control socket."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(state.control_socket))
            sock.sendall(json.dumps(payload).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as error:
        raise EnvironmentProblem(
            f"virtual phone daemon (pid {state.pid}) does not answer: {error}"
        ) from error
    reply: dict[str, Any] = json.loads(data)
    if not reply.get("ok"):
        raise ConfigError(str(reply.get("error", "request failed")))
    return reply


def running_state(state_dir: Path) -> DaemonState | None:
    """The state of a live daemon in `state_dir`, or None (a stale state file is ignored)."""
    state = read_state(state_dir)
    if state is None or not _alive(state.pid):
        return None
    try:
        return DaemonState.from_json(request(state, {"op": "list"})["state"])
    except VphoneError:
        return None


# Start / stop -------------------------------------------------------------------------------------
def cycle_profiles(count: int, profiles: Sequence[str]) -> list[str]:
    """--profile repeated or cycled over --count."""
    if count < 1:
        raise ConfigError(f"--count must be at least 1, got {count}")
    return [profiles[i % len(profiles)] for i in range(count)]


def known_profiles() -> list[str] | None:
    """Profile names of the phone side, or None when it cannot list them."""
    try:
        from vphone.profiles import available_profiles
    except ImportError:
        return None
    return available_profiles()


def resolve_profiles(count: int, profiles: Sequence[str], *, check: bool = True) -> list[str]:
    available = known_profiles() if check else None
    if not profiles:
        if not available:
            raise ConfigError("no virtual phone profile given", hint="use --profile NAME")
        profiles = [available[0]]
    if available is not None:
        for name in profiles:
            if name not in available and not name.endswith((".yaml", ".yml")):
                raise ConfigError(
                    f"unknown virtual phone profile {name!r}", hint=f"choose from {', '.join(available)}"
                )
    return cycle_profiles(count, profiles)


def start_daemon(
    state_dir: Path,
    profiles: Sequence[str],
    *,
    first_port: int | None = None,
    world_factory: str = DEFAULT_WORLD_FACTORY,
    adb_port: int | None = None,
    keep_data: bool = False,
    link: LinkKind | None = None,
    timeout_s: float = START_TIMEOUT_S,
    adb_keys: Sequence[str] | None = None,
) -> DaemonState:
    """Start a detached daemon (new session, so it survives the terminal) and wait for its phones.

    `adb_keys` are the lines of the phones' adb_keys (None: this host's adb keys): phones whose
    profile has ro.adb.secure=1 let in only an adb server holding one of them."""
    state_dir.mkdir(parents=True, exist_ok=True)
    if running_state(state_dir) is not None:
        raise EnvironmentProblem(
            f"virtual phones are already running from {state_dir}", hint="stop them with `farm virtual down`"
        )
    keys = host_adb_keys() if adb_keys is None else list(adb_keys)
    keys_tmp = state_dir / (ADB_KEYS_FILE + ".tmp")
    keys_tmp.write_text("".join(f"{line}\n" for line in keys))
    keys_tmp.replace(state_dir / ADB_KEYS_FILE)
    argv = [
        sys.executable,
        "-m",
        "vphone.daemon",
        "--state-dir",
        str(state_dir),
        "--world-factory",
        world_factory,
        "--adb-keys",
        str(state_dir / ADB_KEYS_FILE),
    ]
    for profile in profiles:
        argv += ["--profile", profile]
    if first_port is not None:
        argv += ["--port", str(first_port)]
    if adb_port is not None:
        argv += ["--adb-port", str(adb_port)]
    if keep_data:
        argv += ["--keep-data"]
    if link is not None:
        argv += ["--link", link.value]
    with open(state_dir / LOG_FILE, "ab") as log:
        daemon = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, start_new_session=True
        )
    assert daemon.stdout is not None
    line = _read_line(daemon, timeout_s)
    daemon.stdout.close()
    if line is None:
        _end_failed_start(daemon, state_dir)
        raise EnvironmentProblem(
            f"the virtual phone daemon did not start within {timeout_s:.0f} s",
            hint=f"see {state_dir / LOG_FILE}",
        )
    try:
        result = json.loads(line)
    except ValueError:
        _end_failed_start(daemon, state_dir)
        raise EnvironmentProblem(
            "the virtual phone daemon died while starting", hint=f"see {state_dir / LOG_FILE}"
        ) from None
    if not result.get("ok"):
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.wait(timeout=10)  # it stopped its phones before saying so, and ends
        _end_failed_start(daemon, state_dir)
        raise ConfigError(str(result.get("error")))
    return DaemonState.from_json(result["state"])


def _read_line(daemon: subprocess.Popen[bytes], timeout_s: float) -> bytes | None:
    """The daemon's start-up line; None when none came within timeout_s."""
    import selectors

    assert daemon.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(daemon.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return None
    return daemon.stdout.readline()


def _end_failed_start(daemon: subprocess.Popen[bytes], state_dir: Path) -> None:
    """End a daemon whose start failed or took too long, and what it mounted: SIGTERM first (it
    cancels its start and stops its phones, which unmounts their userdata partitions), SIGKILL
    when it does not end in time; then whatever partition is still mounted is unmounted here."""
    if daemon.poll() is None:
        daemon.terminate()
        try:
            daemon.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    for phone_dir in sorted((state_dir / PHONES_DIR).glob("*")):
        if phone_dir.is_dir() and not phone_dir.is_symlink():
            userdata.unmount(phone_dir)


def stop_daemon(state: DaemonState, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Ask the daemon to stop (it kills every phone process), then make sure it is gone."""
    with contextlib.suppress(VphoneError):
        request(state, {"op": "stop"})
    deadline = time.monotonic() + timeout_s
    while _alive(state.pid) and time.monotonic() < deadline:
        _reap(state.pid)
        time.sleep(0.05)
    if _alive(state.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGKILL)
        _reap(state.pid)


def _reap(pid: int) -> None:
    """Collect the daemon if it is our own child (the fixture's case), so it leaves no zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def up(
    state_dir: Path,
    count: int,
    profiles: Sequence[str],
    *,
    adb_port: int,
    first_port: int | None = None,
    world_factory: str = DEFAULT_WORLD_FACTORY,
    keep_data: bool = False,
    link: LinkKind | None = None,
    adb_key_paths: Sequence[Path] = (),
) -> DaemonState:
    """Start phones and register them with the adb server; on any failure nothing stays running.

    The phones trust `adb_key_paths`, else the keys of this host's adb server (started first: it
    makes ~/.android/adbkey on its first start)."""
    adb_path()
    checked = world_factory == DEFAULT_WORLD_FACTORY
    names = resolve_profiles(count, profiles, check=checked)
    if adb_key_paths:
        keys = adb_key_lines(adb_key_paths)
    else:
        adb(adb_port, "start-server")
        keys = host_adb_keys()
    state = start_daemon(
        state_dir,
        names,
        first_port=first_port,
        world_factory=world_factory,
        adb_port=adb_port,
        keep_data=keep_data,
        link=link,
        adb_keys=keys,
    )
    try:
        connect_phones(state.phones, adb_port)
    except BaseException:
        disconnect_phones(state.phones, adb_port)
        stop_daemon(state)
        raise
    return state


def down(state_dir: Path, adb_port: int | None = None) -> DaemonState | None:
    """Disconnect the phones from adb and stop the daemon; None when nothing was running."""
    state = read_state(state_dir)
    if state is None or not _alive(state.pid):
        with contextlib.suppress(FileNotFoundError):
            (state_dir / STATE_FILE).unlink()
        return None
    port = adb_port if adb_port is not None else state.adb_port
    if port is not None and shutil.which("adb"):
        disconnect_phones(state.phones, port)
    stop_daemon(state)
    return state


def fault(state_dir: Path, serial: str, kind: str, seconds: float | None) -> DaemonState:
    state = running_state(state_dir)
    if state is None:
        raise EnvironmentProblem(
            f"no virtual phones are running from {state_dir}", hint="start some: farm virtual up"
        )
    return DaemonState.from_json(
        request(state, {"op": "fault", "serial": serial, "kind": kind, "seconds": seconds})["state"]
    )
