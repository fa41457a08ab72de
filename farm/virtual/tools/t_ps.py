"""ps, toybox-like: `ps` (this session), `ps -A|-e` (all), `-p PID[,PID]`, `-o FIELD,...`, `-T`."""

from __future__ import annotations

import os
import sys

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
USERS = {0: "root", 2000: "shell"}
DEFAULT_FIELDS: tuple[str, ...] = ("USER", "PID", "PPID", "VSZ", "RSS", "WCHAN", "ADDR", "S", "NAME")
WIDTHS = {"USER": -10, "PID": 5, "PPID": 6, "VSZ": 8, "RSS": 6, "WCHAN": 7, "ADDR": 5, "S": 1, "TID": 5}


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _proc(pid: str) -> dict[str, str] | None:
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    uid = 0
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("Uid:"):
            uid = int(line.split()[1])
    args = _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip() or f"[{name}]"
    return {
        "USER": USERS.get(uid, str(uid)),
        "PID": pid,
        "PPID": fields[1],
        "S": fields[0],
        "SID": fields[3],
        "VSZ": str(int(fields[20]) // 1024),
        "RSS": str(int(fields[21]) * PAGE_KB),
        "WCHAN": "0",
        "ADDR": "0",
        "NAME": name,
        "CMD": name,
        "COMM": name,
        "ARGS": args,
        "CMDLINE": args,
    }


def _fmt(fields: tuple[str, ...], row: dict[str, str]) -> str:
    out = []
    for f in fields:
        w = WIDTHS.get(f)
        v = row.get(f, "?")
        out.append(v if w is None else (f"{v:<{-w}}" if w < 0 else f"{v:>{w}}"))
    return " ".join(out).rstrip()


def ps(args: list[str]) -> int:
    all_procs = False
    pids: set[str] | None = None
    fields = DEFAULT_FIELDS
    it = iter(args)
    for a in it:
        if a in ("-A", "-e"):
            all_procs = True
        elif a == "-p":
            pids = set(next(it, "").split(","))
        elif a == "-o":
            fields = tuple(f.upper().split("=")[0] for f in next(it, "").split(","))
        elif a.startswith("-"):
            continue
        else:
            pids = (pids or set()) | {a}
    my_sid = str(os.getsid(0))
    rows = []
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        row = _proc(pid)
        if row is None:
            continue
        if pids is not None:
            if pid not in pids:
                continue
        elif not all_procs and row["SID"] != my_sid:
            continue
        rows.append(row)
    sys.stdout.write(_fmt(fields, {f: f for f in fields}) + "\n")
    for row in rows:
        sys.stdout.write(_fmt(fields, row) + "\n")
    return 0 if rows or pids is None else 1
