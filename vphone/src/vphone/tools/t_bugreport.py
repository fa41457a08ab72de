"""bugreportz and bugreport: the phone's state as one report, as dumpstate writes it.

Test frameworks take a bug report when a test fails (Mobly's take_bug_report, `adb bugreport`),
so a phone that has none breaks their failure path. Android 7+ answers `bugreportz`:
  bugreportz -v   its version, on stderr (adb's client reads it there);
  bugreportz -p   progress lines on stdout: BEGIN:<zip>, PROGRESS:<done>/<total>, then OK:<zip>;
  bugreportz      just the last line, OK:<zip> (or FAIL:<reason>).
The zip sits in /bugreports (shell's /data/user_de/0/com.android.shell/files/bugreports) and
holds the dumpstate text bugreport-<product>-<build id>-<time>.txt, main_entry.txt naming it and
version.txt. `bugreport` prints the same text to stdout (the pre-7 plain-text report adb falls
back to). The text has dumpstate's header and `------ TITLE (command) ------` sections: uptime,
memory, processes, CPU clocks, thermal zones, system properties, logs, and the services' dumps.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable

import t_dumpsys
import t_logcat
import t_props

VERSION = "1.2"
FORMAT_VERSION = "2.0"
BUGREPORT_DIR = "/bugreports"
COMMAND_TIMEOUT_S = 20.0
USAGE = (
    "usage: bugreportz [-hpsv]\n"
    "  -h: to display this help message\n"
    "  -p: display progress\n"
    "  -s: stream content to standard output\n"
    "  -v: to display the version\n"
    "  or no arguments to generate a zipped bugreport\n"
)


def _captured(tool: Callable[[list[str]], int], args: list[str]) -> str:
    """What one of the phone's own tools prints, run in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            tool(args)
        except Exception as error:  # a report must not fail on one section
            out.write(f"*** {error}\n")
    return out.getvalue()


