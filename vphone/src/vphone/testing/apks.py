"""Real APKs for tests, made by Debian's tools: aapt compiles the manifest to binary XML, keytool
makes an RSA key and jarsigner signs it (v1 JAR signature, SHA-256), as a developer's build would.

aapt refuses `android:name` without the framework's resources (no android.jar on the host), so a
<uses-permission> is written under another tag of the same length and renamed in the compiled
string pool before signing: the signature then covers the manifest PackageManager reads.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

TOOLS = ("aapt", "keytool", "jarsigner")
STAND_IN_TAG = "uses-permissiox"  # as long as "uses-permission"
STORE_PASSWORD = "farm-test"


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def build_apk(folder: Path, package: str, permissions: tuple[str, ...] = (), *, signed: bool = True) -> Path:
    """folder/PACKAGE.apk: an APK whose manifest names `package` and requests `permissions`."""
    folder.mkdir(parents=True, exist_ok=True)
    uses = "".join(f'<{STAND_IN_TAG} name="{name}"/>\n' for name in permissions)
    manifest = folder / "AndroidManifest.xml"
    manifest.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<manifest xmlns:android="http://schemas.android.com/apk/res/android" package="{package}">\n'
        f"{uses}<application/>\n</manifest>\n"
    )
    compiled = folder / f"{package}.unsigned.apk"
    compiled.unlink(missing_ok=True)
    subprocess.run(["aapt", "package", "-M", str(manifest), "-F", str(compiled)], check=True, timeout=60)
    apk = folder / f"{package}.apk"
    with zipfile.ZipFile(compiled) as source, zipfile.ZipFile(apk, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "AndroidManifest.xml":
                data = data.replace(STAND_IN_TAG.encode("utf-16-le"), "uses-permission".encode("utf-16-le"))
            target.writestr(info, data)
    if signed:
        sign(apk, folder / "debug.jks")
    return apk


def sign(apk: Path, keystore: Path) -> None:
    if not keystore.exists():
        subprocess.run(
            [
                *("keytool", "-genkeypair", "-keystore", str(keystore), "-storepass", STORE_PASSWORD),
                *("-keypass", STORE_PASSWORD, "-alias", "debug", "-keyalg", "RSA", "-keysize", "2048"),
                *("-dname", "CN=farm test", "-validity", "3650"),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    subprocess.run(
        ["jarsigner", "-keystore", str(keystore), "-storepass", STORE_PASSWORD, str(apk), "debug"],
        check=True,
        capture_output=True,
        timeout=120,
    )


def rewrite(apk: Path, target: Path, name: str, change: bytes | None = None) -> Path:
    """A copy of `apk` at `target` whose entry `name` is replaced by `change` (flipped in its last
    byte when None): a tampered APK whose signature files are as signed."""
    with zipfile.ZipFile(apk) as source, zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == name:
                data = change if change is not None else data[:-1] + bytes([data[-1] ^ 1])
            out.writestr(info, data)
    return target
