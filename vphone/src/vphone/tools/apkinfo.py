"""What PackageManager reads from an APK's manifest before it installs it: the package,
versionCode, versionName and the <uses-permission> names (binary XML, frameworks/base/libs/
androidfw ResourceTypes.h: a string pool chunk, then element chunks whose attributes are 20-byte
ResXMLTree_attribute). Attributes are matched by name, whatever their namespace. Whether the APK
is signed is apksig.py's. Pure: bytes in, values out.
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


@dataclass(frozen=True)
class Manifest:
    package: str
    version_code: int | None
    version_name: str | None
    permissions: tuple[str, ...] = ()  # <uses-permission android:name>, in manifest order


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
    """The <manifest> element's package, versionCode and versionName, and every
    <uses-permission>'s name."""
    top: dict[str, tuple[int, int, int]] | None = None
    permissions: list[str] = []
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
                attrs: dict[str, tuple[int, int, int]] = {}
                for i in range(attr_count):
                    base = at + header + attr_start + i * attr_size
                    _ns, key, raw, _vsize, _res0, dtype, value = struct.unpack_from("<IIIHBBI", data, base)
                    attrs[strings[key]] = (raw, dtype, value)
                if strings[name] == "manifest" and top is None:
                    top = attrs
                elif strings[name] == "uses-permission" and "name" in attrs:
                    permissions.append(_text(attrs, strings, "name") or "")
            at += size
    except (struct.error, IndexError) as error:
        raise NotAnApk(f"bad binary XML: {error}") from None
    if top is None:
        raise NotAnApk("no <manifest> element")
    manifest = _manifest(top, strings)
    return Manifest(manifest.package, manifest.version_code, manifest.version_name, tuple(permissions))


def _text(attrs: dict[str, tuple[int, int, int]], strings: list[str], key: str) -> str | None:
    raw, dtype, value = attrs.get(key, (NO_ENTRY, 0, 0))
    if raw != NO_ENTRY:
        return strings[raw]
    return strings[value] if dtype == TYPE_STRING else str(value) if key in attrs else None


def _manifest(attrs: dict[str, tuple[int, int, int]], strings: list[str]) -> Manifest:
    code = attrs.get("versionCode")
    version_code = code[2] if code and code[1] in (TYPE_INT_DEC, TYPE_INT_HEX) else None
    package = _text(attrs, strings, "package")
    if not package:
        raise NotAnApk("<manifest> has no package")
    return Manifest(package, version_code, _text(attrs, strings, "versionName"))


def read_apk(blob: bytes) -> Manifest:
    """The manifest of an APK; NotAnApk when it is no zip with a binary manifest."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as apk:
            return parse_manifest(apk.read("AndroidManifest.xml"))
    except (zipfile.BadZipFile, KeyError) as error:
        raise NotAnApk(str(error)) from None
