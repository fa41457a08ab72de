"""Cold starts: a run's files dropped from the phone's page cache before its program starts, with
proof (pure).

An external program that lists `benchmark.cold_files` (a language model: `cold_files:
["{model}"]`) reads them cold: just before the program starts, the run script runs
device_agents' farm-pagecache, which counts each file's resident pages (mincore over a mapping of
it), drops them (fdatasync, then posix_fadvise POSIX_FADV_DONTNEED: any process that can open the
file may, no root) and counts again; after the program ends it counts once more. Its lines:

    pages=724 resident=724 drop=ok resident_after=0 counts=cache path=/data/local/tmp/farm/assets/ab12.gguf
    pages=724 resident=724 drop=- resident_after=- counts=cache path=...   (a count only: at the end)
    error=EACCES at=open path=...

come back in the script's `pagecache` (at the drop) and `pagecache-end` blocks:

    report = PageCacheReport(parse_residency(drop_lines), parse_residency(end_lines))
    report.cold_reason()     # None: every file was out of the cache when the program started

`counts=own-mappings`: the kernel (Linux >= 5.0) tells a caller that neither owns nor may write
the file only about its own mapped pages, so a zero proves nothing (a model farm pushed is the
shell user's own file). A drop does not always take: DONTNEED keeps pages some other process has
mapped, and a file system may keep its pages whatever the advice (tmpfs). So the load that
follows counts as cold only when every file's residency after the drop is at most
COLD_RESIDENT_MAX_FRACTION of its pages; otherwise the cold figure is kept, flagged invalid, with
this module's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from farm.analysis.llm import COLD_LOAD_METRIC, FIRST_LOAD_METRIC
from farm.metric import Metric

# "Out of the page cache": at most 1% of a file's pages resident after the drop (a page or two of
# a large file that something touched between the drop and its count is no warm load).
COLD_RESIDENT_MAX_FRACTION = 0.01
DROP_BLOCK = "pagecache"
END_BLOCK = "pagecache-end"
COLD_VALID_METRIC = "cold_start_valid"


@dataclass(frozen=True)
class FileResidency:
    """One file as farm-pagecache saw it: its pages and how many were resident, before and (when
    it dropped them) after the drop; or the step that failed (`error`: errno name at step)."""

    path: str
    pages: int | None = None
    resident: int | None = None
    dropped: bool = False
    resident_after: int | None = None
    error: str | None = None
    cache_counted: bool = True  # False: the counts may be only the agent's own mappings (none)

    def to_json(self) -> dict[str, object]:
        document: dict[str, object] = {"path": self.path, "pages": self.pages, "resident": self.resident}
        if self.dropped:
            document["resident_after_drop"] = self.resident_after
        if self.error is not None:
            document["error"] = self.error
        elif not self.cache_counted:
            document["counts"] = "own-mappings"
        return document


def _fields(line: str) -> tuple[dict[str, str], str] | None:
    head, marker, path = line.partition(" path=")
    if not marker and line.startswith("path="):
        head, path = "", line[len("path=") :]
    elif not marker:
        return None
    pairs = dict(part.partition("=")[::2] for part in head.split())
    return pairs, path


def _count(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def parse_residency(lines: Sequence[str]) -> tuple[FileResidency, ...]:
    """farm-pagecache's lines (the module docstring); lines that are not its own are passed over
    (a shell's error about the agent itself leaves the files unreported: no proof)."""
    files: list[FileResidency] = []
    for line in lines:
        parsed = _fields(line.strip())
        if parsed is None:
            continue
        pairs, path = parsed
        if "error" in pairs:
            files.append(FileResidency(path, error=f"{pairs['error']} at {pairs.get('at', '?')}"))
            continue
        files.append(
            FileResidency(
                path,
                pages=_count(pairs.get("pages")),
                resident=_count(pairs.get("resident")),
                dropped=pairs.get("drop") == "ok",
                resident_after=_count(pairs.get("resident_after")),
                cache_counted=pairs.get("counts") == "cache",
            )
        )
    return tuple(files)


@dataclass(frozen=True)
class PageCacheReport:
    """The cold files at the drop (just before the program) and when the program had ended."""

    wanted: tuple[str, ...]  # the files the experiment asked to read cold, as on the phone
    at_drop: tuple[FileResidency, ...] | None  # None: the script never got to the drop
    at_end: tuple[FileResidency, ...] | None = None

    def cold_reason(self) -> str | None:
        """Why the program's first read of its cold files was not cold (None: it was)."""
        if self.at_drop is None:
            return "the page cache was not dropped (the run ended before its program started)"
        seen = {f.path: f for f in self.at_drop}
        for path in self.wanted:
            found = seen.get(path)
            if found is None:
                return f"farm-pagecache did not report {path} (is the agent deployed?)"
            if found.error is not None:
                return f"farm-pagecache could not drop {path}: {found.error}"
            if not found.dropped or found.resident_after is None or found.pages is None:
                return f"farm-pagecache did not drop {path}"
            if not found.cache_counted:
                return (
                    f"the page count of {path} proves nothing: the shell user neither owns nor may "
                    "write it, so the kernel's mincore reports only the caller's own mappings"
                )
            if found.resident_after > found.pages * COLD_RESIDENT_MAX_FRACTION:
                return (
                    f"{found.resident_after} of {found.pages} pages of {path} still in the page cache "
                    "after the drop (mapped by another process, or a file system that keeps its "
                    "pages, such as tmpfs)"
                )
        return None

    def resident_fraction_after_drop(self) -> float | None:
        """Resident pages after the drop over all the cold files' pages (None: not measured)."""
        if self.at_drop is None:
            return None
        counted = [f for f in self.at_drop if f.pages is not None and f.resident_after is not None]
        pages = sum(f.pages or 0 for f in counted)
        if not counted or pages == 0:
            return None
        return sum(f.resident_after or 0 for f in counted) / pages

    def to_json(self) -> dict[str, object]:
        reason = self.cold_reason()
        return {
            "files": list(self.wanted),
            "at_drop": [f.to_json() for f in self.at_drop] if self.at_drop is not None else None,
            "at_end": [f.to_json() for f in self.at_end] if self.at_end is not None else None,
            "cold": reason is None,
            "not_cold_because": reason,
        }


def cold_start_metrics(report: PageCacheReport | None, computed: Mapping[str, float]) -> list[Metric]:
    """A cold-start run's flag (`cold_start_valid`: every cold file was out of the page cache when
    the program started), the residency left after the drop, and a language model's first load
    (farm.analysis.llm `model_load_ms`) as its cold load, kept also when the flag is 0 (env.json
    `page_cache.not_cold_because` says why)."""
    if report is None:
        return []
    metrics = [Metric(COLD_VALID_METRIC, float(report.cold_reason() is None), "bool")]
    fraction = report.resident_fraction_after_drop()
    if fraction is not None:
        metrics.append(Metric("cold_resident_after_drop_pct", 100.0 * fraction, "%"))
    first_load_ms = computed.get(FIRST_LOAD_METRIC)
    if first_load_ms is not None:
        metrics.append(Metric(COLD_LOAD_METRIC, first_load_ms, "ms"))
    return metrics


def page_cache_of(
    wanted: Sequence[str], drop_lines: Sequence[str] | None, end_lines: Sequence[str] | None
) -> PageCacheReport:
    """The report of a run from the script's two blocks (None: the block never came)."""
    return PageCacheReport(
        tuple(wanted),
        parse_residency(drop_lines) if drop_lines is not None else None,
        parse_residency(end_lines) if end_lines is not None else None,
    )


__all__ = [
    "COLD_RESIDENT_MAX_FRACTION",
    "COLD_VALID_METRIC",
    "DROP_BLOCK",
    "END_BLOCK",
    "FileResidency",
    "PageCacheReport",
    "cold_start_metrics",
    "page_cache_of",
    "parse_residency",
]
