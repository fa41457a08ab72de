"""One phone over adbutils: shell with a deadline and exit code, push with a content cache, pull,
and background processes started and killed by pid.

Quoting rule: every argument that reaches the phone's shell goes through `shlex.quote` (see
`quote_argv`); `shell()` takes an argv, never a command string. `script()` is for fixed scripts
written in this package, whose variable parts are passed as quoted positional arguments
(`sh -c SCRIPT sh ARG...`), so no parameter value is ever parsed as shell syntax.

Every call has a deadline: the shell stream is read against a wall-clock deadline and closed when it
passes (adbd then hangs up the process group), and sync transfers run with a socket timeout.
adbutils and socket failures are wrapped into DeviceTransientError (retry may help) at this edge.
"""

from __future__ import annotations

import hashlib
import shlex
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import adbutils

from farm.device.stream import ShellStream, packet_length
from farm.errors import (
    CommandRefused,
    CommandTimeout,
    DevicePermanentError,
    DeviceTransientError,
    OutputTooLarge,
)

DEFAULT_TIMEOUT_S = 30.0
PUSH_TIMEOUT_S = 120.0
FARM_ROOT = "/data/local/tmp/farm"
BIN_DIR = f"{FARM_ROOT}/bin"
ASSETS_DIR = f"{FARM_ROOT}/assets"
_EXIT_MARKER = "__FARM_EXIT__"
# What one shell call keeps of a phone's stdout (and, apart, of its stderr): a getprop is tens of
# KiB, a probe's JSON a few; a phone printing more is broken or hostile, and the call fails once
# it passes this instead of buffering whatever the phone sends (a 1 GiB property value).
SHELL_OUTPUT_MAX_BYTES = 16 << 20
# The longest request an adb server takes: its length travels as 4 hex digits (adb's smart socket
# protocol). adbd without shell v2 (before Android 7) also caps a packet at MAX_PAYLOAD_V1 = 4096
# bytes with the service's trailing NUL; adbutils would send a longer one mis-framed.
ADB_REQUEST_MAX_BYTES = 0xFFFF
ADB_REQUEST_V1_MAX_BYTES = 4096 - 1


def quote_argv(argv: Sequence[str]) -> str:
    """The one way farm turns an argv into a phone shell command line."""
    return " ".join(shlex.quote(str(arg)) for arg in argv)


