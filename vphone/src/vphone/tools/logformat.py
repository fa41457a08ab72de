"""logcat's line formats, as liblog prints them (system/logging/liblog/logprint.cpp,
android_log_formatLogLine): one style (-v brief|long|process|raw|tag|thread|threadtime|time)
and any number of modifiers (-v epoch|monotonic|usec|nsec|year|zone|UTC|uid|printable|color...).

The header of each style, quoted from logprint.cpp:
  brief       "%c/%-8.*s(%s%5d): "          priority/tag(pid)
  time        "%s %c/%-8.*s(%s%5d): "       stamp priority/tag(pid)
  threadtime  "%s %s%5d %5d %c %-8.*s: "    stamp pid tid priority tag
  tag         "%c/%-8.*s: "
  process     "%c(%s%5d) " ... "  (%.*s)"   the tag after the message
  thread      "%c(%s%5d:%5d) "
  long        "[ %s %s%5d:%5d %c/%-8.*s ]\\n" message "\\n\\n"
  raw         the message only
The stamp is strftime("%m-%d %H:%M:%S") (with `year` "%Y-%m-%d ...") and ".%03ld" ms (`usec`:
".%06ld", `nsec`: ".%09ld"); `epoch` prints the seconds as "%19lld", `monotonic` the seconds since
boot as "%6lld"; `zone` appends " %z". Each line of a message gets the header.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

STYLES = ("brief", "long", "process", "raw", "tag", "thread", "threadtime", "time")
MODIFIERS = {
    "epoch": "epoch",
    "monotonic": "monotonic",
    "usec": "usec",
    "nsec": "nsec",
    "year": "year",
    "zone": "zone",
    "UTC": "utc",
    "uid": "uid",
    # accepted, no effect on farm's logs (all printable, no colours on a pipe, no event tags)
    "printable": "",
    "color": "",
    "colour": "",
    "descriptive": "",
}
SEPARATORS = re.compile(r"[ ,:;\t\f\r\n]+")  # logcat splits a -v argument on these


@dataclass(frozen=True)
class Format:
    style: str = "threadtime"
    epoch: bool = False
    monotonic: bool = False
    usec: bool = False
    nsec: bool = False
    year: bool = False
    zone: bool = False
    utc: bool = False
    uid: bool = False


@dataclass(frozen=True)
class Entry:
    t_ns: int  # wall clock (CLOCK_REALTIME) of the entry
    pid: int
    tid: int
    priority: str
    tag: str
    message: str


def with_words(fmt: Format, argument: str) -> Format | None:
    """fmt after one -v ARGUMENT (several words allowed), or None for a word logcat refuses."""
    for word in (w for w in SEPARATORS.split(argument) if w):
        if word in STYLES:
            fmt = replace(fmt, style=word)
        elif word in MODIFIERS:
            if MODIFIERS[word]:
                flags: dict[str, bool] = {MODIFIERS[word]: True}
                fmt = replace(fmt, **flags)  # type: ignore[arg-type]
        else:
            return None
    return fmt


def _stamp(fmt: Format, t_ns: int, boot_ns: int) -> str:
    if fmt.monotonic:
        t_ns = max(0, t_ns - boot_ns)
    seconds, ns = divmod(t_ns, 1_000_000_000)
    tm = time.gmtime(seconds) if fmt.utc else time.localtime(seconds)
    if fmt.epoch or fmt.monotonic:
        text = f"{seconds:6d}" if fmt.monotonic else f"{seconds:19d}"
    else:
        text = time.strftime("%Y-%m-%d %H:%M:%S" if fmt.year else "%m-%d %H:%M:%S", tm)
    if fmt.nsec:
        text += f".{ns:09d}"
    elif fmt.usec:
        text += f".{ns // 1000:06d}"
    else:
        text += f".{ns // 1_000_000:03d}"
    if fmt.zone and not (fmt.epoch or fmt.monotonic):
        text += " " + time.strftime("%z", tm)
    return text


def render(fmt: Format, entry: Entry, *, uid: int | None, boot_ns: int) -> str:
    """The bytes logcat writes for one entry (every line ends in a newline)."""
    stamp = _stamp(fmt, entry.t_ns, boot_ns)
    owner = ""
    if fmt.uid:
        owner = f"{uid:5d}:" if uid is not None else "      "
    p, tag, pid, tid = entry.priority, entry.tag, entry.pid, entry.tid
    if fmt.style == "long":
        return f"[ {stamp} {owner}{pid:5d}:{tid:5d} {p}/{tag:<8} ]\n{entry.message}\n\n"
    suffix = "\n"
    if fmt.style == "tag":
        prefix = f"{p}/{tag:<8}: "
    elif fmt.style == "process":
        prefix, suffix = f"{p}({owner}{pid:5d}) ", f"  ({tag})\n"
    elif fmt.style == "thread":
        prefix = f"{p}({owner}{pid:5d}:{tid:5d}) "
    elif fmt.style == "raw":
        prefix = ""
    elif fmt.style == "time":
        prefix = f"{stamp} {p}/{tag:<8}({owner}{pid:5d}): "
    elif fmt.style == "threadtime":
        prefix = f"{stamp} {owner.replace(':', ' ')}{pid:5d} {tid:5d} {p} {tag:<8}: "
    else:
        prefix = f"{p}/{tag:<8}({owner}{pid:5d}): "
    return "".join(f"{prefix}{line}{suffix}" for line in entry.message.split("\n"))


def since_ns(value: str, now_ns: int) -> int | None:
    """logcat -t/-T TIME: 'MM-DD hh:mm:ss.mmm', 'YYYY-MM-DD hh:mm:ss.mmm' (local time) or
    'sssss.mmm' (epoch seconds); None when VALUE is not a time."""
    if re.fullmatch(r"\d+\.\d+", value):
        whole, frac = value.split(".")
        return int(whole) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])
    match = re.fullmatch(r"(?:(\d{4})-)?(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?", value)
    if not match:
        return None
    year = int(match[1]) if match[1] else time.localtime(now_ns // 1_000_000_000).tm_year
    fields = (year, int(match[2]), int(match[3]), int(match[4]), int(match[5]), int(match[6]), 0, 0, -1)
    seconds = int(time.mktime(fields))
    return seconds * 1_000_000_000 + int((match[7] or "0").ljust(9, "0")[:9])
