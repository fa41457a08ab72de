"""The farm config file (`farm.yaml`): where the adb servers with phones are.

    hosts:
      - name: local                  # this machine's adb server (no address)
        adb_port: 5037
      - name: lab1
        address: lab1.example.org    # a DNS name, an IP, or a ~/.ssh/config alias
        port: 22
        user: farm
        identity_file: ~/.ssh/farm_ed25519
        adb_port: 5037               # the adb server port on lab1 (as lab1 sees it)
        tags: [pixel, rack-a]
        start_adb: true              # run `adb -P 5037 start-server` there when none answers

Parsed once, here, into frozen HostConfig values; every mistake is a ConfigError naming FILE:LINE.
A config without a `local` entry gets one implicitly (the local adb server is a host too); a config
with `local: false` at the top level has none. Passwords are refused: keys and agents only.

Where the file is: `--config PATH`, else `$FARM_CONFIG`, else `./farm.yaml`, else
`$FARM_CONFIG_DIR/farm.yaml` (default `~/.config/farm/farm.yaml`). No file at all means "only the
local adb server", exactly as before remote hosts existed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from yaml.nodes import Node, SequenceNode

from farm.errors import ConfigError
from farm.fleet.endpoint import DEFAULT_ADB_PORT, LOCAL_HOST
from farm.safe_yaml import read_text
from farm.spec.loader import compose, config_entry, to_python

CONFIG_FILE_NAME = "farm.yaml"
DEFAULT_SSH_PORT = 22
KEEPALIVE_INTERVAL_S = 5.0

HOST_KEYS = (
    "name",
    "address",
    "port",
    "user",
    "identity_file",
    "adb_port",
    "tags",
    "keepalive_s",
    "start_adb",
)
# Top-level sections of farm.yaml that other modules parse (farm.schedule.config: schedules).
OTHER_SECTIONS = ("schedules",)
_SECRET_KEYS = ("password", "passphrase", "pass", "secret")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True)
class HostConfig:
    """One adb server with phones. `address is None` means this machine's own server."""

    name: str
    address: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    adb_port: int = DEFAULT_ADB_PORT
    tags: tuple[str, ...] = ()
    keepalive_s: float = KEEPALIVE_INTERVAL_S
    start_adb: bool = False  # start the host's adb server over SSH when it is not running
    location: str = "<default>"
    implicit: bool = False  # the local host added because the config does not list one

    @property
    def is_local(self) -> bool:
        return self.address is None


@dataclass(frozen=True)
class FarmConfig:
    hosts: tuple[HostConfig, ...] = field(default=())
    path: Path | None = None

    @property
    def remote_hosts(self) -> tuple[HostConfig, ...]:
        return tuple(h for h in self.hosts if not h.is_local)

    def host(self, name: str) -> HostConfig:
        for host in self.hosts:
            if host.name == name:
                return host
        known = ", ".join(h.name for h in self.hosts) or "none"
        where = f" in {self.path}" if self.path else ""
        raise ConfigError(
            f"no host named {name!r}{where} (hosts: {known})", hint="see `farm hosts` for the list"
        )


def config_dir() -> Path:
    """farm's own folder for config and known host keys ($FARM_CONFIG_DIR or ~/.config/farm)."""
    explicit = os.environ.get("FARM_CONFIG_DIR")
    return Path(explicit) if explicit else Path.home() / ".config" / "farm"


def find_config(explicit: Path | None = None) -> Path | None:
    """The config file to use, or None when there is none (explicit paths must exist)."""
    if explicit is None and os.environ.get("FARM_CONFIG"):
        explicit = Path(os.environ["FARM_CONFIG"])
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: no such config file", hint="check --config / $FARM_CONFIG")
        return explicit
    for candidate in (Path.cwd() / CONFIG_FILE_NAME, config_dir() / CONFIG_FILE_NAME):
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: Path | None = None, *, local_adb_port: int = DEFAULT_ADB_PORT) -> FarmConfig:
    """Find and parse the config; without one, the fleet is the local adb server alone."""
    path = find_config(explicit)
    if path is None:
        return FarmConfig((HostConfig(LOCAL_HOST, adb_port=local_adb_port),))
    text = read_text(path, "config file")
    return parse_config(text, str(path), local_adb_port=local_adb_port)


