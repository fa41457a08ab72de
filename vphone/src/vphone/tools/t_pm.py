"""pm / cmd package: list packages, path, install (stdin with -S or a file), uninstall.

Installed packages are recorded in /dev/.farm/packages.json (name -> apk path); the package name
comes from the APK's file name (x.y.apk -> x.y) or, when streamed with -S, from the first
`package="..."`-like string in its manifest's string pool, else `com.farm.installed<N>`.
"""

from __future__ import annotations

import os
import re
import sys
import zipfile

import ctlstore
import toolerrors

BUILTIN = ("android", "com.android.shell", "com.android.settings", "com.android.systemui")
HELP = (
    "Package manager (package) commands:\n  help\n    Print this help text.\n\n"
    "  path [--user USER_ID] PACKAGE\n  list packages [-3] [FILTER]\n"
    "  install [-r] [-t] [-S BYTES] [PATH|-]\n  uninstall [-k] [--user USER_ID] PACKAGE\n"
)


def _installed() -> dict[str, str]:
    return dict(ctlstore.read_json("packages.json", {}))


def _name_from_apk(path: str) -> str | None:
    try:
        with zipfile.ZipFile(path) as z:
            manifest = z.read("AndroidManifest.xml")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    # Binary XML keeps strings as UTF-16LE; a package name is dotted lowercase words.
    text = manifest.decode("utf-16-le", errors="ignore")
    m = re.search(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+){1,}", text)
    return m.group(0) if m else None


def _install(args: list[str]) -> int:
    size = None
    if "-S" in args:
        i = args.index("-S")
        size = int(args[i + 1]) if i + 1 < len(args) and args[i + 1].isdigit() else None
    packages = _installed()
    apk_dir = ctlstore.path("apks")
    os.makedirs(apk_dir, exist_ok=True)
    if size is not None:
        data = sys.stdin.buffer.read(size)
        if len(data) != size:
            sys.stdout.write("Failure [INSTALL_FAILED_INVALID_APK: short read]\n")
            return 1
        tmp = os.path.join(apk_dir, f".stream{os.getpid()}.apk")
        with open(tmp, "wb") as f:
            f.write(data)
        name = _name_from_apk(tmp) or f"com.farm.installed{len(packages) + 1}"
    else:
        files = [a for a in args if not a.startswith("-")]
        if not files or not os.path.isfile(files[-1]):
            sys.stdout.write("Failure [INSTALL_FAILED_INVALID_URI]\n")
            return 1
        tmp = files[-1]
        name = _name_from_apk(tmp) or os.path.basename(tmp).removesuffix(".apk")
    final = os.path.join(apk_dir, f"{name}.apk")
    with open(tmp, "rb") as src, open(final, "wb") as dst:
        dst.write(src.read())
    if size is not None:
        os.unlink(tmp)
    packages[name] = f"/data/app/{name}/base.apk"
    ctlstore.write_json("packages.json", packages)
    sys.stdout.write("Success\n")
    return 0


def pm(args: list[str]) -> int:
    if not args or args[0] in ("help", "-h"):
        return toolerrors.help_text(HELP)
    verb, rest = args[0], args[1:]
    packages = _installed()
    if verb == "list" and rest[:1] == ["packages"]:
        names = sorted(packages) if "-3" in rest else sorted({*BUILTIN, *packages})
        filters = [a for a in rest[1:] if not a.startswith("-")]
        for name in names:
            if not filters or filters[0] in name:
                sys.stdout.write(f"package:{name}\n")
        return 0
    if verb == "path" and rest:
        if rest[-1] in packages:
            sys.stdout.write(f"package:{packages[rest[-1]]}\n")
            return 0
        return 1
    if verb == "install":
        return _install(rest)
    if verb == "uninstall" and rest:
        if packages.pop(rest[-1], None) is None:
            sys.stdout.write("Failure [DELETE_FAILED_INTERNAL_ERROR]\n")
            return 1
        ctlstore.write_json("packages.json", packages)
        sys.stdout.write("Success\n")
        return 0
    return toolerrors.unknown_command(verb)
