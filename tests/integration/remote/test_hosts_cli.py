"""`farm hosts check` / `farm hosts trust` against a real sshd: an unknown host key and a changed
host key are refused with the fingerprint and the command to run, trust then works; a wrong user,
a missing identity file and a stopped adb server are each named as the failing step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from farm.fleet.hostkeys import KNOWN_HOSTS_FILE_NAME
from tests.integration.remote.labs import REPO, cli_env

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(lab_hosts):
    return lab_hosts("lab1", "127.0.0.4", phones=0)


def _setup(tmp_path: Path, lab, trusted: bool = True, **overrides: object) -> dict[str, str]:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "farm.yaml").write_text("local: false\nhosts:\n" + lab.config_entry(**overrides))
    (config_dir / KNOWN_HOSTS_FILE_NAME).write_text(lab.sshd.known_hosts_line() if trusted else "")
    return cli_env(config_dir, tmp_path / "home", lab.adb.port, tmp_path / "results")


def _farm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "farm", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in result.stderr, result.stderr  # failures are one line, never a traceback
    return result


def _fingerprint(lab) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(lab.sshd.host_key.with_suffix(".pub"))],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()[1]


def _failed_step(out: str) -> str:
    failed = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1, out
    return failed[0]


def test_all_steps_pass_with_a_trusted_key(lab, tmp_path: Path) -> None:
    result = _farm(_setup(tmp_path, lab), "hosts", "check", "lab1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "adb server on port" in result.stdout and "FAIL" not in result.stdout


def test_unknown_key_is_refused_with_fingerprint_until_trusted(lab, tmp_path: Path) -> None:
    env = _setup(tmp_path, lab, trusted=False)
    fingerprint = _fingerprint(lab)
    check = _farm(env, "hosts", "check", "lab1")
    assert check.returncode == 1
    line = _failed_step(check.stdout)
    assert "host key" in line and "unknown host key" in line and fingerprint in line
    assert "farm hosts trust lab1" in check.stdout
    assert "authentication: not tried" in check.stdout

    wrong = _farm(env, "hosts", "trust", "lab1", "--fingerprint", "SHA256:" + "A" * 43)
    assert wrong.returncode == 1 and "not trusted" in wrong.stderr
    trust = _farm(env, "hosts", "trust", "lab1", "--fingerprint", fingerprint)
    assert trust.returncode == 0, trust.stderr
    assert fingerprint in trust.stdout
    assert _farm(env, "hosts", "check", "lab1").returncode == 0


def test_changed_key_is_refused_loudly_and_replaced_only_on_request(lab, tmp_path: Path) -> None:
    env = _setup(tmp_path, lab, trusted=True)
    old = _fingerprint(lab)
    lab.sshd.stop()
    lab.sshd.new_host_key()
    lab.sshd.start()
    new = _fingerprint(lab)
    check = _farm(env, "hosts", "check", "lab1")
    assert check.returncode == 1
    line = _failed_step(check.stdout)
    assert "HOST KEY CHANGED" in line and new in line and old in line
    assert "--replace" in check.stdout

    listing = _farm(env, "hosts", "--json")
    assert listing.returncode == 0 and "HOST KEY CHANGED" in listing.stdout

    refused = _farm(env, "hosts", "trust", "lab1")
    assert refused.returncode == 1 and "HOST KEY CHANGED" in refused.stderr
    replaced = _farm(env, "hosts", "trust", "lab1", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert "replaced" in replaced.stdout and new in replaced.stdout
    assert _farm(env, "hosts", "check", "lab1").returncode == 0


def test_wrong_user_fails_at_authentication(lab, tmp_path: Path) -> None:
    check = _farm(_setup(tmp_path, lab, user="nosuchuser"), "hosts", "check", "lab1")
    assert check.returncode == 1
    line = _failed_step(check.stdout)
    assert "authentication" in line and "nosuchuser@" in line


def test_missing_identity_file_fails_at_authentication(lab, tmp_path: Path) -> None:
    missing = tmp_path / "no_such_key"
    check = _farm(_setup(tmp_path, lab, identity_file=str(missing)), "hosts", "check", "lab1")
    assert check.returncode == 1
    line = _failed_step(check.stdout)
    assert "authentication" in line and f"identity file {missing} does not exist" in line


def test_adb_server_down_fails_at_adb_step(lab, tmp_path: Path) -> None:
    from vphone.testing.phones import free_tcp_port

    check = _farm(_setup(tmp_path, lab, adb_port=free_tcp_port()), "hosts", "check", "lab1")
    assert check.returncode == 1
    line = _failed_step(check.stdout)
    assert "adb server" in line and "nothing accepts connections" in line
    assert "start-server" in check.stdout


def test_a_port_that_is_not_ssh_fails_at_the_handshake(lab, tmp_path: Path) -> None:
    check = _farm(_setup(tmp_path, lab, address="127.0.0.1", port=lab.adb.port), "hosts", "check", "lab1")
    assert check.returncode == 1
    line = _failed_step(check.stdout)
    assert "host key: SSH handshake" in line and "is it an SSH server on that port?" in check.stdout


def test_unreachable_port_fails_at_tcp(lab, tmp_path: Path) -> None:
    from vphone.testing.phones import free_tcp_port

    check = _farm(_setup(tmp_path, lab, port=free_tcp_port()), "hosts", "check", "lab1")
    assert check.returncode == 1
    assert "TCP connection" in _failed_step(check.stdout)


def test_unresolvable_name_fails_at_name_resolution(lab, tmp_path: Path) -> None:
    check = _farm(_setup(tmp_path, lab, address="no-such-host.invalid"), "hosts", "check", "lab1")
    assert check.returncode == 1
    line = _failed_step(check.stdout)
    assert "name resolution" in line and "no-such-host.invalid" in line
    assert "TCP connection: not tried" in check.stdout


def test_hosts_listing_shows_an_unreachable_host_as_down_with_the_reason(lab, tmp_path: Path) -> None:
    from vphone.testing.phones import free_tcp_port

    env = _setup(tmp_path, lab, port=free_tcp_port())
    listing = _farm(env, "hosts", "--json")
    assert listing.returncode == 0, listing.stderr
    (row,) = json.loads(listing.stdout)
    assert (row["name"], row["state"], row["phones"]) == ("lab1", "down", None)
    assert "TCP connection" in row["error"]

    # farm run leaves the host out with one warning line, then finds no phone (exit 3)
    spec = tmp_path / "x.yaml"
    spec.write_text("name: x\nbenchmark: {program: lstm, params: {backend: cpu}}\n")
    run = _farm(env, "run", str(spec), "--dry-run")
    assert run.returncode == 3, run.stdout + run.stderr
    warning = [line for line in run.stderr.splitlines() if "lab1" in line]
    assert len(warning) == 1 and "TCP connection" in warning[0] and "farm hosts check lab1" in warning[0]
    assert "Traceback" not in run.stderr
