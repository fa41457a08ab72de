"""ADB authentication on virtual phones of user builds (ro.adb.secure=1), as on a real phone.

A phone trusts the keys it was brought up with (this host's adb key by default, or --adb-key),
as a lab phone whose "Always allow from this computer" was ticked once. Debian's adb server with
that key gets `device`; an adb server with a key of its own (a fresh HOME) gets `unauthorized`
and no shell, as from a phone whose prompt nobody answered. A userdebug profile (ro.adb.secure
unset, AOSP build/make/core/main.mk) asks no key.

The independent truth: Debian's adb server, its own key and its own `adb devices` states.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.adb import auth
from vphone.adb import packets as p
from vphone.testing.adb_wire import WireHost, load_adb_key, sign_token
from vphone.testing.phones import (
    AdbServer,
    PhoneFactory,
    PhoneSet,
    kill_adb_server,
    phone_factory,
    start_adb_server,
)

from vphone import control

pytestmark = pytest.mark.integration

SECURE = "adreno-sd8gen2"  # user build
OPEN = "adreno-sd865"  # userdebug build
SETTLE_TIMEOUT_S = 30.0
SETTLING = ("connecting", "authorizing", "offline")


@pytest.fixture(scope="module")
def phones(module_virtual_phones: PhoneFactory) -> PhoneSet:
    return module_virtual_phones(count=2, profiles=[SECURE, OPEN])


@pytest.fixture
def stranger(tmp_path: Path) -> Iterator[AdbServer]:
    """An adb server with a key of its own, which no phone was told to trust."""
    server = start_adb_server(home=tmp_path)
    try:
        yield server
    finally:
        kill_adb_server(server)


def settled_state(server: AdbServer, adb_serial: str) -> str:
    """The phone's `adb devices` state once adb has finished connecting to it."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        states = dict(
            line.split("\t")[:2] for line in server.adb("devices").stdout.splitlines()[1:] if "\t" in line
        )
        state = states.get(adb_serial, "absent")
        if state not in SETTLING or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def test_the_trusted_adb_server_gets_both_phones(module_adb_server: AdbServer, phones: PhoneSet) -> None:
    secure, open_ = phones
    assert settled_state(module_adb_server, secure.adb_serial) == "device"
    assert settled_state(module_adb_server, open_.adb_serial) == "device"
    prop = module_adb_server.adb("-s", secure.adb_serial, "shell", "getprop", "ro.adb.secure")
    assert prop.stdout.strip() == "1"


def test_an_unknown_key_leaves_a_user_build_unauthorized(stranger: AdbServer, phones: PhoneSet) -> None:
    secure, open_ = phones
    # adb connect's own words for a phone that answered CNXN with AUTH and took no key of its.
    refused = stranger.adb("connect", secure.adb_serial).stdout
    assert refused == f"failed to authenticate to {secure.adb_serial}\n"
    assert "connected to" in stranger.adb("connect", open_.adb_serial).stdout
    assert settled_state(stranger, secure.adb_serial) == "unauthorized"
    assert settled_state(stranger, open_.adb_serial) == "device"
    shell = stranger.adb("-s", secure.adb_serial, "shell", "echo", "in")
    assert shell.returncode != 0 and "in\n" not in shell.stdout
    assert "unauthorized" in shell.stderr
    assert stranger.adb("-s", open_.adb_serial, "shell", "echo", "in").stdout == "in\n"


def test_adb_key_trusts_the_given_key_only(
    adb_server: AdbServer, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    home = tmp_path / "lab"
    (home / ".android").mkdir(parents=True)
    private = home / ".android" / "adbkey"
    subprocess.run(["adb", "keygen", str(private)], check=True, capture_output=True, timeout=60)
    lines = control.adb_key_lines([private.with_name("adbkey.pub")])  # what `up --adb-key` reads
    lab = start_adb_server(home=home)
    try:
        with phone_factory(lab, tmp_path_factory) as start:  # waits for `device` on the lab server
            phone = start(count=1, profiles=[SECURE], adb_keys=lines)[0]
            assert lab.adb("-s", phone.adb_serial, "shell", "id", "-u").stdout == "2000\n"
            # This host's default key, which the phones trust unless told otherwise, is refused.
            refused = adb_server.adb("connect", phone.adb_serial).stdout
            assert refused == f"failed to authenticate to {phone.adb_serial}\n"
            assert settled_state(adb_server, phone.adb_serial) == "unauthorized"
    finally:
        kill_adb_server(lab)


def test_the_wire_exchange_follows_adbd(phones: PhoneSet, tmp_path: Path) -> None:
    secure = phones[0]
    with WireHost.connect(secure.port, banner=False) as host:
        host.send(p.A_CNXN, p.A_VERSION, p.MAX_PAYLOAD_BYTES, b"host::\0")
        token = host.recv()
        assert token is not None and (token.command, token.arg0) == (p.A_AUTH, auth.AuthType.TOKEN)
        assert len(token.payload) == auth.TOKEN_BYTES
        host.send(p.A_OPEN, 1, 0, b"shell:id\0")  # before authorization: dropped
        private = tmp_path / "adbkey"
        subprocess.run(["adb", "keygen", str(private)], check=True, capture_output=True, timeout=60)
        host.send(p.A_AUTH, auth.AuthType.SIGNATURE, 0, sign_token(load_adb_key(private), token.payload))
        again = host.recv()
        assert again is not None and (again.command, again.arg0) == (p.A_AUTH, auth.AuthType.TOKEN)
        assert again.payload != token.payload
        host.send(
            p.A_AUTH, auth.AuthType.RSAPUBLICKEY, 0, private.with_name("adbkey.pub").read_bytes() + b"\0"
        )
        with pytest.raises(TimeoutError):  # nobody answers the prompt: no CNXN, no stream
            host.recv(timeout_s=2.0)
    with WireHost.connect(secure.port) as trusted:  # signs with this host's adb key
        assert trusted.open(5, "shell:true") is not None
