"""A phone's power-cycle command: the lab's own way to cut and restore a phone's USB power.

farm.yaml gives it per host (for all its phones) or per phone, as a command line with
placeholders; the recovery ladder (farm.engine.ladder) runs it when a phone stopped answering and
neither a reconnect nor (where allowed) a reboot brought it back:

    hosts:
      - name: lab1
        address: lab1.example.org
        power_cycle: uhubctl -l {hub} -p {port} -a cycle -d 5
        phones:
          ZY22: {hub: 1-1, port: 3}
          ZY23: {hub: 1-1, port: 4, power_cycle: ykushcmd -d {port}}

Placeholders: {serial} (ro.serialno), {adb_serial}, {device_id}, {host}, and any key of the
phone's `phones:` entry. The line is split into words like a shell would (shlex) BEFORE the
values go in, and run without a shell: a value is always one word, never code. It runs on the
phone's host (this machine for `local`, over SSH for a lab host) with a timeout; its exit code and
output go into the recovery event.
"""

from __future__ import annotations

import shlex
import string
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass

from farm.errors import ConfigError

BUILTIN_FIELDS = ("serial", "adb_serial", "device_id", "host")
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CommandResult:
    """What a power-cycle command did: its exit code (None: killed at its timeout), its output."""

    command: str
    exit_code: int | None
    output: str
    took_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class PowerCycle:
    """A parsed command template (its words, each with placeholders) and where it was written."""

    words: tuple[str, ...]
    location: str
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(name for word in self.words for name in placeholders(word))

    def render(self, values: Mapping[str, str]) -> tuple[str, ...]:
        """The argv for one phone; ConfigError naming the missing value and where to add it."""
        missing = sorted(self.fields - set(values))
        if missing:
            raise ConfigError(
                f"power_cycle needs {', '.join('{' + m + '}' for m in missing)} for phone "
                f"{values.get('serial', '?')}",
                location=self.location,
                hint=f"add it to the host's phones: entry, e.g. phones: {{{values.get('serial', 'SERIAL')}: "
                f"{{{missing[0]}: ...}}}}",
            )
        return tuple(word.format_map(values) for word in self.words)


def placeholders(word: str) -> list[str]:
    """The field names a word uses (`{port}` -> port); ValueError for a malformed one."""
    names = []
    for _, name, spec, conversion in string.Formatter().parse(word):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(f"placeholder {{{name}}} must be a plain name like {{port}}")
        names.append(name)
    return names


def parse_template(text: str, known: frozenset[str], location: str, timeout_s: float) -> PowerCycle:
    """A power_cycle line -> PowerCycle; ValueError (for the config's FILE:LINE message) when it
    cannot be split or uses a placeholder neither built in nor given in a phones: entry."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as error:
        raise ValueError(f"cannot split the command into words: {error}") from None
    if not words:
        raise ValueError("empty command")
    allowed = set(BUILTIN_FIELDS) | known
    for word in words:
        for name in placeholders(word):
            if name not in allowed:
                raise ValueError(
                    f"unknown placeholder {{{name}}} (known: "
                    + ", ".join("{" + n + "}" for n in sorted(allowed))
                    + "; other values go in the host's phones: entries)"
                )
    return PowerCycle(words, location, timeout_s)


def run_local(argv: tuple[str, ...], timeout_s: float) -> CommandResult:
    """Run a power-cycle command on this machine, without a shell, bounded by timeout_s."""
    shown = shlex.join(argv)
    started = time.monotonic()
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        output = _text(error.stdout) + _text(error.stderr)
        return CommandResult(
            shown, None, output + f"\n(killed after {timeout_s:g} s)", time.monotonic() - started
        )
    except OSError as error:
        return CommandResult(shown, 127, f"cannot run it: {error}", time.monotonic() - started)
    return CommandResult(shown, done.returncode, done.stdout + done.stderr, time.monotonic() - started)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")
