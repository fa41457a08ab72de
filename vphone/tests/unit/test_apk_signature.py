"""pm install's signature check (tools/apksig.py) on real APKs: devlib's netstats.apk (a
third-party v1 DSA/SHA-1 signature), an APK that Debian's aapt built and jarsigner signed (RSA,
SHA-256), and tampered copies of both, which PackageManager refuses
(INSTALL_PARSE_FAILED_NO_CERTIFICATES); and the APK Signing Block's framing (v2+)."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import pytest
from vphone.testing.apks import build_apk, missing_tools, rewrite
from vphone.testing.phonetools import load_tool

S = load_tool("apksig")
A = load_tool("apkinfo")

needs_tools = pytest.mark.skipif(bool(missing_tools()), reason=f"needs {', '.join(missing_tools())}")


def netstats_apk() -> Path:
    devlib = pytest.importorskip("devlib", reason="devlib is in the `clients` extra")
    path = Path(devlib.__file__).parent / "instrument" / "netstats" / "netstats.apk"
    if not path.exists():
        pytest.skip("devlib ships no netstats.apk")
    return path


def test_a_real_third_party_v1_signature_verifies_and_a_tampered_copy_does_not(tmp_path: Path) -> None:
    apk = netstats_apk()
    assert S.check(apk.read_bytes()) == S.Signed("v1")
    tampered = rewrite(apk, tmp_path / "t.apk", "AndroidManifest.xml")
    with pytest.raises(S.BadSignature, match=r"MANIFEST\.MF has invalid digest for AndroidManifest\.xml"):
        S.check(tampered.read_bytes())


@needs_tools
def test_jarsigner_rsa_signature_verifies_and_every_tampering_is_refused(tmp_path: Path) -> None:
    apk = build_apk(tmp_path, "org.farm.sig", ("android.permission.CAMERA",))
    assert S.check(apk.read_bytes()) == S.Signed("v1")
    assert A.read_apk(apk.read_bytes()).permissions == ("android.permission.CAMERA",)
    names = zipfile.ZipFile(apk).namelist()
    sf = next(n for n in names if n.endswith(".SF"))
    block = next(n for n in names if n.endswith(".RSA"))
    cases = {
        "file": (rewrite(apk, tmp_path / "a.apk", "AndroidManifest.xml"), "invalid digest"),
        "sf": (rewrite(apk, tmp_path / "b.apk", sf), "does not verify|message digest"),
        "block": (rewrite(apk, tmp_path / "c.apk", block, b"\x30\x82"), "cannot parse"),
    }
    for path, message in cases.values():
        with pytest.raises(S.BadSignature, match=message):
            S.check(path.read_bytes())
    # An added file the manifest does not list.
    extra = tmp_path / "d.apk"
    extra.write_bytes(apk.read_bytes())
    with zipfile.ZipFile(extra, "a") as archive:
        archive.writestr("classes.dex", b"dex\n")
    with pytest.raises(S.BadSignature, match=r"no certificates at entry classes\.dex"):
        S.check(extra.read_bytes())


@needs_tools
def test_signature_files_without_a_signature_are_refused(tmp_path: Path) -> None:
    """What the old check took as signed: the files exist, nothing in them holds."""
    apk = build_apk(tmp_path, "org.farm.fake", signed=False)
    with pytest.raises(S.BadSignature, match="no signature"):
        S.check(apk.read_bytes())
    with zipfile.ZipFile(apk, "a") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        archive.writestr("META-INF/CERT.SF", "Signature-Version: 1.0\n")
        archive.writestr("META-INF/CERT.RSA", b"\x30\x82")
    with pytest.raises(S.BadSignature):
        S.check(apk.read_bytes())


def _with_signing_block(pairs: list[tuple[int, bytes]], *, break_size: bool = False) -> bytes:
    """A zip with an APK Signing Block inserted before its central directory (APK Signature
    Scheme v2: size, ID-value pairs, size again, magic)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("AndroidManifest.xml", b"x")
    blob = buffer.getvalue()
    eocd = blob.rfind(b"PK\x05\x06")
    (cd_offset,) = struct.unpack_from("<I", blob, eocd + 16)
    body = b"".join(struct.pack("<QI", len(value) + 4, pair_id) + value for pair_id, value in pairs)
    size = len(body) + 8 + 16
    block = (
        struct.pack("<Q", size + (1 if break_size else 0))
        + body
        + struct.pack("<Q", size)
        + S.SIGNING_BLOCK_MAGIC
    )
    moved = blob[:cd_offset] + block + blob[cd_offset:]
    new_eocd = eocd + len(block)
    return moved[: new_eocd + 16] + struct.pack("<I", cd_offset + len(block)) + moved[new_eocd + 20 :]


def test_a_v2_signing_block_must_parse_and_hold_a_signature_scheme() -> None:
    assert S.check(_with_signing_block([(0x7109871A, b"v2 signer")])) == S.Signed("v2+")
    with pytest.raises(S.BadSignature):  # a block with only padding is no signature; no v1 either
        S.check(_with_signing_block([(0x42726577, b"\0" * 8)]))
    with pytest.raises(S.BadSignature, match="sizes disagree"):
        S.check(_with_signing_block([(0x7109871A, b"v2 signer")], break_size=True))
