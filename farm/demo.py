"""`make demo`: try farm end to end on this machine, with virtual phones.

Starts a private adb server and four virtual phones of different SoC profiles, runs the quick
variant of experiments/lstm_gpu_load.yaml on them (LSTM inference on cpu / cpu-mt / gpu under
background GPU load), writes the report and prints where it is. The phones and the adb server are
stopped afterwards unless --keep-phones is given. Every step is a real `farm` command, so the
printed commands are the ones a researcher types.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

DEMO_ADB_PORT = 5137
# Two rooted lab phones (charging can be stopped, fast fuel gauge), an old rooted phone with a
# slow gauge and a production Pixel whose charging cannot be stopped: the report shows what each
# of these means for power measurement.
DEMO_PROFILES = ("adreno-sd865", "mali-tensor", "adreno-nexus6p", "adreno-sd865")
EXPERIMENT = Path(__file__).resolve().parents[1] / "experiments" / "lstm_gpu_load.yaml"
VARIANT = "quick"
ADB_TIMEOUT_S = 30.0


class DemoFailed(Exception):
    """A demo step failed; its message names the step and what to look at."""


class DemoStopped(Exception):
    """SIGTERM reached the demo (a timeout, `kill`): it stops its phones and adb server, then exits."""


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM (a process group signalled twice) must not cut the clean-up short; the
    # clean-up commands inherit the ignore, so they finish too.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise DemoStopped(f"stopped by signal {signal.Signals(signum).name}; its phones were stopped")


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into an exception, so the `finally` that stops the phones runs.

    The phone daemon and the adb server are detached (own session), so killing the demo alone
    would leave them running."""
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _step(title: str, argv: list[str], env: dict[str, str], *, allowed_codes: tuple[int, ...] = (0,)) -> int:
    print(f"\n== {title}\n$ {shlex.join(argv)}", flush=True)
    code = subprocess.call(argv, env=env)
    if code not in allowed_codes:
        raise DemoFailed(f"{title} failed (exit {code}); the command above shows what to rerun")
    return code


def _farm(*args: str) -> list[str]:
    return [sys.executable, "-m", "farm", *args]


def run_demo(results_dir: Path, keep_phones: bool, adb_port: int, state_dir: Path) -> Path:
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(adb_port), FARM_RESULTS=str(results_dir))
    env["FARM_VIRTUAL_DIR"] = str(state_dir)
    subprocess.run(["adb", "-P", str(adb_port), "start-server"], check=True, timeout=ADB_TIMEOUT_S)
    try:
        _step(
            "stop phones left over from an earlier demo",
            _farm("virtual", "down"),
            env,
            allowed_codes=(0, 1, 2),
        )
        profile_args = [arg for name in DEMO_PROFILES for arg in ("--profile", name)]
        _step(
            "start 4 virtual phones",
            _farm("virtual", "up", "--count", str(len(DEMO_PROFILES)), *profile_args),
            env,
        )
        _step("the phones farm sees", _farm("devices"), env)
        # Exit 1 means some runs failed: the report still gets written and says which and why.
        _step(
            "run the MobiRNN study (quick variant)",
            _farm("run", str(EXPERIMENT), "--variant", VARIANT, "--no-live"),
            env,
            allowed_codes=(0, 1),
        )
        # A variant is stored as its own experiment, `name.variant`, so its runs never mix with
        # the full matrix's.
        stored_name = f"{EXPERIMENT.stem}.{VARIANT}"
        report_dir = results_dir / stored_name / "report"
        _step(
            "write the report",
            _farm("report", stored_name, "--out", str(report_dir)),
            env,
        )
        return report_dir / "report.html"
    finally:
        if not keep_phones:
            subprocess.call(_farm("virtual", "down"), env=env)
            subprocess.call(["adb", "-P", str(adb_port), "kill-server"], timeout=ADB_TIMEOUT_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m farm.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results"), help="results folder")
    parser.add_argument("--keep-phones", action="store_true", help="leave the virtual phones running")
    parser.add_argument("--adb-port", type=int, default=DEMO_ADB_PORT, help="private adb server port")
    parser.add_argument("--state-dir", type=Path, default=Path(".farm/demo"), help="virtual phones' state")
    options = parser.parse_args(argv)
    try:
        with _sigterm_unwinds():
            report = run_demo(
                options.results.resolve(), options.keep_phones, options.adb_port, options.state_dir.resolve()
            )
    except DemoStopped as stopped:
        print(f"demo: {stopped}", file=sys.stderr)
        return 128 + signal.SIGTERM
    except (DemoFailed, subprocess.SubprocessError, OSError) as error:
        print(f"demo: {error}", file=sys.stderr)
        return 1
    print(f"\nReport: {report.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
