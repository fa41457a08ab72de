"""What PackageManager reads from an APK before it installs it: the manifest's package,
versionCode and versionName (binary XML, frameworks/base/libs/androidfw ResourceTypes.h: a
string pool chunk, then element chunks whose attributes are 20-byte ResXMLTree_attribute), and
whether it is signed (a v1 JAR signature META-INF/*.SF with its .RSA/.DSA/.EC block, or the
"APK Sig Block 42" of v2+ before the central directory). Pure: bytes in, values out.
"""

from __future__ import annotations

import io
import struct
import zipfile
from dataclasses import dataclass

RES_STRING_POOL_TYPE = 0x0001
RES_XML_START_ELEMENT_TYPE = 0x0102
UTF8_FLAG = 0x100
TYPE_STRING = 0x03
TYPE_INT_DEC = 0x10
TYPE_INT_HEX = 0x11
NO_ENTRY = 0xFFFFFFFF
SIGNING_BLOCK_MAGIC = b"APK Sig Block 42"


@dataclass(frozen=True)
class Manifest:
    package: str
    version_code: int | None
    version_name: str | None


class NotAnApk(ValueError):
    """Not a zip with a binary AndroidManifest.xml: INSTALL_PARSE_FAILED_NOT_APK."""


def _strings(data: bytes, at: int) -> list[str]:
    _type, _header, _size, count, _styles, flags, start, _styles_start = struct.unpack_from(
        "<HHIIIIII", data, at
    )
    offsets = struct.unpack_from(f"<{count}I", data, at + 28)
    out = []
    for offset in offsets:
        p = at + start + offset
        if flags & UTF8_FLAG:
            p += 2 if data[p] & 0x80 else 1  # length in UTF-16 units, then in bytes
            length = data[p]
            if length & 0x80:
                length = ((length & 0x7F) << 8) | data[p + 1]
                p += 1
            out.append(data[p + 1 : p + 1 + length].decode("utf-8", errors="replace"))
        else:
            (length,) = struct.unpack_from("<H", data, p)
            if length & 0x8000:
                length = ((length & 0x7FFF) << 16) | struct.unpack_from("<H", data, p + 2)[0]
                p += 2
            out.append(data[p + 2 : p + 2 + 2 * length].decode("utf-16-le", errors="replace"))
    return out


def parse_manifest(data: bytes) -> Manifest:
    """The <manifest> element's package, versionCode and versionName."""
    try:
        strings: list[str] = []
        at = 8  # past the ResXMLTree_header
        while at + 8 <= len(data):
            kind, header, size = struct.unpack_from("<HHI", data, at)
            if size < 8:
                break
            if kind == RES_STRING_POOL_TYPE:
                strings = _strings(data, at)
            elif kind == RES_XML_START_ELEMENT_TYPE:
                name, attr_start, attr_size, attr_count = struct.unpack_from("<IHHH", data, at + header + 4)
                if strings[name] == "manifest":
                    attrs: dict[str, tuple[int, int, int]] = {}
                    for i in range(attr_count):
                        base = at + header + attr_start + i * attr_size
                        _ns, key, raw, _vsize, _res0, dtype, value = struct.unpack_from(
                            "<IIIHBBI", data, base
                        )
                        attrs[strings[key]] = (raw, dtype, value)
                    return _manifest(attrs, strings)
            at += size
    except (struct.error, IndexError) as error:
        raise NotAnApk(f"bad binary XML: {error}") from None
    raise NotAnApk("no <manifest> element")


def _manifest(attrs: dict[str, tuple[int, int, int]], strings: list[str]) -> Manifest:
    def text(key: str) -> str | None:
        raw, dtype, value = attrs.get(key, (NO_ENTRY, 0, 0))
        if raw != NO_ENTRY:
            return strings[raw]
        return strings[value] if dtype == TYPE_STRING else str(value) if key in attrs else None

    code = attrs.get("versionCode")
    version_code = code[2] if code and code[1] in (TYPE_INT_DEC, TYPE_INT_HEX) else None
    package = text("package")
    if not package:
        raise NotAnApk("<manifest> has no package")
    return Manifest(package, version_code, text("versionName"))


def read_apk(blob: bytes) -> tuple[Manifest, bool]:
    """The manifest and whether the APK carries a signature."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as apk:
            names = apk.namelist()
            manifest = parse_manifest(apk.read("AndroidManifest.xml"))
    except (zipfile.BadZipFile, KeyError) as error:
        raise NotAnApk(str(error)) from None
    v1 = any(n.startswith("META-INF/") and n.endswith(".SF") for n in names) and any(
        n.startswith("META-INF/") and n.endswith((".RSA", ".DSA", ".EC")) for n in names
    )
    return manifest, v1 or SIGNING_BLOCK_MAGIC in blob
