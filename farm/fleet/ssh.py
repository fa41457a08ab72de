"""One SSH connection to a lab host, in the steps `farm hosts check` names: name resolution, TCP,
host key, authentication. The tunnel and the diagnosis use the same steps, so what `check` says is
what the tunnel meets.

Authentication is by key only: the configured identity file, else the ssh-agent's keys, else the
usual ~/.ssh/id_* files. A passphrase-protected key is used through the agent, never by asking.
"""

from __future__ import annotations

import enum
import getpass
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko

from farm.errors import ConfigError, HostError
from farm.fleet.farm_yaml import DEFAULT_SSH_PORT, HostConfig
from farm.fleet.hostkeys import HostKeyPolicy, host_id

# paramiko logs its transport thread's failures (with tracebacks) at ERROR; without a handler
# Python's last-resort handler would print them under farm's one-line errors. Each failure reaches
# the user as a StepFailed instead; a user who configures logging still gets paramiko's records.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

CONNECT_TIMEOUT_S = 10.0
DEFAULT_IDENTITY_NAMES = ("id_ed25519", "id_ecdsa", "id_rsa")


class Step(enum.StrEnum):
    RESOLVE = "name resolution"
    TCP = "TCP connection"
    HOST_KEY = "host key"
    AUTH = "authentication"
    ADB = "adb server"


class StepFailed(HostError):
    """A connection step failed; `step` says which, the hint what to do."""

    def __init__(self, host: str, step: Step, message: str, *, retryable: bool, hint: str | None = None):
        super().__init__(host, f"{step}: {message}", retryable=retryable, hint=hint)
        self.step = step
        self.detail = message


@dataclass(frozen=True)
class SshTarget:
    """Where and as whom to connect, after ~/.ssh/config is applied to the farm.yaml entry."""

    name: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    explicit_identity: bool
    location: str

    @property
    def host_id(self) -> str:
        return host_id(self.hostname, self.port)


