"""Whether an APK's signature holds, as PackageManager checks before it installs (pure, stdlib
only: the phone's tools run without site-packages).

ApkSignatureVerifier (frameworks/base/core/java/android/util/apk/) prefers the APK Signing Block
(v2/v3: "APK Sig Block 42" right before the central directory); here that block must be present
and parse into ID-value pairs holding a v2 (0x7109871a) or v3 (0xf05368c0, 0x1b93ad61) signature.
Its cryptography is not checked (unverified: v2/v3 digests and signatures).

Without it the v1 JAR signature is checked as StrictJarVerifier does: the signature block
(META-INF/X.RSA or .DSA, PKCS#7 SignedData) parses, its certificate's key verifies the signature
of META-INF/X.SF, X.SF's digest of MANIFEST.MF (whole, or per section) matches, and every file
outside META-INF/ is listed in MANIFEST.MF with a digest that matches its bytes. Any failure is
INSTALL_PARSE_FAILED_NO_CERTIFICATES. EC keys: the certificate must parse, the signature itself
is not checked (unverified).
"""

from __future__ import annotations

import base64
import hashlib
import io
import struct
import zipfile
from dataclasses import dataclass

SIGNING_BLOCK_MAGIC = b"APK Sig Block 42"
SIGNATURE_SCHEME_IDS = frozenset({0x7109871A, 0xF05368C0, 0x1B93AD61})
EOCD_MAGIC = b"PK\x05\x06"
DIGESTS = {  # JAR attribute prefix and PKCS#7 OID -> hashlib name
    "SHA1": "sha1",
    "SHA-1": "sha1",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
}
DIGEST_OIDS = {
    "1.3.14.3.2.26": "sha1",
    "2.16.840.1.101.3.4.2.1": "sha256",
    "2.16.840.1.101.3.4.2.2": "sha384",
    "2.16.840.1.101.3.4.2.3": "sha512",
}
DIGEST_INFO_PREFIX = {  # DER of DigestInfo before the hash (RFC 8017 section 9.2, note 1)
    "sha1": bytes.fromhex("3021300906052b0e03021a05000414"),
    "sha256": bytes.fromhex("3031300d060960864801650304020105000420"),
    "sha384": bytes.fromhex("3041300d060960864801650304020205000430"),
    "sha512": bytes.fromhex("3051300d060960864801650304020305000440"),
}
OID_RSA = "1.2.840.113549.1.1.1"
OID_DSA = "1.2.840.10040.4.1"
OID_EC = "1.2.840.10045.2.1"
OID_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"


NO_SIGNATURE = "no signature in the APK"


class BadSignature(ValueError):
    """The APK's signature does not hold: the message PackageManager would give, after 'from APK: '."""


@dataclass(frozen=True)
class Signed:
    scheme: str  # "v2+" or "v1"


# -- DER ------------------------------------------------------------------------------------------
def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at `at`."""
    if at + 2 > len(data):
        raise BadSignature("truncated DER")
    tag, first = data[at], data[at + 1]
    at += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or at + count > len(data):
            raise BadSignature("bad DER length")
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    if at + length > len(data):
        raise BadSignature("truncated DER")
    return tag, at, at + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, content start, content end, element start) of each element in [start, end)."""
    out = []
    at = start
    while at < end:
        tag, body, stop = _tlv(data, at)
        out.append((tag, body, stop, at))
        at = stop
    return out


