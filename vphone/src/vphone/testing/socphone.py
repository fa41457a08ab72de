"""Helpers for the SoC tests: a phone of a (possibly re-budgeted) profile, programs pushed into
it, root shells, and waiting for the phone's own files to show an event (never a bare sleep)."""

from __future__ import annotations

import json
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vphone.profile import Profile
from vphone.profiles import load_profile
from vphone.testing.waiting import eventually
from vphone.world import SandboxWorld
from vphone.worldthread import WorldThread

# The repository's benchmark programs (vphone/src/vphone/testing -> the checkout root).
KERNELS = Path(__file__).resolve().parents[4] / "kernels"
DEADLINE_S = 60.0


def budgeted(
    name: str, *, cpu: float | None = None, gpu: float | None = None, pids_max: int | None = None
) -> Profile:
    """A shipped profile with its own CPU / GPU budgets instead of its SoC's proportions (the
    throughput block dropped, as a profile copy without one), other budgets or pids limit."""
    p = load_profile(name).model_copy(update={"throughput": None})
    if cpu is not None:
        p = p.model_copy(update={"cpu": p.cpu.model_copy(update={"budget_cores": cpu})})
    if gpu is not None and p.gpu is not None:
        p = p.model_copy(update={"gpu": p.gpu.model_copy(update={"budget_cores": gpu})})
    if pids_max is not None:
        p = p.model_copy(update={"cgroups": p.cgroups.model_copy(update={"pids_max": pids_max})})
    return p


def phone(profile: Profile, serial: str, state_dir: Path) -> WorldThread:
    return WorldThread(SandboxWorld(profile, serial, state_dir / serial))


def kernel_binary(name: str) -> Path:
    target = f"build/{platform.machine()}/{name}"
    subprocess.run(["make", "-s", "-C", str(KERNELS), target], check=True, capture_output=True, timeout=600)
    return KERNELS / target


def install(w: WorldThread, binary: Path, name: str | None = None) -> str:
    """As adb push does: the phone's shell creates /data/local/tmp/NAME (0755) through the sync
    file service; returns its phone path."""
    phone_path = f"/data/local/tmp/{name or binary.name}"
    files = w.call(w.world.open_files())
    try:
        fd = files.create(phone_path, 0o755)
        with open(fd, "wb") as dest:
            dest.write(binary.read_bytes())
    finally:
        files.close()
    return phone_path


def su(w: WorldThread, command: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    return w.sh(f"su -c {_quote(command)}", timeout_s=timeout_s)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def read(w: WorldThread, phone_path: str) -> str:
    result = w.sh(f"cat {phone_path}")
    assert result.returncode == 0, result.stderr
    return result.stdout


def wait_until(predicate: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> float:
    """`eventually`, failing with what was awaited; returns the seconds it took."""
    start = time.monotonic()
    assert eventually(predicate, deadline_s), f"timed out after {deadline_s:.0f} s waiting for {what}"
    return time.monotonic() - start


@dataclass(frozen=True)
class KernelTimes:
    iterations: int
    window_s: float  # first t_start to last t_end, on the kernel's own clock

    @property
    def per_iteration_s(self) -> float:
        return self.window_s / self.iterations


def run_gemm(
    w: WorldThread, phone_path: str, *args: str, backend: str = "cpu", timeout_s: float = 120.0
) -> KernelTimes:
    """Run the gemm benchmark in the phone; its JSON iter lines give the times."""
    result = w.sh(" ".join([phone_path, f"--backend={backend}", *args]), timeout_s=timeout_s)
    assert result.returncode == 0, result.stderr
    iters = [json.loads(x) for x in result.stdout.splitlines() if '"event":"iter"' in x]
    assert iters, result.stdout
    window_ns = iters[-1]["t_end_ns"] - iters[0]["t_start_ns"]
    return KernelTimes(len(iters), window_ns / 1e9)
