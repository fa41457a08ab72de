"""Authentication without a key file in farm.yaml: a passphrase-protected key is never asked for
(the check says to load it into ssh-agent), and with the key in a real ssh-agent it works."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.remote.labs import REPO, cli_env

pytestmark = pytest.mark.integration
PASSPHRASE = "correct horse battery staple"


@pytest.fixture(scope="module")
def lab(lab_hosts):
    return lab_hosts("lab1", "127.0.0.8", phones=0)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[str]:
    socket_path = tmp_path / "agent.sock"
    process = subprocess.Popen(
        ["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield str(socket_path)
    finally:
        process.kill()
        process.wait()


def _encrypted_key(folder: Path, lab) -> Path:
    key = folder / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-f", str(key)], check=True, timeout=30
    )
    with (lab.sshd.folder / "authorized_keys").open("a") as keys:  # sshd reads it per login
        keys.write(key.with_suffix(".pub").read_text())
    return key


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "farm", "hosts", "check", "lab1"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_passphrase_key_needs_the_agent_and_works_through_it(lab, agent: str, tmp_path: Path) -> None:
    key = _encrypted_key(tmp_path, lab)
    config = tmp_path / "config"
    config.mkdir()
    (config / "farm.yaml").write_text("local: false\nhosts:\n" + lab.config_entry(identity_file=str(key)))
    (config / "known_hosts").write_text(lab.sshd.known_hosts_line())
    env = cli_env(config, tmp_path / "home", lab.adb.port, tmp_path / "results")

    without = _check(env)
    assert without.returncode == 1
    assert "authentication" in without.stdout
    assert "needs a passphrase (load it into ssh-agent)" in without.stdout

    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f"#!/bin/sh\necho '{PASSPHRASE}'\n")
    askpass.chmod(0o700)
    added = subprocess.run(
        ["ssh-add", str(key)],
        env={
            **os.environ,
            "SSH_AUTH_SOCK": agent,
            "SSH_ASKPASS": str(askpass),
            "SSH_ASKPASS_REQUIRE": "force",
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert added.returncode == 0, added.stderr
    with_agent = _check({**env, "SSH_AUTH_SOCK": agent})
    assert with_agent.returncode == 0, with_agent.stdout + with_agent.stderr
    assert "logged in as root" in with_agent.stdout
