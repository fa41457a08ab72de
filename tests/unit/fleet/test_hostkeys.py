"""Host-key policy on known_hosts files: trusted, unknown, changed (also hashed entries), and
trust/replace editing only farm's own file."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from farm.errors import HostError
from farm.fleet.hostkeys import HostKeyChanged, HostKeyPolicy, HostKeyUnknown, Verdict, fingerprint, host_id


@pytest.fixture(scope="module")
def keys() -> tuple[paramiko.PKey, paramiko.PKey]:
    return paramiko.ECDSAKey.generate(), paramiko.ECDSAKey.generate()


def _line(name: str, key: paramiko.PKey) -> str:
    return f"{name} {key.get_name()} {key.get_base64()}\n"


def test_host_id_uses_brackets_off_port_22() -> None:
    assert host_id("lab1", 22) == "lab1" and host_id("10.0.0.2", 2222) == "[10.0.0.2]:2222"


def test_fingerprint_is_sha256_without_padding(keys) -> None:
    text = fingerprint(keys[0])
    assert text.startswith("SHA256:") and len(text) == 7 + 43 and not text.endswith("=")


def test_unknown_then_trusted_after_trust(tmp_path: Path, keys) -> None:
    policy = HostKeyPolicy(tmp_path / "farm_known", system_files=[tmp_path / "ssh_known"])
    with pytest.raises(HostKeyUnknown) as caught:
        policy.require_trusted("lab1", "[h]:2222", keys[0])
    assert fingerprint(keys[0]) in str(caught.value) and "farm hosts trust lab1" in str(caught.value)
    assert policy.trust("lab1", "[h]:2222", keys[0]).verdict is Verdict.UNKNOWN
    assert policy.require_trusted("lab1", "[h]:2222", keys[0]).verdict is Verdict.TRUSTED
    assert policy.check("[h]:2223", keys[0]).verdict is Verdict.UNKNOWN  # another port, another host


def test_changed_key_in_a_hashed_system_entry_is_refused_and_never_edited(tmp_path: Path, keys) -> None:
    system = tmp_path / "ssh_known"
    hashed = paramiko.HostKeys.hash_host("[h]:2222")
    system.write_text("# comment\n" + _line(hashed, keys[0]))
    policy = HostKeyPolicy(tmp_path / "farm_known", system_files=[system])
    assert policy.check("[h]:2222", keys[0]).verdict is Verdict.TRUSTED
    with pytest.raises(HostKeyChanged) as caught:
        policy.require_trusted("lab1", "[h]:2222", keys[1])
    text = str(caught.value)
    assert "HOST KEY CHANGED" in text and fingerprint(keys[1]) in text and fingerprint(keys[0]) in text
    with pytest.raises(HostError, match="ssh-keygen -R"):
        policy.trust("lab1", "[h]:2222", keys[1], replace=True)
    assert system.read_text().count("\n") == 2


def test_replace_rewrites_only_that_hosts_entries_in_farms_file(tmp_path: Path, keys) -> None:
    farm_file = tmp_path / "farm_known"
    farm_file.write_text(_line("[h]:2222", keys[0]) + _line("other", keys[0]))
    policy = HostKeyPolicy(farm_file, system_files=[])
    with pytest.raises(HostKeyChanged):
        policy.trust("lab1", "[h]:2222", keys[1])
    assert policy.trust("lab1", "[h]:2222", keys[1], replace=True).verdict is Verdict.CHANGED
    assert policy.check("[h]:2222", keys[1]).verdict is Verdict.TRUSTED
    assert policy.check("other", keys[0]).verdict is Verdict.TRUSTED
    assert farm_file.read_text().count("[h]:2222") == 1
