"""pm / cmd package: list packages|features, path, install (stdin with -S or a file), uninstall,
clear, grant/revoke, dump; as PackageManagerShellCommand (frameworks/base/services/core/java/com/
android/server/pm/PackageManagerShellCommand.java) prints them:
* `list packages [-f] [-3] [-s] [-U] [FILTER]`: "package:" + (-f: sourceDir + "=") + name
  (+ -U: " uid:" + uid); -s system packages only, -3 third-party only; an unknown option:
  "Error: Unknown option: -x", status 255.
* `path PKG`: "package:" + the APK path, status 1 and nothing printed for an unknown package.
* a shell command that throws prints, on stderr, "\nException occurred while executing 'VERB':"
  and the exception (BasicShellCommandHandler.exec), status 255: `grant` of an unknown package
  ("Unknown package: X") or of a permission it did not request.
* `clear PKG`: "Success", or "Failed" on stderr and status 1 (runClear).

* `install`: what PackageManager checks before installing (see _install), "Success" or
  "Failure [REASON: ...]".
* `grant`/`revoke PKG PERM`: as PermissionManagerServiceImpl.grantRuntimePermissionInternal
  checks, in its order: "Unknown package: X", "Unknown permission: Y" (IllegalArgumentException);
  "Package X has not requested permission Y" when the manifest has no <uses-permission> for it;
  "Permission Y requested by X is not a changeable permission type" (SecurityException) for
  a permission that is neither runtime ("dangerous") nor development (Android 14's
  PermissionService says "requested by package X").

Installed packages are recorded in /dev/.farm/packages.json (name -> apk path), the name from the
APK's manifest (apkinfo.py), and the permissions each requests in permissions.json.
"""

from __future__ import annotations

import os
import sys
import zlib

import apkinfo
import apksig
import ctlstore
import toolerrors

