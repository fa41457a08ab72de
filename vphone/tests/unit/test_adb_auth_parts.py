"""ADB authentication (ro.adb.secure=1) as adbd does it: key encoding checked against Debian's
`adb keygen`, signature checks, and the transport's AUTH exchange against a stub host.

The independent truths: the adbkey/adbkey.pub pair Debian's adb writes, and signatures made with
`cryptography` the way adb's client (RSA_sign(NID_sha1, token)) makes them.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from vphone.adb import auth, transport
from vphone.adb import packets as p
from vphone.adb.transport import Stream
from vphone.testing.adb_host import phone
from vphone.testing.adb_wire import load_adb_key, sign_token


@pytest.fixture(scope="module")
def adb_keypair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("adb") is None:
        pytest.skip("Debian's adb is not installed")
    private = tmp_path_factory.mktemp("keys") / "adbkey"
    subprocess.run(["adb", "keygen", str(private)], check=True, capture_output=True, timeout=60)
    return private, private.with_name("adbkey.pub")


def fresh_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_a_key_encodes_as_debians_adb_keygen_writes_it(adb_keypair: tuple[Path, Path]) -> None:
    private, public = adb_keypair
    blob, _, comment = public.read_text().strip().partition(" ")
    key = load_adb_key(private)
    assert auth.encode_key(key.public_key()) == blob
    assert auth.decode_key(blob).public_numbers() == key.public_key().public_numbers()
    assert comment  # user@host
    assert auth.key_line(private).split()[0] == blob  # the private key gives the same line
    assert auth.key_line(public) == public.read_text().strip()


def test_verify_accepts_only_the_signing_key() -> None:
    signer, other = fresh_key(), fresh_key()
    keys = [auth.AdbKey(other.public_key(), "other"), auth.AdbKey(signer.public_key(), "signer")]
    token = auth.new_token()
    assert len(token) == auth.TOKEN_BYTES == 20
    found = auth.verify(token, sign_token(signer, token), keys)
    assert found is not None and found.comment == "signer"
    assert auth.verify(auth.new_token(), sign_token(signer, token), keys) is None  # another token
    assert auth.verify(token, sign_token(signer, token), keys[:1]) is None  # key not trusted
    assert auth.verify(token, b"\0" * 256, keys) is None


def test_a_bad_key_line_names_its_file_and_line() -> None:
    good = auth.encode_key(fresh_key().public_key())
    text = f"{good} a@b\n\nAAAA c@d\n"
    with pytest.raises(auth.BadAdbKey, match=r"^adb_keys:3: not an adb public key"):
        auth.parse_keys(text, "adb_keys")
    assert len(auth.parse_keys(f"{good} a@b\n\n", "adb_keys")) == 1


def test_host_key_files_follow_adb_vendor_keys_and_the_users_key(tmp_path: Path) -> None:
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "lab.adb_key").write_text("x")
    (vendor / "notes.txt").write_text("x")
    single = tmp_path / "single.key"
    single.write_text("x")
    android = tmp_path / "home" / ".android"
    android.mkdir(parents=True)
    (android / "adbkey").write_text("x")
    (android / "adbkey.pub").write_text("x")
    found = auth.host_key_files({"ADB_VENDOR_KEYS": f"{vendor}:{single}"}, tmp_path / "home")
    assert found == [vendor / "lab.adb_key", single, android / "adbkey.pub"]


async def _unused(_stream: Stream) -> None:
    return None


def test_a_secure_phone_answers_cnxn_with_a_token_and_opens_nothing_before_a_good_signature() -> None:
    trusted, stranger = fresh_key(), fresh_key()

    async def scenario() -> None:
        keys = (auth.AdbKey(trusted.public_key(), "lab@host"),)
        async with phone({"echo:": _unused}, trusted_keys=keys) as open_host:
            host = await open_host()
            host.send(p.A_CNXN, p.A_VERSION, p.MAX_PAYLOAD_BYTES, b"host::\0")
            command, kind, _, token, _ = await host.recv()
            assert (command, kind, len(token)) == (p.A_AUTH, auth.AuthType.TOKEN, auth.TOKEN_BYTES)
            host.send(p.A_OPEN, 1, 0, b"echo:\0")  # ignored: not online yet
            host.send(p.A_AUTH, auth.AuthType.SIGNATURE, 0, sign_token(stranger, token))
            command, kind, _, second, _ = await host.recv()
            assert (command, kind) == (p.A_AUTH, auth.AuthType.TOKEN)
            assert second != token  # a fresh token after a miss
            host.send(p.A_AUTH, auth.AuthType.RSAPUBLICKEY, 0, b"AAAA stranger@host\0")
            host.send(p.A_AUTH, auth.AuthType.SIGNATURE, 0, sign_token(trusted, second))
            command, _, _, banner, _ = await host.recv()
            assert command == p.A_CNXN and banner.startswith(b"device::")
            host.send(p.A_OPEN, 2, 0, b"echo:\0")
            command, _, remote, _, _ = await host.recv()
            assert (command, remote) == (p.A_OKAY, 2)  # the first OPEN was never answered

    asyncio.run(scenario())


def test_an_insecure_phone_answers_cnxn_at_once() -> None:
    async def scenario() -> None:
        async with phone({"echo:": _unused}, trusted_keys=None) as open_host:
            host = await open_host()
            assert (await host.connect()).startswith(b"device::")

    asyncio.run(scenario())


def test_past_256_failed_signatures_each_new_token_waits_a_second() -> None:
    """adb.cpp: `if (t->failed_auth_attempts++ > 256) sleep_for(1s)`: the 258th miss is answered
    a second late (a lower bound only: a loaded host can make it later, never sooner)."""

    async def scenario() -> None:
        keys = (auth.AdbKey(fresh_key().public_key(), "lab@host"),)
        async with phone({"echo:": _unused}, trusted_keys=keys) as open_host:
            host = await open_host()
            host.send(p.A_CNXN, p.A_VERSION, p.MAX_PAYLOAD_BYTES, b"host::\0")
            await host.recv()
            loop = asyncio.get_running_loop()
            for _ in range(transport.AUTH_FAILURES_BEFORE_DELAY + 1):
                host.send(p.A_AUTH, auth.AuthType.SIGNATURE, 0, b"\0" * 256)
                command, kind, _, _, _ = await host.recv()
                assert (command, kind) == (p.A_AUTH, auth.AuthType.TOKEN)
            started = loop.time()
            host.send(p.A_AUTH, auth.AuthType.SIGNATURE, 0, b"\0" * 256)
            command, kind, _, _, _ = await host.recv()
            assert (command, kind) == (p.A_AUTH, auth.AuthType.TOKEN)
            assert loop.time() - started >= transport.AUTH_RETRY_DELAY_S

    asyncio.run(scenario())
