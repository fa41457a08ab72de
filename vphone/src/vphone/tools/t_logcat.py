"""logcat and log: the phone's log buffers as test frameworks use them.

Buffers are files /dev/.farm/logcat/<buffer> with one entry per line,
`<epoch ns>\\t<pid>\\t<tid>\\t<priority>\\t<tag>\\t<message>`, appended by the tools (am, input,
setprop, log...) and by the world (boot, adbd's shell commands, reboot; vphone/src/vphone/ctlfiles.py).
`logcat -c` empties them; `-d` dumps and exits; without -d logcat prints and then follows until
its stream closes (adb hangs it up). Line formats and -v modifiers: logformat.py. Reading more than
one buffer, logcat marks the first entry of each with `--------- beginning of NAME`
(logcat.cpp maybePrintStart: only when dev_count_ > 1).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable

import ctlstore
import logformat

BUFFERS = ("main", "system", "crash", "events", "radio")
DEFAULT_BUFFERS = ("main", "system", "crash")
PRIORITIES = "VDIWEFS"
FOLLOW_POLL_S = 0.1
USAGE = (
    "Usage: logcat [options] [filterspecs]\n\nGeneral options:\n"
    "  -b, --buffer=<buffer>       Request alternate ring buffer(s): main system radio events crash all\n"
    "  -c, --clear                 Clear (flush) the entire log and exit\n"
    "  -d                          Dump the log and then exit (don't block)\n"
    "  -t <count>                  Print only the most recent <count> lines (implies -d)\n"
    "  -T <count>                  Print only the most recent <count> lines (does not imply -d)\n"
    "  -s                          Set default filter to silent\n"
    "  -v, --format=<format>       Sets log print format: brief long process raw tag thread threadtime time\n"
)
# Options Android's logcat takes (those farm does not model are accepted and ignored); a value
# follows the ones marked 1. Anything else is "Unrecognized Option", as logcat's getopt says.
OPTIONS = {
    "-c": 0,
    "-d": 0,
    "-D": 0,
    "-h": 0,
    "-L": 0,
    "-g": 0,
    "-s": 0,
    "-B": 0,
    "-S": 0,
    "-Q": 0,
    "-b": 1,
    "-v": 1,
    "-t": 1,
    "-T": 1,
    "-G": 1,
    "-f": 1,
    "-r": 1,
    "-n": 1,
    "-p": 0,
    "-P": 1,
    "-m": 1,
    "-e": 1,
}
LONG_OPTIONS = (
    "--clear",
    "--buffer",
    "--format",
    "--dividers",
    "--last",
    "--pid",
    "--wrap",
    "--regex",
    "--max-count",
    "--print",
    "--uid",
    "--binary",
    "--statistics",
    "--prune",
    "--file",
    "--rotate-kbytes",
    "--rotate-count",
    "--buffer-size",
    "--id",
    "--help",
)


def _buffer_path(name: str) -> str:
    return ctlstore.path("logcat", name)


def append(tag: str, message: str, *, priority: str = "I", buffer: str = "main") -> None:
    """One log entry from a tool (the caller's pid)."""
    pid = os.getpid()
    line = f"{time.time_ns()}\t{pid}\t{pid}\t{priority}\t{tag}\t{message.replace(chr(10), ' ')}\n"
    try:
        fd = ctlstore.open_nofollow(f"logcat/{buffer}", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line)
    except OSError:
        pass


def _wanted(fields: list[str], specs: list[tuple[str, str]]) -> bool:
    if not specs:
        return True
    tag, prio = fields[4], fields[3]
    for spec_tag, spec_prio in specs:
        if spec_tag in ("*", tag):
            return spec_prio != "S" and PRIORITIES.index(prio) >= PRIORITIES.index(spec_prio)
    return True


def _parse(args: list[str]) -> tuple[dict[str, object], list[tuple[str, str]]] | None:
    opts: dict[str, object] = {
        "buffers": [],
        "format": logformat.Format(),
        "dump": False,
        "clear": False,
        "tail": None,
        "since_ns": None,
    }
    bad_format = ""

    def set_format(argument: str) -> None:
        nonlocal bad_format
        fmt = logformat.with_words(opts["format"], argument)
        if fmt is None:
            bad_format = bad_format or argument
        else:
            opts["format"] = fmt

    specs: list[tuple[str, str]] = []
    it = iter(args)
    for arg in it:
        if arg in ("-d",):
            opts["dump"] = True
        elif arg in ("-c", "--clear"):
            opts["clear"] = True
        elif arg in ("-b", "--buffer"):
            opts["buffers"].extend(next(it, "").split(","))  # type: ignore[attr-defined]
        elif arg.startswith("-b") and len(arg) > 2:
            opts["buffers"].extend(arg[2:].split(","))  # type: ignore[attr-defined]
        elif arg.startswith(("--buffer=", "--format=")):
            key, _, value = arg.partition("=")
            if key == "--buffer":
                opts["buffers"].extend(value.split(","))  # type: ignore[attr-defined]
            else:
                set_format(value)
        elif arg in ("-h", "--help"):
            opts["help"] = True
        elif arg in ("-v", "--format"):
            set_format(next(it, ""))
        elif arg.startswith("-v") and len(arg) > 2:
            set_format(arg[2:])
        elif arg == "-t" or arg == "-T":
            # a count, or a time: entries since then (logcat's -t/-T '<time>')
            value = next(it, "0")
            since = logformat.since_ns(value, time.time_ns())
            if since is not None:
                opts["since_ns"] = since
            else:
                opts["tail"] = int(value) if value.isdigit() else 0
            opts["dump"] = opts["dump"] or arg == "-t"
        elif arg in ("-s",):
            specs.append(("*", "S"))
        elif arg.startswith("--"):
            if arg.partition("=")[0] not in LONG_OPTIONS:
                sys.stderr.write(f"logcat: unrecognized option '{arg}'\n")
                return None
        elif arg.startswith("-") and len(arg) > 1:
            if arg[:2] not in OPTIONS:
                sys.stderr.write(f"logcat: invalid option -- '{arg[1]}'\n")
                return None
            if OPTIONS[arg[:2]] and len(arg) == 2:
                next(it, None)  # its value (an option farm does not model)
        else:
            tag, _, prio = arg.rpartition(":") if ":" in arg else (arg, "", "V")
            specs.insert(0, (tag, (prio or "V").upper()[:1]))
    buffers = opts["buffers"] or list(DEFAULT_BUFFERS)
    if "all" in buffers:  # type: ignore[operator]
        buffers = list(BUFFERS)
    for name in buffers:  # type: ignore[attr-defined]
        if name not in BUFFERS:
            sys.stderr.write(f"logcat: unknown buffer {name}\n")
            return None
    opts["buffers"] = buffers
    if bad_format:
        sys.stderr.write(f"logcat: unknown format {bad_format}\n")
        return None
    return opts, specs


def _read(buffers: list[str], offsets: dict[str, int]) -> list[tuple[str, list[str]]]:
    """(buffer, fields) of the entries past `offsets`, oldest first."""
    entries: list[tuple[str, list[str]]] = []
    for name in buffers:
        try:
            with open(_buffer_path(name), encoding="utf-8", errors="replace") as f:
                f.seek(offsets.get(name, 0))
                data = f.read()
                offsets[name] = f.tell()
        except OSError:
            continue
        for line in data.splitlines():
            fields = line.split("\t", 5)
            if len(fields) == 6 and fields[3] in PRIORITIES and fields[0].isdigit():
                entries.append((name, fields))
    entries.sort(key=lambda e: int(e[1][0]))
    return entries


def _boot_ns() -> int:
    """CLOCK_REALTIME at boot, for -v monotonic (the entries carry wall-clock times)."""
    return time.time_ns() - time.monotonic_ns()


def _writer(fmt: logformat.Format, buffers: list[str]) -> Callable[[str, list[str]], str]:
    started: set[str] = set()
    boot_ns = _boot_ns()

    def text(buffer: str, fields: list[str]) -> str:
        t_ns, pid, tid, prio, tag, msg = fields
        entry = logformat.Entry(int(t_ns), _int(pid), _int(tid), prio, tag, msg)
        head = ""
        if len(buffers) > 1 and buffer not in started:
            started.add(buffer)
            head = f"--------- beginning of {buffer}\n"
        return head + logformat.render(fmt, entry, uid=None, boot_ns=boot_ns)

    return text


def _int(text: str) -> int:
    return int(text) if text.lstrip("-").isdigit() else 0


def logcat(args: list[str]) -> int:
    parsed = _parse(args)
    if parsed is None:
        sys.stderr.write(USAGE)
        return 1
    opts, specs = parsed
    if opts.get("help"):
        sys.stderr.write(USAGE)
        return 0
    buffers: list[str] = opts["buffers"]  # type: ignore[assignment]
    if opts["clear"]:
        for name in buffers:
            try:
                os.close(ctlstore.open_nofollow(f"logcat/{name}", os.O_WRONLY | os.O_TRUNC | os.O_CREAT))
            except OSError as error:
                sys.stderr.write(f"failed to clear the '{name}' log: {error.strerror}\n")
                return 1
        return 0
    text = _writer(opts["format"], buffers)
    offsets: dict[str, int] = {}
    entries = [e for e in _read(buffers, offsets) if _wanted(e[1], specs)]
    if opts["since_ns"] is not None:
        entries = [e for e in entries if int(e[1][0]) >= int(opts["since_ns"])]  # type: ignore[call-overload]
    if opts["tail"] is not None:
        entries = entries[-int(opts["tail"]) :] if opts["tail"] else []  # type: ignore[call-overload]
    out = sys.stdout
    for buffer, fields in entries:
        out.write(text(buffer, fields))
    out.flush()
    if opts["dump"]:
        return 0
    while True:  # until the stream closes: init ends us when the client is hung up
        time.sleep(FOLLOW_POLL_S)
        for buffer, fields in _read(buffers, offsets):
            if _wanted(fields, specs):
                out.write(text(buffer, fields))
        out.flush()


def log(args: list[str]) -> int:
    """`log [-p PRIORITY] [-t TAG] MESSAGE...`."""
    priority, tag, words = "I", "log", []
    it = iter(args)
    for arg in it:
        if arg == "-p":
            priority = next(it, "i").upper()[:1]
        elif arg == "-t":
            tag = next(it, "log")
        else:
            words.append(arg)
    if priority not in PRIORITIES:
        sys.stderr.write(f"log: invalid priority {priority}\n")
        return 1
    append(tag, " ".join(words), priority=priority)
    return 0


# logpersist.{start,stop,cat}: userdebug and eng builds (only those ship them, layout.py) keep
# logs on /data through logcatd, switched by persist.logd.logpersistd. Mobly turns it on for
# every rootable phone when its logcat service starts. Here the buffers already survive until
# `logcat -c`, so persisting is the property a reader (and `logpersist.cat`) sees.
LOGPERSIST_PROP = "persist.logd.logpersistd"
LOGPERSIST_SERVICE = "logcatd"
LOGPERSIST_TOOLS = ("logpersist.start", "logpersist.stop", "logpersist.cat")  # layout.py links them


def _set_persist(key: str, value: str) -> None:
    for sub in ("set", "persist"):
        if value:
            ctlstore.write_text(f"props/{sub}/{key}", value)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ctlstore.path("props", sub, key))


