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
        power_cycle: uhubctl -l {hub} -p {port} -a cycle   # the recovery ladder's last resort
        phones:                      # per phone (by ro.serialno): values for the placeholders
          ZY22: {hub: 1-1, port: 3}
    store: postgresql://farm@db.lab:5432/farm   # the lab's shared results store (default: ./results)

Parsed once, here, into frozen HostConfig values. Every section of farm.yaml (hosts here, schedules
in farm.schedule.config) is a pydantic model validated through `validate_file`, the same path as
experiment files (farm.experiment.messages): every mistake is one ConfigError naming FILE:LINE.
A config without a `local` entry gets one implicitly (the local adb server is a host too); a config
with `local: false` at the top level has none. Passwords are refused: keys and agents only (and
for `store:`, ~/.pgpass or $PGPASSWORD).

Where the file is: `--config PATH`, else `$FARM_CONFIG`, else `./farm.yaml`, else
`$FARM_CONFIG_DIR/farm.yaml` (default `~/.config/farm/farm.yaml`). No file at all means "only the
local adb server", exactly as before remote hosts existed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from farm.errors import ConfigError
from farm.experiment.loader import compose, line_of, to_python
from farm.experiment.messages import Problem, from_validation_error, problems_error
from farm.experiment.sections import Frozen
from farm.fleet.endpoint import DEFAULT_ADB_PORT, LOCAL_HOST
from farm.fleet.powercycle import DEFAULT_TIMEOUT_S as DEFAULT_POWER_CYCLE_TIMEOUT_S
from farm.fleet.powercycle import PowerCycle, parse_template
from farm.safe_yaml import read_text

CONFIG_FILE_NAME = "farm.yaml"
DEFAULT_SSH_PORT = 22
KEEPALIVE_INTERVAL_S = 5.0

_SECRET_KEYS = ("password", "passphrase", "pass", "secret")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_MISSING = "is required but missing"

Model = TypeVar("Model", bound=BaseModel)


# -- one reader for every section of farm.yaml: pydantic models, errors as FILE:LINE -----------


def validate_file(root: MappingNode, filename: str, model: type[Model], entries: str | None = None) -> Model:
    """The whole file (its root node) validated by `model`, or ConfigError naming FILE:LINE of the
    first problem, exactly as experiment files report theirs (farm.experiment.messages). `entries` names
    the section whose list items are named in messages: by position (`hosts[0]`) for a key that is
    unknown or missing, by their `name:` (`hosts.lab1`) for a wrong value."""
    try:
        return model.model_validate(to_python(root))
    except ValidationError as error:
        problems = from_validation_error(error, root, model)
    if entries is not None:
        names = _entry_names(root, entries)
        problems = sorted((_label(p, entries, names) for p in problems), key=lambda p: p.line)
    raise problems_error(problems, filename)


def entry_location(root: MappingNode, filename: str, section: str, index: int) -> str:
    """FILE:LINE of the index-th item of a section's list."""
    return f"{filename}:{line_of(root, (section, index))}"


def _entry_names(root: MappingNode, section: str) -> list[str | None]:
    """Each list item's `name:` when it is a usable name, else None (it is then named by position)."""
    names: list[str | None] = []
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value == section and isinstance(value, SequenceNode):
            for item in value.value:
                name = None
                if isinstance(item, MappingNode):
                    for item_key, item_value in item.value:
                        if item_key.value == "name" and isinstance(item_value, ScalarNode):
                            name = item_value.value if _NAME_RE.match(item_value.value) else None
                names.append(name)
    return names


def _label(problem: Problem, section: str, names: Sequence[str | None]) -> Problem:
    match = re.match(rf"^{re.escape(section)}\[(\d+)\](.*)$", problem.path)
    if match is None:
        return problem
    index, rest = int(match[1]), match[2]
    if problem.message == _MISSING:
        return Problem(problem.line, f"{section}[{index}]", f"{rest.lstrip('.')} is missing")
    by_position = problem.message.startswith("unknown key") or rest.startswith(".name")
    if by_position or index >= len(names) or names[index] is None:
        return problem
    return Problem(problem.line, f"{section}.{names[index]}{rest}", problem.message)