def _oid(raw: bytes) -> str:
    parts = [raw[0] // 40, raw[0] % 40]
    value = 0
    for byte in raw[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _int(data: bytes, start: int, end: int) -> int:
    return int.from_bytes(data[start:end], "big", signed=False)


@dataclass(frozen=True)
class _Key:
    algorithm: str
    numbers: tuple[int, ...]  # RSA (n, e); DSA (p, q, g, y)


def _public_key(cert: bytes, start: int, end: int) -> _Key:
    """The subjectPublicKeyInfo of an X.509 certificate (RFC 5280 section 4.1)."""
    tbs = _children(cert, start, end)[0]
    fields = _children(cert, tbs[1], tbs[2])
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    spki = fields[5]  # serial, signature, issuer, validity, subject, subjectPublicKeyInfo
    algorithm, bits = _children(cert, spki[1], spki[2])[:2]
    alg = _children(cert, algorithm[1], algorithm[2])
    oid = _oid(cert[alg[0][1] : alg[0][2]])
    key = cert[bits[1] + 1 : bits[2]]  # past the BIT STRING's unused-bits byte
    if oid == OID_RSA:
        seq = _children(key, *_tlv(key, 0)[1:])
        return _Key("rsa", (_int(key, seq[0][1], seq[0][2]), _int(key, seq[1][1], seq[1][2])))
    if oid == OID_DSA:
        params = _children(cert, alg[1][1], alg[1][2])
        p, q, g = (_int(cert, x[1], x[2]) for x in params[:3])
        _tag, y_start, y_end = _tlv(key, 0)
        return _Key("dsa", (p, q, g, _int(key, y_start, y_end)))
    if oid == OID_EC:
        return _Key("ec", ())
    raise BadSignature(f"unsupported key algorithm {oid}")


def _verify(key: _Key, digest_name: str, message: bytes, signature: bytes) -> bool:
    digest = hashlib.new(digest_name, message).digest()
    if key.algorithm == "rsa":
        n, e = key.numbers
        size = (n.bit_length() + 7) // 8
        encoded = pow(int.from_bytes(signature, "big"), e, n).to_bytes(size, "big")
        body = DIGEST_INFO_PREFIX[digest_name] + digest
        return encoded == b"\x00\x01" + b"\xff" * (size - len(body) - 3) + b"\x00" + body
    if key.algorithm == "dsa":
        p, q, g, y = key.numbers
        _tag, start, end = _tlv(signature, 0)
        r_el, s_el = _children(signature, start, end)[:2]
        r, s = _int(signature, r_el[1], r_el[2]), _int(signature, s_el[1], s_el[2])
        if not (0 < r < q and 0 < s < q):
            return False
        h = int.from_bytes(digest[: (q.bit_length() + 7) // 8], "big")
        w = pow(s, -1, q)
        return (pow(g, h * w % q, p) * pow(y, r * w % q, p)) % p % q == r
    return True  # EC: unverified (see the module's docstring)


def verify_signature_block(block: bytes, signed_file: bytes) -> None:
    """A PKCS#7 SignedData (RFC 2315) whose first signer signed `signed_file` (the .SF)."""
    try:
        _tag, start, end = _tlv(block, 0)
        content_type, explicit = _children(block, start, end)[:2]
        signed_data = _children(block, *_tlv(block, explicit[1])[1:])
        certs = next((c for c in signed_data if c[0] == 0xA0), None)
        signer_infos = signed_data[-1]
        if certs is None:
            raise BadSignature("no certificate in the signature block")
        cert = _children(block, certs[1], certs[2])[0]
        key = _public_key(block, cert[1], cert[2])
        signer = _children(block, signer_infos[1], signer_infos[2])[0]
        fields = _children(block, signer[1], signer[2])
        digest_alg = _children(block, fields[2][1], fields[2][2])[0]
        digest_name = DIGEST_OIDS.get(_oid(block[digest_alg[1] : digest_alg[2]]))
        if digest_name is None:
            raise BadSignature("unsupported digest algorithm")
        signature = next(block[f[1] : f[2]] for f in fields[3:] if f[0] == 0x04)
        attributes = next((f for f in fields if f[0] == 0xA0), None)
    except (IndexError, StopIteration, ValueError) as error:
        raise BadSignature(f"cannot parse the signature block: {error}") from None
    message = signed_file
    if attributes is not None:
        # Signed attributes: their messageDigest must be the file's, and the signature covers
        # the attributes re-tagged as a SET (RFC 2315 section 9.3).
        wanted = hashlib.new(digest_name, signed_file).digest()
        found = None
        for attr in _children(block, attributes[1], attributes[2]):
            oid_el, values = _children(block, attr[1], attr[2])[:2]
            if _oid(block[oid_el[1] : oid_el[2]]) == OID_MESSAGE_DIGEST:
                value = _children(block, values[1], values[2])[0]
                found = block[value[1] : value[2]]
        if found != wanted:
            raise BadSignature("the signed attributes' message digest does not match")
        message = b"\x31" + block[attributes[3] + 1 : attributes[2]]
    del content_type
    if not _verify(key, digest_name, message, signature):
        raise BadSignature("the signature block's signature does not verify")


# -- JAR manifests ---------------------------------------------------------------------------------
def _sections(text: bytes) -> list[tuple[dict[str, str], bytes]]:
    """Sections of a JAR manifest: (attributes, raw bytes with their blank line)."""
    out = []
    for raw in _raw_sections(text):
        attrs: dict[str, str] = {}
        key = None
        for line in raw.decode("utf-8", errors="replace").replace("\r\n", "\n").split("\n"):
            if line.startswith(" ") and key is not None:
                attrs[key] += line[1:]
            elif ": " in line:
                key, _, value = line.partition(": ")
                attrs[key] = value
        out.append((attrs, raw))
    return out


def _raw_sections(text: bytes) -> list[bytes]:
    sections, start, at = [], 0, 0
    while at < len(text):
        end = text.find(b"\n", at)
        end = len(text) if end < 0 else end + 1
        if text[at:end] in (b"\r\n", b"\n"):
            sections.append(text[start:end])
            start = end
        at = end
    if start < len(text):
        sections.append(text[start:])
    return sections


def _digest_matches(attrs: dict[str, str], data: bytes, suffix: str) -> bool | None:
    """None when no supported digest attribute is there; else whether one matches."""
    checked = None
    for name, algorithm in DIGESTS.items():
        value = attrs.get(f"{name}{suffix}")
        if value is None:
            continue
        if base64.b64encode(hashlib.new(algorithm, data).digest()).decode() == value.strip():
            return True
        checked = False
    return checked


def verify_v1(apk: zipfile.ZipFile) -> None:
    names = apk.namelist()
    blocks = [n for n in names if n.startswith("META-INF/") and n.endswith((".RSA", ".DSA", ".EC"))]
    if not blocks or "META-INF/MANIFEST.MF" not in names:
        raise BadSignature(NO_SIGNATURE)
    block_name = blocks[0]
    sf_name = block_name.rsplit(".", 1)[0] + ".SF"
    if sf_name not in names:
        raise BadSignature(f"{block_name} has no {sf_name}")
    manifest = apk.read("META-INF/MANIFEST.MF")
    sf = apk.read(sf_name)
    verify_signature_block(apk.read(block_name), sf)
    sf_sections = _sections(sf)
    whole = _digest_matches(sf_sections[0][0], manifest, "-Digest-Manifest") if sf_sections else None
    mf_sections = _sections(manifest)
    if not whole:
        by_name = {a.get("Name"): raw for a, raw in mf_sections[1:]}
        for attrs, _raw in sf_sections[1:]:
            name = attrs.get("Name")
            if name not in by_name or not _digest_matches(attrs, by_name[name], "-Digest"):
                raise BadSignature(f"{sf_name} has invalid digest for {name}")
    entries = {a["Name"]: a for a, _raw in mf_sections[1:] if "Name" in a}
    for info in apk.infolist():
        if info.is_dir() or info.filename.startswith("META-INF/"):
            continue
        entry = entries.get(info.filename)
        if entry is None:
            raise BadSignature(f"no certificates at entry {info.filename}")
        if not _digest_matches(entry, apk.read(info), "-Digest"):
            raise BadSignature(f"META-INF/MANIFEST.MF has invalid digest for {info.filename}")


# -- APK Signing Block -----------------------------------------------------------------------------
def signing_block_ids(blob: bytes) -> frozenset[int] | None:
    """The IDs in the APK Signing Block, None when there is none; BadSignature if it is broken."""
    eocd = blob.rfind(EOCD_MAGIC, max(0, len(blob) - 65557))
    if eocd < 0 or eocd + 22 > len(blob):
        return None
    (cd_offset,) = struct.unpack_from("<I", blob, eocd + 16)
    if cd_offset < 24 or cd_offset > len(blob) or blob[cd_offset - 16 : cd_offset] != SIGNING_BLOCK_MAGIC:
        return None
    (size,) = struct.unpack_from("<Q", blob, cd_offset - 24)
    start = cd_offset - size - 8
    if start < 0 or struct.unpack_from("<Q", blob, start)[0] != size:
        raise BadSignature("the APK Signing Block's sizes disagree")
    ids = set()
    at, end = start + 8, cd_offset - 24
    while at < end:
        if at + 12 > end:
            raise BadSignature("the APK Signing Block is truncated")
        length, pair_id = struct.unpack_from("<QI", blob, at)
        if length < 4 or at + 8 + length > end:
            raise BadSignature("an APK Signing Block entry overruns the block")
        ids.add(pair_id)
        at += 8 + length
    return frozenset(ids)


def check(blob: bytes) -> Signed:
    """How the APK is signed; BadSignature (INSTALL_PARSE_FAILED_NO_CERTIFICATES) if it is not."""
    ids = signing_block_ids(blob)
    if ids is not None and ids & SIGNATURE_SCHEME_IDS:
        return Signed("v2+")
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as apk:
            verify_v1(apk)
    except zipfile.BadZipFile as error:
        raise BadSignature(str(error)) from None
    return Signed("v1")
