"""This host's calibration for socspeed.py: one host core's GEMM speed in C and through PoCL,
measured by native/vphone-calib on one CPU, cached per host.

The cache is one JSON file (VPHONE_CACHE_DIR, else $XDG_CACHE_HOME/vphone, else ~/.cache/vphone)
keyed by what makes the numbers differ: the CPU model, the usable CPUs, the PoCL library and the
calibration program. A measurement takes about a second; `vphone up` does it before the daemon
starts (so its phones find it cached) and says what it measured.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from vphone import keepwarm
from vphone.errors import EnvironmentProblem
from vphone.layout import native_binary
from vphone.profile import Profile
from vphone.socspeed import HostCalibration, SpeedPlan, legacy_plan, plan_speeds, soc_speeds_enabled

log = logging.getLogger(__name__)

CACHE_FILE = "host-calibration.json"
CALIB_TIMEOUT_S = 120.0  # PoCL compiles the kernel with LLVM on a cold cache: seconds on a busy host
POCL_LIBRARIES = ("/usr/lib/x86_64-linux-gnu/libpocl.so.2", "/usr/lib/aarch64-linux-gnu/libpocl.so.2")

# How long the host's idle time is measured when a phone starts: a few scheduler ticks of every
# core, short enough for a phone's start.
FREE_WINDOW_S = 0.3

_lock = threading.Lock()
_memo: dict[str, HostCalibration] = {}


class CalibrationFailed(EnvironmentProblem):
    """vphone-calib did not run or said nothing usable."""


def cache_dir() -> Path:
    explicit = os.environ.get("VPHONE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "vphone"


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:absent"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def host_key(program: Path) -> str:
    """What the calibration depends on, hashed: CPU model, usable CPUs, PoCL, the program."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    cpus = sorted(os.sched_getaffinity(0))
    parts = [model, ",".join(map(str, cpus)), _stamp(program), *(_stamp(Path(p)) for p in POCL_LIBRARIES)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def parse_calibration(text: str, host_cores: int) -> HostCalibration:
    """vphone-calib's JSON line -> HostCalibration; CalibrationFailed when it is not one."""
    try:
        data = json.loads(text.strip().splitlines()[-1])
        c_gflops, pocl_gflops = float(data["c_gflops"]), float(data["pocl_gflops"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise CalibrationFailed(f"vphone-calib printed no calibration ({exc}): {text[-200:]!r}") from None
    if c_gflops <= 0:
        raise CalibrationFailed(f"vphone-calib measured no C speed: {text.strip()[-200:]!r}")
    if pocl_gflops <= 0:
        why = data.get("pocl_error")
        log.warning("calibration: PoCL did not run (%s): the GPU is scaled by the C loop", why)
    return HostCalibration(host_cores=host_cores, c_gflops=c_gflops, pocl_gflops=pocl_gflops)


def measure(program: Path, host_cores: int) -> HostCalibration:
    """Run vphone-calib on one usable CPU with one PoCL worker."""
    cpu = min(os.sched_getaffinity(0))
    env = {**os.environ, "POCL_MAX_PTHREAD_COUNT": "1"}
    try:
        done = subprocess.run(
            ["taskset", "-c", str(cpu), str(program)],
            capture_output=True,
            text=True,
            env=env,
            timeout=CALIB_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CalibrationFailed(f"cannot run {program}: {exc}") from None
    if done.returncode != 0:
        raise CalibrationFailed(f"{program} exited {done.returncode}: {done.stderr.strip()[-200:]}")
    return parse_calibration(done.stdout, host_cores)


def host_calibration() -> HostCalibration:
    """The cached calibration of this host, measured now when there is none (or it is stale)."""
    program = native_binary("vphone-calib")
    key = host_key(program)
    with _lock:
        if key in _memo:
            return _memo[key]
        host_cores = len(os.sched_getaffinity(0))
        path = cache_dir() / CACHE_FILE
        calib = _read_cache(path, key, host_cores)
        if calib is None:
            calib = measure(program, host_cores)
            log.info(
                "calibrated this host: %.3g GFLOP/s per core in C, %.3g through PoCL (%d cores)",
                calib.c_gflops,
                calib.pocl_gflops,
                host_cores,
            )
            _write_cache(path, key, calib)
        _memo[key] = calib
        return calib


def _read_cache(path: Path, key: str, host_cores: int) -> HostCalibration | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") != key:
            return None
        return HostCalibration(host_cores, float(data["c_gflops"]), float(data["pocl_gflops"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_cache(path: Path, key: str, calib: HostCalibration) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(
            json.dumps({"key": key, "c_gflops": calib.c_gflops, "pocl_gflops": calib.pocl_gflops}) + "\n",
            encoding="utf-8",
        )
        tmp.replace(path)
    except OSError as exc:
        log.warning("cannot cache the host calibration in %s: %s", path, exc)


def idle_cores(before: str, after: str, cpus: Iterable[int], spun_jiffies: int = 0) -> float:
    """Host cores idle between two readings of /proc/stat (idle + iowait jiffies of each of
    `cpus` over all its jiffies), e.g. 1.3 of 2; `spun_jiffies` of keep-warm spinners in between
    (keepwarm.py: they run only when nothing else wants the CPU) count as idle."""

    def per_cpu(text: str) -> dict[int, tuple[int, int]]:
        found = {}
        for line in text.splitlines():
            name, _, rest = line.partition(" ")
            if name.startswith("cpu") and name[3:].isdigit():
                ticks = [int(x) for x in rest.split()]
                found[int(name[3:])] = (sum(ticks[3:5]), sum(ticks[:8]))  # to steal, not guest
        return found

    old, new = per_cpu(before), per_cpu(after)
    idle = 0.0
    spans = []
    for cpu in cpus:
        if cpu in old and cpu in new and new[cpu][1] > old[cpu][1]:
            idle += (new[cpu][0] - old[cpu][0]) / (new[cpu][1] - old[cpu][1])
            spans.append(new[cpu][1] - old[cpu][1])
    if spans:
        idle = min(float(len(spans)), idle + spun_jiffies / (sum(spans) / len(spans)))
    return idle


def free_host_cores(window_s: float = FREE_WINDOW_S) -> float | None:
    """The usable host cores idle over the last `window_s` (None: /proc/stat unreadable)."""
    try:
        spun_before = keepwarm.SPINNERS.cpu_jiffies()
        before = Path("/proc/stat").read_text(encoding="ascii")
        time.sleep(window_s)
        after = Path("/proc/stat").read_text(encoding="ascii")
        spun = keepwarm.SPINNERS.cpu_jiffies() - spun_before
    except OSError:
        return None
    return idle_cores(before, after, os.sched_getaffinity(0), max(0, spun))


def with_free_cores(calib: HostCalibration) -> HostCalibration:
    """The calibration with the host cores free now: a phone names the ratios whose parts need
    more (socspeed._short_of_free_cores)."""
    free = free_host_cores()
    if free is not None:
        log.info("%.2g of %d host cores free at start-up", free, calib.host_cores)
    return replace(calib, free_cores=free)


def speed_plans(profiles: list[Profile]) -> tuple[list[SpeedPlan], list[str]]:
    """Each phone's speed plan on this host and what `vphone up` says about them: the ratios
    this host cannot hold, or why there are no proportions (one line each)."""
    if not soc_speeds_enabled(os.environ) or not any(p.throughput is not None for p in profiles):
        return [legacy_plan(p) for p in profiles], []
    try:
        calib = host_calibration()
    except EnvironmentProblem as exc:
        return [legacy_plan(p) for p in profiles], [f"no SoC proportions (profiles' own CPU budgets): {exc}"]
    calib = with_free_cores(calib)
    plans = [plan_speeds(p, calib) for p in profiles]
    lines: list[str] = []
    for profile, plan in zip(profiles, plans, strict=True):
        lines.extend(u.line(profile.name) for u in plan.unheld)
    return plans, list(dict.fromkeys(lines))
