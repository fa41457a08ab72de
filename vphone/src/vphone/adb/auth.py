"""ADB public-key authentication as adbd does it when ro.adb.secure=1 (pure: no sockets).

AOSP packages/modules/adb: on the host's CNXN, adbd (adb.cpp handle_new_connection) sends
A_AUTH(TOKEN, 0, 20 random bytes) instead of its own CNXN. The host answers A_AUTH(SIGNATURE, 0,
RSA signature of the token); adbd (daemon/auth.cpp adbd_auth_verify) tries every key in
/adb_keys and /data/misc/adb/adb_keys with RSA_verify(NID_sha1, token, ...): PKCS#1 v1.5 over
the token taken as a SHA-1 digest. A match puts the transport online (CNXN); a miss sends a new
token. When the host has no key left it sends A_AUTH(RSAPUBLICKEY, 0, "BASE64 user@host\\0");
adbd hands it to the framework, which asks the user ("Allow USB debugging?"). Until then the
host lists the phone as `unauthorized`.

A key is the 524-byte RSAPublicKey struct of libcrypto_utils android_pubkey.c, base64 encoded:
modulus_size_words (64), n0inv, the 2048-bit modulus and R^2 mod N little-endian, the exponent.
"""

from __future__ import annotations

import base64
import binascii
import enum
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

TOKEN_BYTES = 20  # adb's TOKEN_SIZE: a SHA-1 digest's size, signed as one
MODULUS_BYTES = 256  # ANDROID_PUBKEY_MODULUS_SIZE: 2048-bit keys only
MODULUS_WORDS = MODULUS_BYTES // 4
ENCODED_KEY_BYTES = 4 + 4 + MODULUS_BYTES + MODULUS_BYTES + 4
PHONE_KEYS_PATH = "/data/misc/adb/adb_keys"


class AuthType(enum.IntEnum):
    """arg0 of an A_AUTH packet (adb.h ADB_AUTH_*)."""

    TOKEN = 1
    SIGNATURE = 2
    RSAPUBLICKEY = 3


class BadAdbKey(ValueError):
    """A key line or key file that is not an adb public key; says which and why."""


@dataclass(frozen=True)
class AdbKey:
    """One trusted host key: the RSA key and the adb_keys line it came from (for the log)."""

    public_key: rsa.RSAPublicKey
    comment: str


def decode_key(blob: str) -> rsa.RSAPublicKey:
    """The RSA public key in one base64 android_pubkey blob; BadAdbKey if it is not one."""
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError) as error:
        raise BadAdbKey(f"not base64: {error}") from None
    if len(raw) != ENCODED_KEY_BYTES:
        raise BadAdbKey(f"{len(raw)} bytes where an adb key has {ENCODED_KEY_BYTES}")
    (words,) = struct.unpack_from("<I", raw, 0)
    if words != MODULUS_WORDS:
        raise BadAdbKey(f"modulus of {words} words where adb keys have {MODULUS_WORDS}")
    modulus = int.from_bytes(raw[8 : 8 + MODULUS_BYTES], "little")
    (exponent,) = struct.unpack_from("<I", raw, 8 + 2 * MODULUS_BYTES)
    try:
        return rsa.RSAPublicNumbers(exponent, modulus).public_key()
    except ValueError as error:
        raise BadAdbKey(f"not an RSA key: {error}") from None


def encode_key(key: rsa.RSAPublicKey) -> str:
    """The base64 android_pubkey blob of a 2048-bit key (what `adb keygen` writes to adbkey.pub)."""
    numbers = key.public_numbers()
    if key.key_size != MODULUS_BYTES * 8:
        raise BadAdbKey(f"a {key.key_size}-bit key where adb takes {MODULUS_BYTES * 8}-bit keys")
    n0inv = (-pow(numbers.n, -1, 1 << 32)) % (1 << 32)
    rr = pow(2, 2 * MODULUS_BYTES * 8, numbers.n)
    raw = (
        struct.pack("<II", MODULUS_WORDS, n0inv)
        + numbers.n.to_bytes(MODULUS_BYTES, "little")
        + rr.to_bytes(MODULUS_BYTES, "little")
        + struct.pack("<I", numbers.e)
    )
    return base64.b64encode(raw).decode()


def parse_keys(text: str, source: str) -> list[AdbKey]:
    """Keys of an adb_keys file: one `BASE64 [comment]` per line (adbd skips blank lines)."""
    keys = []
    for number, line in enumerate(text.splitlines(), start=1):
        blob, _, comment = line.strip().partition(" ")
        if not blob:
            continue
        try:
            keys.append(AdbKey(decode_key(blob), comment.strip()))
        except BadAdbKey as error:
            raise BadAdbKey(f"{source}:{number}: not an adb public key: {error}") from None
    return keys


def key_line(path: Path) -> str:
    """The adb_keys line for a host key file: an adbkey.pub line as it is, or the public half of
    a private key (adbkey, or a PEM file named in $ADB_VENDOR_KEYS)."""
    data = path.read_bytes()
    if b"PRIVATE KEY" in data:
        try:
            private = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as error:
            raise BadAdbKey(f"{path}: not a usable private key: {error}") from None
        if not isinstance(private, rsa.RSAPrivateKey):
            raise BadAdbKey(f"{path}: not an RSA key")
        try:
            return f"{encode_key(private.public_key())} {path.name}"
        except BadAdbKey as error:
            raise BadAdbKey(f"{path}: {error}") from None
    text = data.decode("utf-8", errors="replace").strip()
    parse_keys(text, str(path))
    return text


def host_key_files(environ: dict[str, str], home: Path) -> list[Path]:
    """The keys a host's adb server signs with: $ADB_VENDOR_KEYS (files, or folders of *.adb_key
    files) and ~/.android/adbkey (its .pub beside it when present), as adb's client/auth.cpp
    loads them."""
    found: list[Path] = []
    for entry in environ.get("ADB_VENDOR_KEYS", "").split(os.pathsep):
        if not entry:
            continue
        path = Path(entry)
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.name.endswith(".adb_key"))
        elif path.is_file():
            found.append(path)
    android = Path(environ["ANDROID_USER_HOME"]) if "ANDROID_USER_HOME" in environ else home / ".android"
    for candidate in (android / "adbkey.pub", android / "adbkey"):
        if candidate.is_file():
            found.append(candidate)
            break
    return found


def new_token() -> bytes:
    return os.urandom(TOKEN_BYTES)


def verify(token: bytes, signature: bytes, keys: Iterable[AdbKey]) -> AdbKey | None:
    """The key whose signature of `token` this is, or None (adbd_auth_verify)."""
    for key in keys:
        try:
            key.public_key.verify(signature, token, padding.PKCS1v15(), utils.Prehashed(hashes.SHA1()))
        except (InvalidSignature, ValueError):
            continue
        return key
    return None


def offered_key(payload: bytes) -> str:
    """The `BASE64 user@host` a host offers with RSAPUBLICKEY, without its trailing NUL."""
    return payload.split(b"\0", 1)[0].decode("ascii", errors="replace").strip()