def _persisting() -> bool:
    return ctlstore.read_text(f"props/set/{LOGPERSIST_PROP}", "") == LOGPERSIST_SERVICE


def logpersist(name: str, args: list[str]) -> int:
    if ctlstore.read_json("props/ro.json", {}).get("ro.debuggable") != "1":
        sys.stderr.write(f"{name} - Permission denied\n")
        return 1
    action = name.rpartition(".")[2]
    known = {"start": ("--size", "--buffer", "--rotate_count", "--clear"), "stop": ("--clear",), "cat": ()}
    for arg in args:
        if arg.split("=", 1)[0] not in known[action]:
            sys.stderr.write(f"{name}: unknown option {arg}\n")
            return 1
    if action == "cat":
        if not _persisting():
            return 0
        return logcat(["-b", "all", "-d", "-v", "threadtime"])
    if not ctlstore.is_root():
        sys.stderr.write(f"{name} - Permission denied (run it as root)\n")
        return 1
    if "--clear" in args:
        for buffer in BUFFERS:
            os.close(ctlstore.open_nofollow(f"logcat/{buffer}", os.O_WRONLY | os.O_TRUNC | os.O_CREAT))
    _set_persist(LOGPERSIST_PROP, LOGPERSIST_SERVICE if action == "start" else "")
    for arg in args:
        key, _, value = arg.partition("=")
        if action == "start" and key in ("--size", "--buffer") and value:
            _set_persist(f"{LOGPERSIST_PROP}.{key[2:]}", value)
    return 0