def _run(command: str) -> str:
    """A toybox command's output, as dumpstate runs them (with a timeout of its own)."""
    try:
        proc = subprocess.run(
            ["/system/bin/sh", "-c", command],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"*** command '{command}' timed out after {COMMAND_TIMEOUT_S:.0f}s (killed)\n"
    except OSError as error:
        return f"*** command '{command}' failed: {error.strerror}\n"
    return proc.stdout + proc.stderr


def _file(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as error:
        return f"*** {path}: {error.strerror}\n"


def _section(title: str, source: str, body: str) -> str:
    ending = "" if body.endswith("\n") or not body else "\n"
    return f"------ {title} ({source}) ------\n{body}{ending}\n"


def _header(props: dict[str, str], started: float, args: list[str]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
    bar = "=" * 56
    kernel = _file("/proc/version").strip()
    uptime_s = float(_file("/proc/uptime").split()[0] or 0) if os.path.exists("/proc/uptime") else 0.0
    return (
        f"{bar}\n== dumpstate: {stamp}\n{bar}\n\n"
        f"Build: {props.get('ro.build.display.id', '')}\n"
        f"Build fingerprint: '{props.get('ro.build.fingerprint', '')}'\n"
        f"Bootloader: {props.get('ro.bootloader', 'unknown')}\n"
        f"Radio: {props.get('gsm.version.baseband', '')}\n"
        f"Network: {props.get('gsm.operator.alpha', '')}\n"
        f"Kernel: {kernel}\n"
        f"Command line: {_file('/proc/cmdline').strip()}\n"
        f"Uptime: up {int(uptime_s // 3600)} hours, {int(uptime_s % 3600 // 60)} minutes\n"
        f"Bugreport format version: {FORMAT_VERSION}\n"
        f"Dumpstate info: id=1 pid={os.getpid()} dry_run=0 parallel_run=0 args={' '.join(args)} "
        "bugreport_mode=\n\n"
    )


def _sections() -> list[Callable[[], str]]:
    """Each section as a thunk, so that progress can be counted."""
    cpu = "/sys/devices/system/cpu"
    clocks = (
        f"for f in {cpu}/cpufreq/policy*/scaling_cur_freq {cpu}/cpufreq/policy*/scaling_governor; "
        'do echo "$f: $(cat $f)"; done'
    )
    thermal = 'for z in /sys/class/thermal/thermal_zone*; do echo "$(cat $z/type) $(cat $z/temp)"; done'
    sections: list[Callable[[], str]] = [
        lambda: _section("UPTIME", "uptime", _run("uptime")),
        lambda: _section("MEMORY INFO", "/proc/meminfo", _file("/proc/meminfo")),
        lambda: _section("CPU INFO", "/proc/cpuinfo", _file("/proc/cpuinfo")),
        lambda: _section("PROCESSES AND THREADS", "ps -A -T", _run("ps -A -T")),
        lambda: _section("CPU FREQUENCIES", clocks, _run(clocks)),
        lambda: _section("THERMAL ZONES", thermal, _run(thermal)),
        lambda: _section("SYSTEM PROPERTIES", "getprop", _captured(t_props.getprop, [])),
        lambda: _section(
            "SYSTEM LOG",
            "logcat -v threadtime -d *:v",
            _captured(t_logcat.logcat, ["-v", "threadtime", "-d"]),
        ),
        lambda: _section(
            "EVENT LOG",
            "logcat -b events -v threadtime -d *:v",
            _captured(t_logcat.logcat, ["-b", "events", "-v", "threadtime", "-d"]),
        ),
    ]
    sections += [functools.partial(_service_dump, service) for service in t_dumpsys.services()]
    return sections


def _service_dump(service: str) -> str:
    return f"{'-' * 77}\nDUMP OF SERVICE {service}:\n{_captured(t_dumpsys.dumpsys, [service])}\n"


def report_text(args: list[str], progress: Callable[[int, int], None] | None = None) -> str:
    started = time.time()
    props = t_props.all_props()
    parts = [_header(props, started, args)]
    sections = _sections()
    for done, section in enumerate(sections, start=1):
        parts.append(section())
        if progress is not None:
            progress(done, len(sections))
    parts.append("== dumpstate: done (id 1)\n")
    return "".join(parts)


def _zip_name(props: dict[str, str]) -> str:
    product = props.get("ro.build.product") or props.get("ro.product.device", "phone")
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S")
    return f"bugreport-{product}-{props.get('ro.build.id', 'UNKNOWN')}-{stamp}"


def bugreportz(args: list[str]) -> int:
    flags = set()
    for arg in args:
        if not (arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= set("hpsv")):
            sys.stderr.write(USAGE)
            return 1
        flags |= set(arg[1:])
    if "h" in flags:
        sys.stderr.write(USAGE)
        return 0
    if "v" in flags:
        sys.stderr.write(f"{VERSION}\n")
        return 0
    if "s" in flags:
        sys.stdout.write(report_text(["-s"]))
        return 0
    name = _zip_name(t_props.all_props())
    path = f"{BUGREPORT_DIR}/{name}.zip"
    out = sys.stdout
    verbose = "p" in flags
    if verbose:
        out.write(f"BEGIN:{path}\n")
        out.flush()

    def progress(done: int, total: int) -> None:
        if verbose:
            out.write(f"PROGRESS:{done}/{total}\n")
            out.flush()

    text = report_text(["-z", *(["-p"] if verbose else [])], progress)
    try:
        with zipfile.ZipFile(f"{path}.tmp", "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(f"{name}.txt", text)
            archive.writestr("main_entry.txt", f"{name}.txt")
            archive.writestr("version.txt", FORMAT_VERSION)
        os.replace(f"{path}.tmp", path)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(f"{path}.tmp")
        out.write(f"FAIL:Could not write {path}: {error.strerror}\n")
        return 1
    out.write(f"OK:{path}\n")
    return 0


def bugreport(args: list[str]) -> int:
    """The plain-text report on stdout."""
    sys.stdout.write(report_text(args))
    return 0
