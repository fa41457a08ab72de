"""farm.telemetry.trace.parse_trace on traces built here from the documented format."""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from farm.telemetry.trace import StopReason, TraceFormatError, parse_trace

NAN = float("nan")


def _header(spec: list[tuple[str, str, int]], *, watch_pid: int | None = 77, **over: object) -> bytes:
    """sources: (name, format, width). Key order as farm-sampler writes it (format first)."""
    cols = 0
    srcs = []
    for name, fmt, width in spec:
        srcs.append(
            {
                "name": name,
                "path": f"/sys/x/{name}",
                "format": fmt,
                "column": cols,
                "width": width,
                "open_error": None,
            }
        )
        cols += width
    doc: dict[str, object] = {
        "format": "farm-trace",
        "version": 1,
        "clock": "CLOCK_MONOTONIC",
        "start_ns": 1_000,
        "rate_hz": 100,
        "mem_rate_hz": 50,
        "record_bytes": 16 + 8 * max(cols, 2),
        "columns": cols,
        "watch_pid": watch_pid,
        "pid": 5,
        "sources": srcs,
    }
    doc.update(over)
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def _record(kind: str, aux: int, t_ns: int, values: list[float], slots: int) -> bytes:
    vals = values + [NAN] * (slots - len(values))
    return struct.pack(f"<IIq{slots}d", ord(kind), aux, t_ns, *vals)


SOURCES = [("gpu.busy", "kgsl", 1), ("battery.current_now", "int", 1), ("pairx", "pair", 2)]
SLOTS = 4


def _small_trace() -> bytes:
    out = [_header(SOURCES)]
    for i in range(3):
        out.append(_record("S", 900 + i, 10_000 + i * 1000, [0.25 * i, -300_000.0 - i, 7.0, 8.0 + i], SLOTS))
        out.append(_record("M", 77, 10_500 + i * 1000, [1000.0 + i, 2000.0 + i], SLOTS))
    out.append(_record("S", 903, 13_000, [NAN, -300_003.0, 7.0, 11.0], SLOTS))
    out.append(_record("E", 77, 13_200, [2002.0], SLOTS))
    out.append(_record("X", int(StopReason.LINGER), 13_900, [4.0, 1.0], SLOTS))
    return b"".join(out)


def test_full_trace_gives_sources_memory_exit_and_end() -> None:
    trace = parse_trace(_small_trace())
    assert trace.source_names == ("gpu.busy", "battery.current_now", "pairx")
    assert trace.sample_t_ns.tolist() == [10_000, 11_000, 12_000, 13_000]
    assert trace.read_ns.tolist() == [900, 901, 902, 903]
    assert trace.values("battery.current_now").tolist() == [-300_000, -300_001, -300_002, -300_003]
    assert trace.values("pairx").shape == (4, 2)
    busy = trace.series("gpu.busy")
    assert busy is not None
    # the unreadable tick (NaN) is dropped from the series, not turned into 0
    assert busy.t_ns.tolist() == [10_000, 11_000, 12_000]
    assert busy.values.tolist() == [0.0, 0.25, 0.5]
    second = trace.series("pairx.1")
    assert second is not None and second.values.tolist() == [8.0, 9.0, 10.0, 11.0]
    rss = trace.series("mem.rss")
    assert rss is not None and rss.values.tolist() == [1000.0, 1001.0, 1002.0]
    assert trace.exit is not None and (trace.exit.pid, trace.exit.t_ns, trace.exit.peak_rss_kb) == (
        77,
        13_200,
        2002.0,
    )
    assert trace.end is not None and trace.end.reason is StopReason.LINGER
    assert (trace.end.ticks, trace.end.missed_ticks) == (4, 1)
    assert trace.complete
    assert trace.series("not.sampled") is None


def test_cut_at_every_byte_keeps_every_whole_record() -> None:
    data = _small_trace()
    full = parse_trace(data)
    header_len = data.index(b"\n") + 1
    record = 16 + 8 * SLOTS
    kinds = ["S", "M"] * 3 + ["S", "E", "X"]
    for cut in range(len(data) + 1):
        prefix = data[:cut]
        if cut < header_len:
            with pytest.raises(TraceFormatError, match="cut inside its header"):
                parse_trace(prefix)
            continue
        trace = parse_trace(prefix)
        whole = (cut - header_len) // record
        seen = kinds[:whole]
        n_samples = seen.count("S")
        assert trace.truncated_bytes == (cut - header_len) % record
        assert trace.sample_t_ns.tolist() == full.sample_t_ns[:n_samples].tolist()
        np.testing.assert_array_equal(trace.columns, full.columns[:n_samples])
        assert trace.rss_kb.tolist() == full.rss_kb[: seen.count("M")].tolist()
        assert (trace.exit is not None) == ("E" in seen)
        assert (trace.end is not None) == ("X" in seen)
        assert trace.complete == (cut == len(data))


def test_no_watch_pid_means_no_memory_series() -> None:
    data = _header([("a", "int", 1)], watch_pid=None) + _record("S", 1, 5, [3.0], 2)
    trace = parse_trace(data)
    assert trace.header.watch_pid is None
    assert trace.series("mem.rss") is None
    assert trace.series("a") is not None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "cut inside its header"),
        (b"hello world\n\x00\x01", "not a farm-sampler trace"),
        (b"PK\x03\x04 zip file", "not a farm-sampler trace"),
        (_header(SOURCES, version=2), "version 2 is not supported"),
        (_header(SOURCES, record_bytes=40), "40-byte records"),
        (_header(SOURCES)[:-2] + b",\n", "bad trace header"),
    ],
)
def test_not_a_trace_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(TraceFormatError, match=message):
        parse_trace(data)


def test_corrupt_record_kind_names_its_offset() -> None:
    head = _header(SOURCES)
    good = _record("S", 1, 10, [0.1, 2.0, 3.0, 4.0], SLOTS)
    bad = _record("Q", 1, 20, [0.1, 2.0, 3.0, 4.0], SLOTS)
    with pytest.raises(TraceFormatError, match=f"byte {len(head) + len(good)}"):
        parse_trace(head + good + bad)


def test_unknown_stop_reason_is_rejected() -> None:
    data = _header(SOURCES) + _record("X", 9, 10, [0.0, 0.0], SLOTS)
    with pytest.raises(TraceFormatError, match="stop reason 9"):
        parse_trace(data)


def test_nan_values_survive_as_nan_in_raw_columns() -> None:
    trace = parse_trace(_small_trace())
    assert math.isnan(trace.values("gpu.busy")[3])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_after_a_header_never_crash(tail: bytes) -> None:
    """Whatever follows a valid header, the parser returns a Trace or says what is wrong."""
    try:
        trace = parse_trace(_header(SOURCES) + tail)
    except TraceFormatError:
        return
    assert trace.columns.shape[1] == 4


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["format", "version", "start_ns", "rate_hz", "record_bytes", "columns", "sources"]),
        st.one_of(st.integers(-5, 100), st.text(max_size=5), st.lists(st.integers(), max_size=3), st.none()),
    )
)
def test_random_headers_are_rejected_cleanly(over: dict[str, object]) -> None:
    """A header the parser accepts must be usable: every source's values can be read."""
    try:
        trace = parse_trace(_header(SOURCES, **over) + _record("S", 0, 1, [1.0, 2.0, 3.0, 4.0], SLOTS))
    except TraceFormatError:
        return
    for name in trace.source_names:
        assert trace.values(name).shape[0] == trace.sample_t_ns.size
