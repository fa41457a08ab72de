"""Parse farm-sampler traces (device_agents/README.md, "Trace format") into numpy series.

A trace is one JSON header line, then fixed-size little-endian records:
`u32 kind, u32 aux, i64 t_ns, f64 values[slots]` with `record_bytes = 16 + 8 * slots`.
Kinds: `S` sample tick (aux = read duration ns, one value per column, NaN = unreadable or not
read on this tick because the source has a lower rate),
`M` memory of the watched pid (aux = pid, values VmRSS kB, VmHWM kB), `E` watched pid exited
(aux = pid, value = last VmHWM kB), `X` clean end (aux = reason, values ticks, missed ticks).

The sampler writes in whole records, but kill -9 or a pull of a file still being written can cut
it anywhere: everything up to the last complete record is kept and `truncated_bytes` says what
was dropped. Pure: bytes in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
from numpy.typing import NDArray

from farm import safe_json
from farm.analysis.series import Series

TRACE_FORMAT = "farm-trace"
SUPPORTED_VERSIONS = (1,)
HEADER_MAGIC = b'{"format":"farm-trace"'
MEM_RSS = "mem.rss"
MEM_HWM = "mem.hwm"

_KIND_SAMPLE = ord("S")
_KIND_MEMORY = ord("M")
_KIND_EXIT = ord("E")
_KIND_END = ord("X")
_KINDS = (_KIND_SAMPLE, _KIND_MEMORY, _KIND_EXIT, _KIND_END)


class TraceFormatError(ValueError):
    """The bytes are not a farm-sampler trace (or its header was cut before it ended).

    Callers know the phone and run; they wrap this into a DeviceError / BenchmarkError."""


class StopReason(IntEnum):
    SIGNAL = 1  # SIGTERM / SIGINT from the host
    DURATION = 2  # --duration-s elapsed
    LINGER = 3  # --linger-s after the watched pid exited


@dataclass(frozen=True)
class TraceSource:
    name: str
    path: str
    format: str  # int | float | pct | kgsl | pair
    column: int
    width: int  # 2 for pair, else 1
    open_error: str | None  # the file could not be opened when sampling started
    rate_hz: float  # how often it was read (the tick rate, or lower for FORMAT@HZ sources)


@dataclass(frozen=True)
class TraceHeader:
    version: int
    start_ns: int
    rate_hz: float
    mem_rate_hz: float
    record_bytes: int
    columns: int
    watch_pid: int | None
    sampler_pid: int
    sources: tuple[TraceSource, ...]


@dataclass(frozen=True)
class ExitEvent:
    pid: int
    t_ns: int  # first sample at which the pid was gone (or a zombie)
    peak_rss_kb: float | None  # last VmHWM seen before it exited


@dataclass(frozen=True)
class TraceEnd:
    reason: StopReason
    t_ns: int
    ticks: int
    missed_ticks: int  # ticks skipped because a read overran its period


@dataclass(frozen=True, eq=False)
class Trace:
    """A parsed trace. `sample_t_ns[i]` stamps row i of `columns` (CLOCK_MONOTONIC ns)."""

    header: TraceHeader
    sample_t_ns: NDArray[np.int64]
    read_ns: NDArray[np.uint32]  # how long reading all sources took, per tick
    columns: NDArray[np.float64]  # shape (ticks, header.columns)
    memory_t_ns: NDArray[np.int64]
    rss_kb: NDArray[np.float64]
    hwm_kb: NDArray[np.float64]
    exit: ExitEvent | None
    end: TraceEnd | None  # None: the sampler was killed or the file was cut
    truncated_bytes: int = 0
    _by_name: dict[str, TraceSource] = field(default_factory=dict, repr=False)

    @property
    def complete(self) -> bool:
        return self.end is not None and self.truncated_bytes == 0

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.header.sources)

    def values(self, name: str) -> NDArray[np.float64]:
        """Raw values of a source: shape (ticks,), or (ticks, 2) for `pair`. KeyError if absent."""
        src = self._by_name[name]
        if src.width == 1:
            return self.columns[:, src.column]
        return self.columns[:, src.column : src.column + src.width]

    def series(self, source: str) -> Series | None:
        """Readable samples of one source (unreadable ticks dropped), or None if not sampled.

        `mem.rss` / `mem.hwm` are the watched pid's memory in kB. A `pair` source gives its first
        value under `NAME` and its second under `NAME.1`.
        """
        if source in (MEM_RSS, MEM_HWM):
            if self.header.watch_pid is None:
                return None
            vals = self.rss_kb if source == MEM_RSS else self.hwm_kb
            keep = ~np.isnan(vals)
            return Series(self.memory_t_ns[keep], vals[keep])
        name, second = (source[:-2], True) if source.endswith(".1") else (source, False)
        src = self._by_name.get(source) or self._by_name.get(name)
        if src is None:
            return None
        col = src.column + (1 if second and src.name == name and src.width == 2 else 0)
        vals = self.columns[:, col]
        keep = ~np.isnan(vals)
        return Series(self.sample_t_ns[keep], vals[keep])


def _header(line: bytes) -> TraceHeader:
    try:
        doc = safe_json.loads(line)
        if not isinstance(doc, dict):
            raise TraceFormatError("trace header is not a JSON object")
        if doc.get("format") != TRACE_FORMAT:
            raise TraceFormatError(f"not a {TRACE_FORMAT} trace (format={doc.get('format')!r})")
        if doc.get("version") not in SUPPORTED_VERSIONS:
            raise TraceFormatError(
                f"trace version {doc.get('version')} is not supported (this farm reads "
                f"{SUPPORTED_VERSIONS}); redeploy the matching farm-sampler"
            )
        sources = tuple(
            TraceSource(
                name=str(s["name"]),
                path=str(s["path"]),
                format=str(s["format"]),
                column=int(s["column"]),
                width=int(s["width"]),
                open_error=s.get("open_error"),
                rate_hz=float(s.get("rate_hz") or doc["rate_hz"]),
            )
            for s in doc["sources"]
        )
        watch = doc.get("watch_pid")
        header = TraceHeader(
            version=int(doc["version"]),
            start_ns=int(doc["start_ns"]),
            rate_hz=float(doc["rate_hz"]),
            mem_rate_hz=float(doc.get("mem_rate_hz") or 0.0),
            record_bytes=int(doc["record_bytes"]),
            columns=int(doc["columns"]),
            watch_pid=int(watch) if watch is not None else None,
            sampler_pid=int(doc.get("pid", 0)),
            sources=sources,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, TraceFormatError):
            raise
        raise TraceFormatError(f"bad trace header: {type(exc).__name__}: {exc}") from exc
    for s in header.sources:
        if s.width not in (1, 2) or not 0 <= s.column <= header.columns - s.width:
            raise TraceFormatError(
                f"trace header: source {s.name!r} lies outside the {header.columns} columns"
            )
    slots = max(header.columns, 2)
    if header.record_bytes != 16 + 8 * slots:
        raise TraceFormatError(
            f"trace header says {header.record_bytes}-byte records for {header.columns} columns"
        )
    return header


def parse_trace(data: bytes) -> Trace:
    """Parse a whole (possibly cut) trace. Raises TraceFormatError for anything else."""
    newline = data.find(b"\n")
    if newline < 0:
        cut = HEADER_MAGIC.startswith(data) or data.startswith(HEADER_MAGIC)
        what = "cut inside its header (the sampler died at start)" if cut else "not a farm-sampler trace"
        raise TraceFormatError(f"trace of {len(data)} bytes is {what}")
    if not data.startswith(HEADER_MAGIC):
        raise TraceFormatError("not a farm-sampler trace (no farm-trace header line)")
    header = _header(data[:newline])
    slots = max(header.columns, 2)
    dtype = np.dtype([("kind", "<u4"), ("aux", "<u4"), ("t", "<i8"), ("v", "<f8", (slots,))])
    body = memoryview(data)[newline + 1 :]
    whole = len(body) // header.record_bytes
    records = np.frombuffer(body[: whole * header.record_bytes], dtype=dtype)
    bad = np.flatnonzero(~np.isin(records["kind"], _KINDS))
    if bad.size:
        offset = newline + 1 + int(bad[0]) * header.record_bytes
        raise TraceFormatError(f"corrupt trace record at byte {offset} (kind {records['kind'][bad[0]]:#x})")

    kind = records["kind"]
    samples = records[kind == _KIND_SAMPLE]
    memory = records[kind == _KIND_MEMORY]
    exits = records[kind == _KIND_EXIT]
    ends = records[kind == _KIND_END]
    exit_event = None
    if exits.size:
        hwm = float(exits["v"][0][0])
        exit_event = ExitEvent(int(exits["aux"][0]), int(exits["t"][0]), None if np.isnan(hwm) else hwm)
    end = None
    if ends.size:
        reason = int(ends["aux"][0])
        if reason not in StopReason._value2member_map_:
            raise TraceFormatError(f"trace end record has unknown stop reason {reason}")
        end = TraceEnd(
            StopReason(reason),
            int(ends["t"][0]),
            int(ends["v"][0][0]),
            int(ends["v"][0][1]),
        )
    return Trace(
        header=header,
        sample_t_ns=samples["t"].astype(np.int64),
        read_ns=samples["aux"].astype(np.uint32),
        columns=np.ascontiguousarray(samples["v"][:, : header.columns], dtype=np.float64),
        memory_t_ns=memory["t"].astype(np.int64),
        rss_kb=memory["v"][:, 0].astype(np.float64),
        hwm_kb=memory["v"][:, 1].astype(np.float64),
        exit=exit_event,
        end=end,
        truncated_bytes=len(body) - whole * header.record_bytes,
        _by_name={s.name: s for s in header.sources},
    )