@dataclass(frozen=True)
class ShellResult:
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes = b""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class DeviceSession:
    """A phone, reached through an adbutils device (the transport is passed in, not built here).

    `device_id` is the fleet identity `host/serial`, used in every error message.
    `round_trips` counts the adb conversations this session opened (each shell call, shell stream
    and sync transfer is one): what per-run overhead is made of, read by tests and the bench.
    """

    def __init__(
        self, device: adbutils.AdbDevice, device_id: str, *, default_timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self._device = device
        self.device_id = device_id
        self.default_timeout_s = default_timeout_s
        self._shell_v2: bool | None = None
        # What this session learnt about the phone (e.g. how root writes work), to save round trips.
        self.facts: dict[str, object] = {}
        self._sha_cache: dict[Path, tuple[float, int, str]] = {}
        self._round_trips = 0
        self._count_lock = threading.Lock()  # the throttle and live watchers share a session

    @property
    def round_trips(self) -> int:
        return self._round_trips

    def _count(self) -> None:
        with self._count_lock:
            self._round_trips += 1

    # -- shell --------------------------------------------------------------------------------

    def shell(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        check: bool = False,
        max_output_bytes: int = SHELL_OUTPUT_MAX_BYTES,
    ) -> ShellResult:
        """Run argv on the phone (each argument quoted); raise CommandTimeout past the deadline,
        OutputTooLarge once stdout or stderr passes max_output_bytes."""
        return self._run(tuple(str(a) for a in argv), quote_argv(argv), timeout_s, check, max_output_bytes)

    def script(
        self,
        script: str,
        *args: str,
        timeout_s: float | None = None,
        check: bool = False,
        max_output_bytes: int = SHELL_OUTPUT_MAX_BYTES,
    ) -> ShellResult:
        """Run a fixed sh script from this package; `args` become $1..$N (quoted, never parsed)."""
        argv = ("sh", "-c", script, "farm", *args)
        return self._run(argv, quote_argv(argv), timeout_s, check, max_output_bytes)

    def _run(
        self, argv: tuple[str, ...], command: str, timeout_s: float | None, check: bool, max_bytes: int
    ) -> ShellResult:
        timeout = self.default_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        try:
            if self._supports_v2(deadline):
                code, out, err = self._shell_v2_call(command, deadline, max_bytes)
            else:
                code, out, err = self._shell_v1_call(command, deadline, max_bytes)
        except (CommandTimeout, CommandRefused, OutputTooLarge):
            raise
        except (adbutils.AdbError, OSError, EOFError) as error:
            raise DeviceTransientError(self.device_id, f"adb shell failed: {error}") from error
        result = ShellResult(argv, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), out)
        if check and not result.ok:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise DevicePermanentError(
                self.device_id,
                f"`{_short(argv)}` exited {result.exit_code}: {detail[-1] if detail else 'no output'}",
            )
        return result

    def _supports_v2(self, deadline: float) -> bool:
        """Whether to speak shell v2. Asked by trying it once: `host-serial:<s>:features` fails on
        adb 29 for TCP serials (`127.0.0.1:PORT`), and a device without v2 refuses the service."""
        if self._shell_v2 is None:
            conn = self._open(None, deadline)
            try:
                conn.send_command("shell,v2,raw:true")
                conn.check_okay()
                self._shell_v2 = True
            except adbutils.AdbError:
                self._shell_v2 = False
            finally:
                conn.close()
        return self._shell_v2

    def _open(self, command: str | None, deadline: float) -> adbutils.AdbConnection:
        self._count()
        remaining = max(0.1, deadline - time.monotonic())
        conn = self._device.open_transport(command, timeout=remaining)
        conn.conn.settimeout(remaining)
        return conn

    def check_request(self, service: str, *, v2: bool = True) -> None:
        """CommandRefused when `service` is longer than an adb request carries (the run that
        needs it fails; sending it would look like a phone that dropped off)."""
        size = len(service.encode())
        limit = ADB_REQUEST_MAX_BYTES if v2 else ADB_REQUEST_V1_MAX_BYTES
        if size > limit:
            raise CommandRefused(
                self.device_id,
                f"the command line is {size} bytes; an adb request carries at most {limit}",
                hint="shorten the benchmark's arguments (pass large values in an asset file)",
            )

    def _shell_v2_call(self, command: str, deadline: float, max_bytes: int) -> tuple[int, bytes, bytes]:
        service = f"shell,v2,raw:{command}"
        self.check_request(service)
        conn = self._open(None, deadline)
        try:
            conn.send_command(service)
            conn.check_okay()
            stdout, stderr = bytearray(), bytearray()
            buffer = bytearray()
            while True:
                chunk = self._recv(conn, deadline, command)
                if not chunk:
                    raise DeviceTransientError(self.device_id, "shell stream closed before the exit code")
                buffer += chunk
                while len(buffer) >= 5:
                    kind = buffer[0]
                    length = packet_length(self.device_id, buffer)
                    if len(buffer) < 5 + length:
                        break
                    payload = bytes(buffer[5 : 5 + length])
                    del buffer[: 5 + length]
                    if kind == 1:
                        stdout += payload
                        self._bound(stdout, max_bytes, "stdout", command)
                    elif kind == 2:
                        stderr += payload
                        self._bound(stderr, max_bytes, "stderr", command)
                    elif kind == 3:
                        return (payload[0] if payload else 255), bytes(stdout), bytes(stderr)
        finally:
            conn.close()

    def _shell_v1_call(self, command: str, deadline: float, max_bytes: int) -> tuple[int, bytes, bytes]:
        """Old adbd without shell_v2: stdout and stderr come merged; the exit code from a marker."""
        service = f"shell:{command}; echo {_EXIT_MARKER}$?"
        self.check_request(service, v2=False)
        conn = self._open(None, deadline)
        try:
            conn.send_command(service)
            conn.check_okay()
            data = bytearray()
            while chunk := self._recv(conn, deadline, command):
                data += chunk
                self._bound(data, max_bytes + len(_EXIT_MARKER) + 8, "output", command)
        finally:
            conn.close()
        text = bytes(data).rstrip(b"\r\n")
        head, sep, code = text.rpartition(_EXIT_MARKER.encode())
        if not sep or not code.strip().isdigit():
            raise DeviceTransientError(self.device_id, "shell output ended without an exit code")
        return int(code.strip()), head, b""

    def _bound(self, data: bytearray, max_bytes: int, what: str, command: str) -> None:
        if len(data) > max_bytes:
            raise OutputTooLarge(
                self.device_id,
                f"`{_short((command,))}` printed more than {max_bytes} bytes on {what}; farm stopped reading",
            )

    def _recv(self, conn: adbutils.AdbConnection, deadline: float, command: str) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CommandTimeout(self.device_id, f"`{_short((command,))}` timed out")
        conn.conn.settimeout(remaining)
        try:
            return conn.conn.recv(65536)
        except TimeoutError as error:
            raise CommandTimeout(self.device_id, f"`{_short((command,))}` timed out") from error

    def stream(self, argv: Sequence[str], *, idle_timeout_s: float | None = None) -> ShellStream:
        """A conversation with argv on the phone (each argument quoted): its stdout read as it comes,
        lines written to its stdin (shell v2; on a v1-only phone stdin is raw and the exit code
        unknown). Every read waits at most idle_timeout_s (default: the call timeout) for the phone
        to say something; silence longer than that raises DeviceTransientError."""
        idle = self.default_timeout_s if idle_timeout_s is None else idle_timeout_s
        deadline = time.monotonic() + idle
        command = quote_argv(argv)
        try:
            v2 = self._supports_v2(deadline)
            service = f"shell,v2,raw:{command}" if v2 else f"shell:{command}"
            self.check_request(service, v2=v2)
            conn = self._open(None, deadline)
            try:
                conn.send_command(service)
                conn.check_okay()
            except BaseException:
                conn.close()
                raise
        except (adbutils.AdbError, OSError, EOFError) as error:
            raise DeviceTransientError(self.device_id, f"adb shell stream failed: {error}") from error
        return ShellStream(conn.conn, self.device_id, idle_timeout_s=idle, framed=v2, closer=conn.close)

    # -- files --------------------------------------------------------------------------------

    def push(self, local: Path, remote: str, *, mode: int = 0o644) -> None:
        """Copy a host file to the phone (parent folders are created by the sync service)."""
        self._count()
        try:
            self._device.sync.push(str(local), remote, mode=mode)
        except (adbutils.AdbError, OSError, EOFError) as error:
            raise DeviceTransientError(
                self.device_id, f"push {local.name} -> {remote} failed: {error}"
            ) from error

    def pull(self, remote: str, local: Path, *, max_bytes: int = SHELL_OUTPUT_MAX_BYTES) -> int:
        """Copy a phone file to the host, written as it comes; returns its size in bytes.
        OutputTooLarge (the partial copy removed) once it passes max_bytes."""
        local.parent.mkdir(parents=True, exist_ok=True)
        self._count()
        size = 0
        try:
            with local.open("wb") as out:
                for chunk in self._device.sync.iter_content(remote):
                    size += len(chunk)
                    if size > max_bytes:
                        raise OutputTooLarge(
                            self.device_id, f"{remote} is larger than the {max_bytes} bytes farm takes"
                        )
                    out.write(chunk)
        except OutputTooLarge:
            local.unlink(missing_ok=True)
            raise
        except (adbutils.AdbError, OSError, EOFError) as error:
            raise DeviceTransientError(self.device_id, f"pull {remote} failed: {error}") from error
        return size

    def pull_many(
        self,
        remotes: Sequence[str],
        *,
        timeout_s: float | None = None,
        max_bytes: int = SHELL_OUTPUT_MAX_BYTES,
    ) -> dict[str, bytes]:
        """Several small files in one round trip (shell v2 output is binary-safe); files that do
        not exist are left out. Falls back to one sync pull per file on shell v1 phones.
        OutputTooLarge when the files together pass max_bytes."""
        if not self._supports_v2(time.monotonic() + (timeout_s or self.default_timeout_s)):
            found = {}
            listing = self.shell(["ls", *remotes])  # which exist; sync would fail on the others
            with tempfile.TemporaryDirectory(prefix="farm-pull-") as folder:
                for index, remote in enumerate(remotes):
                    if remote in listing.stdout.split():
                        local = Path(folder) / str(index)
                        self.pull(remote, local, max_bytes=max_bytes)
                        found[remote] = local.read_bytes()
            return found
        result = self.script(
            'for f in "$@"; do [ -f "$f" ] || continue; '
            'printf "%s %s\\n" "$(wc -c < "$f")" "$f"; cat "$f"; done',
            *remotes,
            timeout_s=timeout_s,
            max_output_bytes=max_bytes + 64 * len(remotes) + sum(len(r) for r in remotes),
        )
        return parse_bundle(result.stdout_bytes)

    def read_text(self, remote: str, *, timeout_s: float | None = None) -> str | None:
        """A small phone file's text, or None when it does not exist or cannot be read."""
        result = self.shell(["cat", remote], timeout_s=timeout_s)
        return result.stdout if result.ok else None

    def sha256(self, remote: str) -> str | None:
        result = self.shell(["sha256sum", remote])
        if not result.ok or not result.stdout.strip():
            return None
        return result.stdout.split()[0]

    def local_sha256(self, local: Path) -> str:
        stat = local.stat()
        cached = self._sha_cache.get(local)
        if cached and cached[0] == stat.st_mtime and cached[1] == stat.st_size:
            return cached[2]
        digest = file_sha256(local)
        self._sha_cache[local] = (stat.st_mtime, stat.st_size, digest)
        return digest

    def push_cached(
        self, local: Path, *, name: str | None = None, folder: str = BIN_DIR, mode: int = 0o755
    ) -> tuple[str, bool]:
        """Install a file under <folder>/<sha256 prefix>/<name> (an executable under bin/ by
        default; data files such as an external program's assets elsewhere, mode 644); skip the
        copy when the phone already holds the same content. Returns (phone path, pushed?).
        Verified by sha256."""
        digest = self.local_sha256(local)
        remote_dir = f"{folder}/{digest[:16]}"
        remote = f"{remote_dir}/{name or local.name}"
        if self.sha256(remote) == digest:
            return remote, False
        partial = f"{remote}.partial"
        self.shell(["mkdir", "-p", remote_dir], check=True)
        self.push(local, partial, mode=mode)
        self.shell(["chmod", f"{mode:o}", partial], check=True)
        if self.sha256(partial) != digest:
            self.shell(["rm", "-f", partial])
            raise DeviceTransientError(self.device_id, f"{local.name}: sha256 mismatch after push")
        self.shell(["mv", "-f", partial, remote], check=True)
        return remote, True

    # -- background processes -----------------------------------------------------------------

    def start(self, argv: Sequence[str], *, workdir: str, stdout: str, stderr: str, exit_file: str) -> int:
        """Start argv detached from the adb stream (its own session, so a dropped USB link does not
        kill it) under a small wrapper shell that writes the program's pid to `exit_file`.pid and
        its exit status to `exit_file`. Returns the wrapper's pid on the phone, which is the process
        group id of both (kill/stop act on the group); `program_pid` gives the program's own pid."""
        result = self.script(
            'cd "$1" || exit 97; out=$2; err=$3; code=$4; shift 4; rm -f "$code" "$code.pid"; '
            'setsid sh -c \'o=$0; e=$1; c=$2; shift 2; "$@" > "$o" 2> "$e" < /dev/null & p=$!; '
            'echo "$p" > "$c.pid"; wait "$p"; echo $? > "$c.tmp" && mv "$c.tmp" "$c"\' '
            '"$out" "$err" "$code" "$@" < /dev/null > /dev/null 2>&1 & echo $!',
            workdir,
            stdout,
            stderr,
            exit_file,
            *[str(a) for a in argv],
            check=True,
        )
        text = result.stdout.strip()
        if not text.isdigit():
            raise DeviceTransientError(self.device_id, f"could not start {argv[0]}: {text or result.stderr}")
        return int(text)

    def program_pid(self, exit_file: str, *, wait_s: float = 5.0) -> int | None:
        """The pid of the program `start` launched (not its wrapper), waiting briefly for it."""
        steps = max(1, int(wait_s / 0.02))
        result = self.script(
            'i=0; while [ ! -s "$1" ] && [ "$i" -lt "$2" ]; do sleep 0.02; i=$((i+1)); done; '
            'cat "$1" 2>/dev/null',
            f"{exit_file}.pid",
            str(steps),
            timeout_s=wait_s + self.default_timeout_s,
        )
        text = result.stdout.strip()
        return int(text) if text.isdigit() else None

    def kill(self, pid: int, signal: str = "TERM") -> None:
        """Signal a process started by `start` and its children (its process group)."""
        self.script(
            'kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "$2" 2>/dev/null; true', signal, str(pid)
        )

    def is_running(self, pid: int) -> bool:
        return self.script('kill -0 "$1" 2>/dev/null', str(pid)).ok

    def stop(self, pid: int, *, grace_s: float = 2.0) -> None:
        """SIGTERM to the process group, wait up to grace_s on the phone, then SIGKILL (one call)."""
        steps = max(1, int(grace_s / 0.05))
        self.script(
            'kill -s TERM -- "-$1" 2>/dev/null || kill -s TERM "$1" 2>/dev/null || exit 0; i=0; '
            'while kill -0 "$1" 2>/dev/null && [ "$i" -lt "$2" ]; do sleep 0.05; i=$((i+1)); done; '
            'kill -s KILL -- "-$1" 2>/dev/null || kill -s KILL "$1" 2>/dev/null; true',
            str(pid),
            str(steps),
            timeout_s=grace_s + self.default_timeout_s,
        )


def parse_bundle(data: bytes) -> dict[str, bytes]:
    """`SIZE PATH\\n` + SIZE bytes, repeated (what pull_many's script prints); a cut tail is dropped."""
    files: dict[str, bytes] = {}
    at = 0
    while at < len(data):
        end = data.find(b"\n", at)
        if end < 0:
            break
        size_text, _, name = data[at:end].decode("utf-8", "replace").strip().partition(" ")
        if not size_text.isdigit():
            break
        size = int(size_text)
        body = data[end + 1 : end + 1 + size]
        if len(body) < size:
            break
        files[name] = body
        at = end + 1 + size
    return files


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _short(argv: Sequence[str], limit: int = 80) -> str:
    text = " ".join(argv)
    return text if len(text) <= limit else text[: limit - 3] + "..."
