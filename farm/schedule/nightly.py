"""Each nightly is a separate experiment in the store: `<name>--<YYYYMMDD-HHMMSS>` (the slot, UTC).

Why a new name and not `--fresh` or a new execution id: the planner's run ids depend only on
(experiment qualified name, cell, repetition, phone), so running the same file again resumes, and
`--fresh` deletes the previous runs, i.e. the history a regression check needs. Renaming the
experiment per slot gives every night its own run ids, rows, metrics and results folder
(results/<name>--<stamp>/) with no change to the engine or store, keeps each night's spec in the
store as it was that night, and lets a night interrupted half-way be resumed by running its
derived file again. The name keeps the variant suffix after it: `smoke--20261129-020000.quick`.

Pure: `rename_spec` edits the `name:` scalar of the file's text in place (comments, layout and line
numbers stay, so errors still point at the right line of the derived file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from yaml.nodes import ScalarNode

from farm.errors import ConfigError
from farm.experiment.loader import compose, find

SEPARATOR = "--"
STAMP_FORMAT = "%Y%m%d-%H%M%S"
MAX_NAME_LENGTH = 64  # the spec's Slug limit
_NIGHTLY_RE = re.compile(
    r"^(?P<name>.+?)--(?P<stamp>\d{8}-\d{6})(?:-(?P<seq>\d+))?(?:\.(?P<variant>[^.]+))?$"
)


@dataclass(frozen=True)
class NightlyName:
    base_name: str  # the file's name:
    slot: datetime  # UTC
    seq: int = 0  # > 0 when two nightlies of one base fall in the same second (manual runs)
    variant: str | None = None

    @property
    def name(self) -> str:
        """The `name:` the derived spec gets."""
        suffix = f"-{self.seq}" if self.seq else ""
        return f"{self.base_name}{SEPARATOR}{self.slot.astimezone(UTC).strftime(STAMP_FORMAT)}{suffix}"

    @property
    def qualified_name(self) -> str:
        """The key the runs are stored under (what the engine computes for the derived spec)."""
        return f"{self.name}.{self.variant}" if self.variant else self.name

    @property
    def base_qualified_name(self) -> str:
        return f"{self.base_name}.{self.variant}" if self.variant else self.base_name


def nightly_name(base_name: str, slot: datetime, variant: str | None = None, seq: int = 0) -> NightlyName:
    nightly = NightlyName(base_name, slot.astimezone(UTC).replace(microsecond=0), seq, variant)
    if len(nightly.name) > MAX_NAME_LENGTH:
        raise ConfigError(
            f"experiment name {base_name!r} is too long for a nightly ({nightly.name!r} exceeds "
            f"{MAX_NAME_LENGTH} characters)",
            hint=f"shorten the experiment's name: to at most {MAX_NAME_LENGTH - 22} characters",
        )
    return nightly


def parse_nightly(qualified_name: str) -> NightlyName | None:
    """The parts of a nightly's stored name, or None when it is not one."""
    match = _NIGHTLY_RE.match(qualified_name)
    if match is None:
        return None
    slot = datetime.strptime(match["stamp"], STAMP_FORMAT).replace(tzinfo=UTC)
    return NightlyName(match["name"], slot, int(match["seq"] or 0), match["variant"])


def is_nightly_of(qualified_name: str, base_qualified_name: str) -> bool:
    parsed = parse_nightly(qualified_name)
    return parsed is not None and parsed.base_qualified_name == base_qualified_name


def rename_spec(text: str, filename: str, new_name: str) -> str:
    """`text` with its top-level `name:` value replaced by `new_name` (a slug: no quoting needed)."""
    root = compose(text, filename)
    node = find(root, ("name",))
    if not isinstance(node, ScalarNode):
        raise ConfigError(
            "name: missing or not a plain value", location=f"{filename}:{root.start_mark.line + 1}"
        )
    start, end = node.start_mark.index, node.end_mark.index
    return text[:start] + new_name + text[end:]