def text_value(value: Any) -> str:
    """Non-empty text, stripped (a config value that names something)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected text, got {value!r}")
    return value.strip()


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValueError(f"expected a port number 1-65535, got {value!r}")
    return value


def _positive_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return float(value)


def _list_of(what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError(f"expected a list of {what}")
        return value

    return check


Text = Annotated[str, BeforeValidator(text_value)]
Port = Annotated[int, BeforeValidator(_port)]
PositiveSeconds = Annotated[float, BeforeValidator(_positive_seconds)]


# -- hosts: ------------------------------------------------------------------------------------


def _host_name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(f"expected a short name (letters, digits, . _ -), got {value!r}")
    return value


def _tags(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise ValueError("expected a list of names")
    return tuple(value)


def _phone_values(value: Any) -> dict[str, dict[str, str]]:
    """`phones: {SERIAL: {key: value, ...}}`: a phone's placeholder values (and its own
    power_cycle), all as text."""
    if not isinstance(value, dict):
        raise ValueError("expected a mapping of phone serials to their values, e.g. {ZY22: {port: 3}}")
    phones: dict[str, dict[str, str]] = {}
    for serial, entry in value.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{serial}: expected a mapping like {{port: 3}}, got {entry!r}")
        values = {}
        for key, item in entry.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ValueError(f"{serial}: {key!r} is not a plain name (letters, digits, _)")
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise ValueError(f"{serial}.{key}: expected text or a number, got {item!r}")
            values[key] = str(item)
        phones[str(serial)] = values
    return phones


class HostEntry(Frozen):
    """One `hosts:` item as written (farm.yaml's keys and their checks)."""

    name: Annotated[str, BeforeValidator(_host_name)]
    address: Text | None = None
    port: Port | None = None
    user: Text | None = None
    identity_file: Text | None = None
    adb_port: Port | None = None
    tags: Annotated[tuple[str, ...], BeforeValidator(_tags)] = ()
    keepalive_s: PositiveSeconds = KEEPALIVE_INTERVAL_S
    start_adb: StrictBool = False
    power_cycle: Text | None = None
    power_cycle_timeout_s: PositiveSeconds = DEFAULT_POWER_CYCLE_TIMEOUT_S
    phones: Annotated[dict[str, dict[str, str]], BeforeValidator(_phone_values)] = Field(default_factory=dict)

    @field_validator("port", "user", "identity_file", "start_adb")
    @classmethod
    def _remote_only(cls, value: Any, info: ValidationInfo) -> Any:
        # info.data holds the fields validated so far (name, address come first); an address that
        # failed its own check is reported there, not here.
        if value not in (None, False) and "address" in info.data and info.data["address"] is None:
            raise ValueError("only for remote hosts (local has no address)")
        return value

    @model_validator(mode="after")
    def _address_unless_local(self) -> HostEntry:
        if self.address is None and self.name != LOCAL_HOST:
            raise ValueError(
                "address is missing (only the host named `local` is this machine); "
                "add address: HOSTNAME (or an ~/.ssh/config alias)"
            )
        return self


def _store(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a results folder or a postgresql://USER@HOST[:PORT]/DATABASE URL")
    if "://" in value and urlsplit(value).password is not None:
        raise ValueError("no passwords in config files: drop it from the URL, use ~/.pgpass or $PGPASSWORD")
    return value.strip()


class _HostsFile(Frozen):
    """farm.yaml as the hosts parser sees it; `schedules:` is farm.schedule.config's."""

    hosts: Annotated[tuple[HostEntry, ...], BeforeValidator(_list_of("hosts (- name: lab1 ...)"))] = ()
    local: StrictBool = True
    schedules: Any = None
    store: Annotated[str, BeforeValidator(_store)] | None = None  # a results folder or a URL


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
    power_cycle: PowerCycle | None = None  # for every phone of the host without its own
    phones: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # serial -> placeholder values
    phone_power_cycles: Mapping[str, PowerCycle] = field(default_factory=dict)  # serial -> its own

    @property
    def is_local(self) -> bool:
        return self.address is None

    def power_cycle_of(self, serial: str) -> PowerCycle | None:
        return self.phone_power_cycles.get(serial, self.power_cycle)


@dataclass(frozen=True)
class FarmConfig:
    hosts: tuple[HostConfig, ...] = field(default=())
    path: Path | None = None
    store: str | None = None  # `store:`: a results folder or a postgresql:// URL
    store_location: str | None = None  # FILE:LINE of `store:`

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
    _refuse_secrets(root, filename)
    parsed = validate_file(root, filename, _HostsFile, entries="hosts")
    hosts = [
        HostConfig(
            name=entry.name,
            address=entry.address,
            port=entry.port,
            user=entry.user,
            identity_file=entry.identity_file,
            adb_port=entry.adb_port or DEFAULT_ADB_PORT,
            tags=entry.tags,
            keepalive_s=entry.keepalive_s,
            start_adb=entry.start_adb,
            location=entry_location(root, filename, "hosts", index),
            power_cycle=_power_cycle(root, filename, index, entry, None),
            phones={
                serial: {k: v for k, v in values.items() if k != "power_cycle"}
                for serial, values in entry.phones.items()
            },
            phone_power_cycles={
                serial: cycle
                for serial in entry.phones
                if (cycle := _power_cycle(root, filename, index, entry, serial)) is not None
            },
        )
        for index, entry in enumerate(parsed.hosts)
    ]
    _check_unique(hosts)
    if parsed.local and not any(h.is_local for h in hosts):
        hosts.insert(0, HostConfig(LOCAL_HOST, adb_port=local_adb_port, location=filename, implicit=True))
    store_at = f"{filename}:{line_of(root, ('store',))}" if parsed.store is not None else None
    return FarmConfig(tuple(hosts), Path(filename), parsed.store, store_at)


def _power_cycle(
    root: MappingNode, filename: str, index: int, entry: HostEntry, serial: str | None
) -> PowerCycle | None:
    """The host's power_cycle (serial None) or one phone's own, parsed; FILE:LINE on a mistake."""
    path: tuple[str | int, ...]
    if serial is None:
        text, path = entry.power_cycle, ("hosts", index, "power_cycle")
        known = frozenset(k for values in entry.phones.values() for k in values if k != "power_cycle")
    else:
        text = entry.phones[serial].get("power_cycle")
        path = ("hosts", index, "phones", serial, "power_cycle")
        known = frozenset(k for k in entry.phones[serial] if k != "power_cycle")
    if text is None:
        return None
    location = f"{filename}:{line_of(root, path)}"
    try:
        return parse_template(text, known, location, entry.power_cycle_timeout_s)
    except ValueError as error:
        where = f"hosts.{entry.name}" + (f".phones.{serial}" if serial else "")
        raise ConfigError(f"{where}.power_cycle: {error}", location=location) from None


def _refuse_secrets(root: MappingNode, filename: str) -> None:
    """A password in the file is refused before anything else is read: keys and agents only."""
    for key, value in root.value:
        if key.value != "hosts" or not isinstance(value, SequenceNode):
            continue
        for index, item in enumerate(value.value):
            for item_key, _ in item.value if isinstance(item, MappingNode) else ():
                if str(item_key.value).lower() in _SECRET_KEYS:
                    raise ConfigError(
                        f"hosts[{index}].{item_key.value}: no passwords in config files",
                        location=f"{filename}:{item_key.start_mark.line + 1}",
                        hint="use identity_file (a key) or an ssh-agent",
                    )


def _check_unique(hosts: list[HostConfig]) -> None:
    seen: dict[str, HostConfig] = {}
    for host in hosts:
        if host.name in seen:
            raise ConfigError(
                f"hosts.{host.name}: defined twice (first at {seen[host.name].location})",
                location=host.location,
            )
        seen[host.name] = host