# Packages every build has, with their APK and uid. Settings and SystemUI are system_ext apps since
# Android 11 (their Android.bp: system_ext_specific: true); android.uid.system is 1000, shell 2000.
SYSTEM_EXT_SDK = 30
BUILTIN = {
    "android": ("/system/framework/framework-res.apk", 1000),
    "com.android.shell": ("/system/priv-app/Shell/Shell.apk", 2000),
    "com.android.providers.settings": ("/system/priv-app/SettingsProvider/SettingsProvider.apk", 1000),
    "com.android.settings": ("{ext}/priv-app/Settings/Settings.apk", 1000),
    "com.android.systemui": ("{ext}/priv-app/SystemUI/SystemUI.apk", 10090),
}
ANDROID_14_SDK = 34
FIRST_APPLICATION_UID = 10000  # Process.FIRST_APPLICATION_UID
APP_UID_BASE = 10150  # where a handset's first installed app lands, past its preinstalled ones
# Features the CDD requires of every handheld (section 2.2.1 / 7) and that PackageManager lists as
# "feature:NAME", plus the GLES version of every Adreno/Mali in the profiles (3.2 = 0x30002).
FEATURES = (
    "reqGlEsVersion=0x30002",
    "android.hardware.faketouch",
    "android.hardware.screen.landscape",
    "android.hardware.screen.portrait",
    "android.hardware.touchscreen",
    "android.hardware.touchscreen.multitouch",
    "android.hardware.usb.accessory",
    "android.hardware.wifi",
    "android.software.app_widgets",
    "android.software.home_screen",
)
# protectionLevel="dangerous" in frameworks/base/core/res/AndroidManifest.xml (Android 14).
RUNTIME_PERMISSIONS = frozenset(
    f"android.permission.{name}"
    for name in (
        "READ_CALENDAR",
        "WRITE_CALENDAR",
        "CAMERA",
        "READ_CONTACTS",
        "WRITE_CONTACTS",
        "GET_ACCOUNTS",
        "ACCESS_FINE_LOCATION",
        "ACCESS_COARSE_LOCATION",
        "ACCESS_BACKGROUND_LOCATION",
        "ACCESS_MEDIA_LOCATION",
        "RECORD_AUDIO",
        "READ_PHONE_STATE",
        "READ_PHONE_NUMBERS",
        "CALL_PHONE",
        "ANSWER_PHONE_CALLS",
        "READ_CALL_LOG",
        "WRITE_CALL_LOG",
        "ADD_VOICEMAIL",
        "USE_SIP",
        "PROCESS_OUTGOING_CALLS",
        "BODY_SENSORS",
        "BODY_SENSORS_BACKGROUND",
        "ACTIVITY_RECOGNITION",
        "SEND_SMS",
        "RECEIVE_SMS",
        "READ_SMS",
        "RECEIVE_WAP_PUSH",
        "RECEIVE_MMS",
        "READ_EXTERNAL_STORAGE",
        "WRITE_EXTERNAL_STORAGE",
        "READ_MEDIA_AUDIO",
        "READ_MEDIA_VIDEO",
        "READ_MEDIA_IMAGES",
        "READ_MEDIA_VISUAL_USER_SELECTED",
        "POST_NOTIFICATIONS",
        "NEARBY_WIFI_DEVICES",
        "BLUETOOTH_SCAN",
        "BLUETOOTH_CONNECT",
        "BLUETOOTH_ADVERTISE",
        "UWB_RANGING",
    )
)
# protectionLevel with "development" in the same file: `pm grant` may change these too.
DEVELOPMENT_PERMISSIONS = frozenset(
    f"android.permission.{name}"
    for name in (
        "WRITE_SECURE_SETTINGS",
        "DUMP",
        "READ_LOGS",
        "SET_ANIMATION_SCALE",
        "CHANGE_CONFIGURATION",
        "PACKAGE_USAGE_STATS",
        "SET_DEBUG_APP",
        "SET_PROCESS_LIMIT",
        "SET_ALWAYS_FINISH",
        "SIGNAL_PERSISTENT_PROCESSES",
        "INTERACT_ACROSS_USERS",
        "SYSTEM_ALERT_WINDOW",
    )
)
# Normal and signature permissions apps commonly request: known, but not changeable by `pm grant`.
FIXED_PERMISSIONS = frozenset(
    f"android.permission.{name}"
    for name in (
        "INTERNET",
        "ACCESS_NETWORK_STATE",
        "ACCESS_WIFI_STATE",
        "CHANGE_WIFI_STATE",
        "WAKE_LOCK",
        "FOREGROUND_SERVICE",
        "RECEIVE_BOOT_COMPLETED",
        "VIBRATE",
        "DISABLE_KEYGUARD",
        "REQUEST_IGNORE_BATTERY_OPTIMIZATIONS",
        "MANAGE_ACCOUNTS",
        "ACCESS_MOCK_LOCATION",
        "MODIFY_AUDIO_SETTINGS",
        "BLUETOOTH",
        "BLUETOOTH_ADMIN",
        "NFC",
        "READ_FRAMEWORK_LOGS",
        "INSTALL_PACKAGES",
        "DELETE_PACKAGES",
        "REBOOT",
        "DEVICE_POWER",
        "BATTERY_STATS",
    )
)
HELP = (
    "Package manager (package) commands:\n  help\n    Print this help text.\n\n"
    "  path [--user USER_ID] PACKAGE\n  list packages [-f] [-d] [-e] [-s] [-3] [-i] [-l] [-u] [-U] [FILTER]\n"
    "  list features\n  install [-r] [-t] [-S BYTES] [PATH|-]\n  uninstall [-k] [--user USER_ID] PACKAGE\n"
    "  clear [--user USER_ID] PACKAGE\n  grant [--user USER_ID] PACKAGE PERMISSION\n"
    "  dump PACKAGE\n"
)
LIST_FLAGS = frozenset("fdesi3luU")


def _installed() -> dict[str, str]:
    return dict(ctlstore.read_json(ctlstore.PACKAGES_FILE, {}))


def _refuse(reason: str, staged: str, detail: str) -> int:
    """PackageManagerShellCommand prints the session's failure as "Failure [" + message + "]"."""
    sys.stdout.write(f"Failure [{reason}: {detail.format(apk=staged)}]\n")
    return 1


