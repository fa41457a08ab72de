"""Helpers for the remote-host tests: a farm config dir (farm.yaml + farm's known_hosts) for a set
of fake lab hosts, and the environment that points the CLI at it."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from farm.fleet.farm_yaml import parse_config
from farm.fleet.hostkeys import KNOWN_HOSTS_FILE_NAME, HostKeyPolicy
from farm.fleet.hosts import Fleet
from farm.store import RunState
from farm.store import runs as run_store
from tests.e2e.farm_cli import fast_lstm as e2e_fast_lstm
from tests.e2e.farm_cli import open_store as open_store
from tests.e2e.farm_cli import write_experiment as write_experiment
from tests.fixtures.sshd import LabHost

REPO = Path(__file__).resolve().parents[3]


def write_config(folder: Path, hosts: Sequence[LabHost], *, trust: bool = True, local: bool = True) -> Path:
    """farm.yaml for `hosts` (plus the implicit local host) in `folder`; their keys trusted."""
    folder.mkdir(parents=True, exist_ok=True)
    text = ("" if local else "local: false\n") + "hosts:\n" + "".join(h.config_entry() for h in hosts)
    (folder / "farm.yaml").write_text(text)
    known = folder / KNOWN_HOSTS_FILE_NAME
    known.write_text("".join(h.sshd.known_hosts_line() for h in hosts) if trust else "")
    return folder / "farm.yaml"


def policy_in(folder: Path) -> HostKeyPolicy:
    return HostKeyPolicy(folder / KNOWN_HOSTS_FILE_NAME, system_files=[folder / "no-system-known-hosts"])


def fleet_in(folder: Path, local_adb_port: int | None = None) -> Fleet:
    config = parse_config((folder / "farm.yaml").read_text(), str(folder / "farm.yaml"))
    return Fleet(config, policy=policy_in(folder), local_adb_port=local_adb_port, require_local=False)


def cli_env(config_dir: Path, home: Path, adb_port: int, results: Path) -> dict[str, str]:
    """The CLI's environment: its own HOME (no ~/.ssh of the machine), config dir, results, adb."""
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        FARM_CONFIG_DIR=str(config_dir),
        FARM_CONFIG=str(config_dir / "farm.yaml"),
        FARM_RESULTS=str(results),
        ANDROID_ADB_SERVER_PORT=str(adb_port),
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.pop("SSH_AUTH_SOCK", None)
    return env


def fast_lstm(hidden: list[int], *, min_seconds: float = 0, max_attempts: int = 3) -> str:
    """A fast cpu-only LSTM sweep over `hidden` (about a second a run on a virtual phone); no idle
    power baseline: these tests are about hosts, not energy."""
    return e2e_fast_lstm(
        sweep=f"{{hidden: {hidden}}}",
        measurement=(
            f"{{warmup: 1, iterations: 3, min_seconds: {min_seconds}, max_seconds: 10, repetitions: 1}}"
        ),
        extra=f"retries: {{max_attempts: {max_attempts}}}\n",
    )


def done_by_phone(results: Path, experiment: str) -> Counter[str]:
    """DONE runs per phone (`ran_on`), read from the store a running `farm run` writes."""
    if not (results / "farm.db").exists():
        return Counter()
    with open_store(results) as store:
        return Counter(r.ran_on for r in run_store.list_runs(store, experiment, [RunState.DONE]))


def attempts_on(results: Path, device_id: str) -> int:
    """Attempts started on a phone so far (a run is under way on it once this is >= 1)."""
    if not (results / "farm.db").exists():
        return 0
    with open_store(results) as store:
        return int(store.query("SELECT COUNT(*) FROM attempts WHERE device_id = ?", (device_id,))[0][0])


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)