def load_ssh_config(path: Path | None = None) -> paramiko.SSHConfig:
    path = path or Path.home() / ".ssh" / "config"
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except FileNotFoundError:
        return paramiko.SSHConfig.from_text("")
    except (paramiko.ssh_exception.ConfigParseError, OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read the SSH config: {error}") from None


def resolve_target(host: HostConfig, ssh_config: paramiko.SSHConfig) -> SshTarget:
    """farm.yaml wins over ~/.ssh/config, which wins over the defaults (pure given the config)."""
    assert host.address is not None, "the local host has no SSH target"
    seen = ssh_config.lookup(host.address)
    port = host.port or int(seen.get("port", DEFAULT_SSH_PORT))
    user = host.user or seen.get("user") or getpass.getuser()
    if host.identity_file:
        identities: tuple[str, ...] = (os.path.expanduser(host.identity_file),)
    else:
        identities = tuple(os.path.expanduser(p) for p in seen.get("identityfile", []))
    return SshTarget(
        name=host.name,
        hostname=seen.get("hostname", host.address),
        port=port,
        user=user,
        identity_files=identities,
        explicit_identity=bool(host.identity_file),
        location=host.location,
    )


def resolve(target: SshTarget) -> str:
    try:
        infos = socket.getaddrinfo(target.hostname, target.port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise StepFailed(
            target.name,
            Step.RESOLVE,
            f"cannot resolve {target.hostname!r} ({error.strerror})",
            retryable=True,
            hint=f"check address: at {target.location}, DNS, or the alias in ~/.ssh/config",
        ) from None
    return str(infos[0][4][0])


def tcp_connect(target: SshTarget, ip: str, timeout_s: float = CONNECT_TIMEOUT_S) -> socket.socket:
    try:
        sock = socket.create_connection((ip, target.port), timeout=timeout_s)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise StepFailed(
            target.name,
            Step.TCP,
            f"cannot connect to {ip}:{target.port} ({reason})",
            retryable=True,
            hint="is the host up and sshd running on that port? (firewall, port: in farm.yaml)",
        ) from None
    # adb is many small request/answer exchanges: Nagle + delayed ACK would add ~40 ms to some
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def handshake(
    target: SshTarget,
    sock: socket.socket,
    policy: HostKeyPolicy,
    *,
    keepalive_s: float | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> paramiko.Transport:
    """SSH handshake and host-key verification; the transport is closed on any failure."""
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout_s
        transport.handshake_timeout = timeout_s
        known = policy.known_types(target.host_id)
        options = transport.get_security_options()
        if known:  # ask for the key type we can verify, as OpenSSH does
            options.key_types = tuple(known + [t for t in options.key_types if t not in known])
        try:
            transport.start_client(timeout=timeout_s)
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise StepFailed(
                target.name,
                Step.HOST_KEY,
                f"SSH handshake with {target.host_id} failed ({error or type(error).__name__})",
                retryable=True,
                hint="is it an SSH server on that port?",
            ) from None
        policy.require_trusted(target.name, target.host_id, transport.get_remote_server_key())
        if keepalive_s:
            transport.set_keepalive(max(1, int(keepalive_s)))
        return transport
    except BaseException:
        transport.close()
        raise


def server_key(target: SshTarget, timeout_s: float = CONNECT_TIMEOUT_S) -> paramiko.PKey:
    """The host key the server presents (for `farm hosts trust`), without authenticating."""
    sock = tcp_connect(target, resolve(target), timeout_s)
    transport = paramiko.Transport(sock)
    try:
        transport.start_client(timeout=timeout_s)
        return transport.get_remote_server_key()
    except (paramiko.SSHException, OSError, EOFError) as error:
        raise StepFailed(
            target.name, Step.HOST_KEY, f"SSH handshake failed ({error})", retryable=True
        ) from None
    finally:
        transport.close()


def _candidate_keys(target: SshTarget) -> tuple[list[paramiko.PKey], list[str]]:
    """Keys to offer, and notes on identity files that could not be used."""
    notes: list[str] = []
    keys: list[paramiko.PKey] = []
    files: Sequence[str] = target.identity_files
    if target.explicit_identity:
        path = Path(files[0])
        if not path.is_file():
            raise StepFailed(
                target.name,
                Step.AUTH,
                f"identity file {path} does not exist",
                retryable=False,
                hint=f"fix identity_file at {target.location}, or create a key with "
                f"`ssh-keygen -t ed25519 -f {path}` and add {path}.pub to the host's authorized_keys",
            )
    elif not files:
        files = [str(Path.home() / ".ssh" / n) for n in DEFAULT_IDENTITY_NAMES]
    for name in files:
        path = Path(name)
        if not path.is_file():
            continue
        try:
            keys.append(paramiko.PKey.from_path(path))
        except (paramiko.PasswordRequiredException, TypeError):
            # paramiko raises PasswordRequiredException for PEM keys; for OpenSSH-format keys the
            # cryptography loader underneath raises TypeError ("password was not provided")
            notes.append(f"{path} needs a passphrase (load it into ssh-agent)")
        except (paramiko.SSHException, OSError, ValueError) as error:
            notes.append(f"{path} is not a usable key ({error})")
    if os.environ.get("SSH_AUTH_SOCK"):
        try:
            keys.extend(paramiko.Agent().get_keys())
        except paramiko.SSHException as error:
            notes.append(f"ssh-agent: {error}")
    return keys, notes


def authenticate(target: SshTarget, transport: paramiko.Transport) -> None:
    keys, notes = _candidate_keys(target)
    if not keys:
        raise StepFailed(
            target.name,
            Step.AUTH,
            "no key to offer (" + ("; ".join(notes) or "no identity file, no ssh-agent") + ")",
            retryable=False,
            hint=f"set identity_file at {target.location} or start ssh-agent",
        )
    for key in keys:
        try:
            transport.auth_publickey(target.user, key)
        except paramiko.AuthenticationException:
            continue
        except (paramiko.SSHException, OSError, EOFError) as error:
            raise StepFailed(target.name, Step.AUTH, f"connection lost ({error})", retryable=True) from None
        if transport.is_authenticated():
            return
    raise StepFailed(
        target.name,
        Step.AUTH,
        f"{target.user}@{target.host_id} refused every key offered ({len(keys)})",
        retryable=False,
        hint=f"check user: and identity_file at {target.location}; the key's .pub must be in "
        f"~{target.user}/.ssh/authorized_keys on the host",
    )


def connect(
    target: SshTarget,
    policy: HostKeyPolicy,
    *,
    keepalive_s: float | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> paramiko.Transport:
    """All steps: an authenticated transport, or StepFailed naming the step."""
    sock = tcp_connect(target, resolve(target), timeout_s)
    try:
        transport = handshake(target, sock, policy, keepalive_s=keepalive_s, timeout_s=timeout_s)
    except BaseException:
        sock.close()
        raise
    try:
        authenticate(target, transport)
    except BaseException:
        transport.close()
        raise
    return transport