def parse_config(text: str, filename: str, *, local_adb_port: int = DEFAULT_ADB_PORT) -> FarmConfig:
    """Config text -> FarmConfig (pure). `local_adb_port` is used for an implicit local host."""
    root = compose(text, filename)
    include_local = True
    hosts_node: Node | None = None
    for key, value in root.value:
        where = f"{filename}:{key.start_mark.line + 1}"
        if key.value == "hosts":
            hosts_node = value
        elif key.value in OTHER_SECTIONS:
            continue  # parsed by its own module
        elif key.value == "local":
            flag = to_python(value)
            if not isinstance(flag, bool):
                raise ConfigError("local: expected true or false", location=where)
            include_local = flag
        else:
            raise ConfigError(f"{key.value}: unknown key (known: hosts, local, schedules)", location=where)
    hosts: list[HostConfig] = []
    if hosts_node is not None:
        if not isinstance(hosts_node, SequenceNode):
            raise ConfigError(
                "hosts: expected a list of hosts (- name: lab1 ...)",
                location=f"{filename}:{hosts_node.start_mark.line + 1}",
            )
        hosts = [_host(item, filename, index) for index, item in enumerate(hosts_node.value)]
    _check_unique(hosts, filename)
    if include_local and not any(h.is_local for h in hosts):
        hosts.insert(0, HostConfig(LOCAL_HOST, adb_port=local_adb_port, location=filename, implicit=True))
    return FarmConfig(tuple(hosts), Path(filename))


def _host(node: Node, filename: str, index: int) -> HostConfig:
    def refuse_secrets(name: str, key_where: str) -> None:
        if name.lower() in _SECRET_KEYS:
            raise ConfigError(
                f"hosts[{index}].{name}: no passwords in config files",
                location=key_where,
                hint="use identity_file (a key) or an ssh-agent",
            )

    entry = config_entry(
        node, filename, f"hosts[{index}]", HOST_KEYS, "name:, address:, ...", check_key=refuse_secrets
    )
    values, lines, where = entry.values, entry.lines, entry.location
    if "name" not in values:
        raise ConfigError(f"hosts[{index}]: name is missing", location=where)
    host_name = values["name"]
    if not isinstance(host_name, str) or not _NAME_RE.match(host_name):
        raise ConfigError(
            f"hosts[{index}].name: expected a short name (letters, digits, . _ -), got {host_name!r}",
            location=lines["name"],
        )
    label = f"hosts.{host_name}"
    address = _optional_str(values, "address", label, lines)
    if address is None and host_name != LOCAL_HOST:
        raise ConfigError(
            f"{label}: address is missing (only the host named `local` is this machine)",
            location=where,
            hint="add address: HOSTNAME (or an ~/.ssh/config alias)",
        )
    if address is None:
        for remote_only in ("port", "user", "identity_file"):
            if remote_only in values:
                raise ConfigError(
                    f"{label}.{remote_only}: only for remote hosts (local has no address)",
                    location=lines[remote_only],
                )
    tags = values.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        raise ConfigError(f"{label}.tags: expected a list of names", location=lines.get("tags", where))
    keepalive = values.get("keepalive_s", KEEPALIVE_INTERVAL_S)
    if isinstance(keepalive, bool) or not isinstance(keepalive, int | float) or keepalive <= 0:
        raise ConfigError(
            f"{label}.keepalive_s: expected a positive number of seconds, got {keepalive!r}",
            location=lines.get("keepalive_s", where),
        )
    start_adb = values.get("start_adb", False)
    if not isinstance(start_adb, bool):
        raise ConfigError(f"{label}.start_adb: expected true or false", location=lines["start_adb"])
    if start_adb and address is None:
        raise ConfigError(f"{label}.start_adb: only for remote hosts", location=lines["start_adb"])
    return HostConfig(
        name=host_name,
        address=address,
        port=_port(values, "port", label, lines),
        user=_optional_str(values, "user", label, lines),
        identity_file=_optional_str(values, "identity_file", label, lines),
        adb_port=_port(values, "adb_port", label, lines) or DEFAULT_ADB_PORT,
        tags=tuple(tags),
        keepalive_s=float(keepalive),
        start_adb=start_adb,
        location=where,
    )


def _optional_str(values: dict[str, object], key: str, label: str, lines: dict[str, str]) -> str | None:
    value = values.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{label}.{key}: expected text, got {value!r}", location=lines[key])
    return value.strip()


def _port(values: dict[str, object], key: str, label: str, lines: dict[str, str]) -> int | None:
    value = values.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigError(
            f"{label}.{key}: expected a port number 1-65535, got {value!r}", location=lines[key]
        )
    return value


def _check_unique(hosts: list[HostConfig], filename: str) -> None:
    seen: dict[str, HostConfig] = {}
    for host in hosts:
        if host.name in seen:
            raise ConfigError(
                f"hosts.{host.name}: defined twice (first at {seen[host.name].location})",
                location=host.location,
            )
        seen[host.name] = host