def _install(args: list[str]) -> int:
    """The APK (a file, or -S BYTES on stdin) is parsed as PackageManager does before it installs
    anything: not a zip with a binary manifest is INSTALL_PARSE_FAILED_NOT_APK, no signature
    INSTALL_PARSE_FAILED_NO_CERTIFICATES (ApkSignatureVerifier: "Failed to collect certificates
    from ..."), and the package name is the manifest's."""
    size = None
    if "-S" in args:
        i = args.index("-S")
        size = int(args[i + 1]) if i + 1 < len(args) and args[i + 1].isdigit() else None
    if size is not None:
        blob = sys.stdin.buffer.read(size)
        if len(blob) != size:
            sys.stdout.write("Failure [INSTALL_FAILED_INVALID_APK: short read]\n")
            return 1
    else:
        files = [a for a in args if not a.startswith("-")]
        if not files or not os.path.isfile(files[-1]):
            sys.stdout.write("Failure [INSTALL_FAILED_INVALID_URI]\n")
            return 1
        with open(files[-1], "rb") as f:
            blob = f.read()
    staged = f"/data/app/vmdl{zlib.crc32(blob) & 0x7FFFFFFF}.tmp/base.apk"
    try:
        manifest = apkinfo.read_apk(blob)
    except apkinfo.NotAnApk:
        detail = (
            "Failed parse during installPackageLI: {apk} (at Binary XML file line #-1): "
            "Failed to load asset path {apk}"
        )
        return _refuse("INSTALL_PARSE_FAILED_NOT_APK", staged, detail)
    try:
        apksig.check(blob)
    except apksig.BadSignature as error:
        # ApkSignatureVerifier wraps what StrictJarVerifier threw; an APK with no signature at all
        # fails on its null certificate array.
        reason = str(error)
        if reason == apksig.NO_SIGNATURE:
            reason = "Attempt to get length of null array"
        detail = "Failed collecting certificates for {apk}: Failed to collect certificates from {apk}: "
        escaped = reason.replace("{", "{{").replace("}", "}}")
        return _refuse("INSTALL_PARSE_FAILED_NO_CERTIFICATES", staged, detail + escaped)
    name = manifest.package
    apk_dir = ctlstore.path(ctlstore.SHARED, "apks")
    os.makedirs(apk_dir, exist_ok=True)
    # Neither the folder nor the file through a link shell may have planted (pm may run as root).
    dfd = os.open(apk_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(f"{name}.apk", flags, 0o666, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "wb") as dst:
        dst.write(blob)
    packages = _installed()
    packages[name] = f"/data/app/{name}/base.apk"
    ctlstore.write_json(ctlstore.PACKAGES_FILE, packages)
    requested = ctlstore.read_json(ctlstore.PERMISSIONS_FILE, {})
    requested[name] = list(manifest.permissions)
    ctlstore.write_json(ctlstore.PERMISSIONS_FILE, requested)
    sys.stdout.write("Success\n")
    return 0


def _sdk() -> int:
    try:
        return int(ctlstore.read_json("props/ro.json", {}).get("ro.build.version.sdk", "34"))
    except ValueError:
        return 34


def apks() -> dict[str, tuple[str, int, bool]]:
    """Every package: name -> (APK path, uid, is a system package)."""
    ext = "/system_ext" if _sdk() >= SYSTEM_EXT_SDK else "/system"
    found = {name: (path.format(ext=ext), uid, True) for name, (path, uid) in BUILTIN.items()}
    for index, (name, path) in enumerate(sorted(_installed().items())):
        found[name] = (path, APP_UID_BASE + index, False)
    return found


def _exception(verb: str, java_class: str, message: str) -> int:
    sys.stderr.write(f"\nException occurred while executing '{verb}':\n{java_class}: {message}\n")
    return toolerrors.SHELL_COMMAND_FAILED


def _list(rest: list[str]) -> int:
    if rest[:1] == ["features"]:
        sys.stdout.write("".join(f"feature:{name}\n" for name in FEATURES))
        return 0
    if rest[:1] != ["packages"]:
        sys.stderr.write(f"Error: unknown list type '{rest[0] if rest else ''}'\n")
        return toolerrors.SHELL_COMMAND_FAILED
    flags: set[str] = set()
    filters: list[str] = []
    options = iter(rest[1:])
    for arg in options:
        if arg == "--user":
            next(options, None)
        elif arg.startswith("-") and len(arg) > 1 and not arg.startswith("--"):
            bad = next((c for c in arg[1:] if c not in LIST_FLAGS), None)
            if bad is not None:
                sys.stdout.write(f"Error: Unknown option: -{bad}\n")  # runListPackages: on pw
                return toolerrors.SHELL_COMMAND_FAILED
            flags.update(arg[1:])
        elif not arg.startswith("-"):
            filters.append(arg)
    for name, (path, uid, system) in sorted(apks().items()):
        if ("s" in flags and not system) or ("3" in flags and system):
            continue
        if filters and filters[0] not in name:
            continue
        line = f"package:{path}={name}" if "f" in flags else f"package:{name}"
        sys.stdout.write(f"{line} uid:{uid}\n" if "U" in flags else f"{line}\n")
    return 0


def _grant(verb: str, rest: list[str]) -> int:
    operands = [a for a in rest if not a.startswith("-")]
    if len(operands) < 2:
        sys.stderr.write("Error: no permission specified\n" if operands else "Error: no package specified\n")
        return toolerrors.SHELL_COMMAND_FAILED
    package, permission = operands[-2], operands[-1]
    if package not in apks():
        return _exception(verb, "java.lang.IllegalArgumentException", f"Unknown package: {package}")
    changeable = permission in RUNTIME_PERMISSIONS or permission in DEVELOPMENT_PERMISSIONS
    if not changeable and permission not in FIXED_PERMISSIONS:
        return _exception(verb, "java.lang.IllegalArgumentException", f"Unknown permission: {permission}")
    requested = ctlstore.read_json(ctlstore.PERMISSIONS_FILE, {}).get(package, [])
    if permission not in requested:
        return _exception(
            verb,
            "java.lang.SecurityException",
            f"Package {package} has not requested permission {permission}",
        )
    if not changeable:
        by = f"package {package}" if _sdk() >= ANDROID_14_SDK else package
        return _exception(
            verb,
            "java.lang.SecurityException",
            f"Permission {permission} requested by {by} is not a changeable permission type",
        )
    return 0


def dump_package(name: str) -> str:
    """`dumpsys package NAME` / `pm dump NAME`, the fields clients read (Settings.java
    dumpPackageLPr: "  userId=" before Android 14, "  appId=" from it)."""
    found = apks().get(name)
    if found is None:
        return f"Unable to find package: {name}\n"
    path, uid, system = found
    sdk = _sdk()
    key = "appId" if sdk >= 34 else "userId"
    code_path = path.rsplit("/", 1)[0]
    version = ""
    if system:
        # Platform apps carry no version in their manifests: Soong's aapt2 link adds
        # --version-code PlatformSdkVersion and --version-name AppsDefaultVersionName (the
        # release; framework-res: PlatformVersionName) (build/soong java/aar.go).
        release = ctlstore.read_json("props/ro.json", {}).get("ro.build.version.release", "")
        version = f"    versionCode={sdk} minSdk={sdk} targetSdk={sdk}\n    versionName={release}\n"
    return (
        f"Packages:\n  Package [{name}] ({zlib.crc32(name.encode()):08x}):\n"
        f"    {key}={uid}\n    pkg=Package{{{zlib.crc32(path.encode()):08x} {name}}}\n"
        f"    codePath={code_path}\n    resourcePath={code_path}\n{version}"
        f"    dataDir=/data/user/0/{name}\n"
    )


def pm(args: list[str]) -> int:
    if not args or args[0] in ("help", "-h"):
        return toolerrors.help_text(HELP)
    verb, rest = args[0], args[1:]
    packages = _installed()
    if verb == "list":
        return _list(rest)
    if verb == "path" and rest:
        found = apks().get(rest[-1])
        if found is None:
            return 1
        sys.stdout.write(f"package:{found[0]}\n")
        return 0
    if verb in ("grant", "revoke"):
        return _grant(verb, rest)
    if verb == "dump" and rest:
        sys.stdout.write(dump_package(rest[-1]))
        return 0
    if verb == "clear" and rest:
        if rest[-1] not in apks():
            sys.stderr.write("Failed\n")  # runClear: the observer's result is false
            return 1
        sys.stdout.write("Success\n")
        return 0
    if verb == "install":
        return _install(rest)
    if verb == "uninstall" and rest:
        if packages.pop(rest[-1], None) is None:
            sys.stdout.write("Failure [DELETE_FAILED_INTERNAL_ERROR]\n")
            return 1
        ctlstore.write_json(ctlstore.PACKAGES_FILE, packages)
        requested = ctlstore.read_json(ctlstore.PERMISSIONS_FILE, {})
        requested.pop(rest[-1], None)
        ctlstore.write_json(ctlstore.PERMISSIONS_FILE, requested)
        sys.stdout.write("Success\n")
        return 0
    return toolerrors.unknown_command(verb)
