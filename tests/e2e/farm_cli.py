"""Helpers for the `farm run` end-to-end tests: run the real CLI in a subprocess against a private
adb server and a tmp results folder, and read the store it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from farm.store import Store

REPO = Path(__file__).resolve().parents[2]


def farm_env(adb_port: int, results: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    env["FARM_RESULTS"] = str(results)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def farm_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "farm", *args]


def run_farm(
    adb_port: int, results: Path, *args: str, timeout_s: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        farm_argv(*args),
        env=farm_env(adb_port, results),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def start_farm(adb_port: int, results: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        farm_argv(*args),
        env=farm_env(adb_port, results),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def write_experiment(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\n" + textwrap.dedent(body))
    return path


def open_store(results: Path) -> Store:
    return Store.in_results(results).open()


def fast_lstm(
    sweep: str = "{hidden: [8]}",
    measurement: str = "{warmup: 1, iterations: 3, min_seconds: 0, max_seconds: 10, repetitions: 1}",
    extra: str = "",
    params: str = "layers: 1, seq_len: 4, input_dim: 3, classes: 2, batch: 1, backend: cpu",
    telemetry: str = "{idle_baseline_s: 0}",
) -> str:
    """YAML body of a fast cpu-only LSTM experiment (about 1 s per run on a virtual phone).

    The idle power baseline is off by default: it costs 5-30 s per phone and only tests about
    energy need it (they pass their own `telemetry`)."""
    return (
        "benchmark:\n"
        "  program: lstm\n"
        f"  params: {{{params}}}\n"
        f"sweep: {sweep}\n"
        f"measurement: {measurement}\n"
        f"telemetry: {telemetry}\n"
        "conditions:\n"
        "  cooldown: {max_temp_c: 90, timeout_s: 5}\n"
        "  min_battery_pct: 1\n" + extra
    )
