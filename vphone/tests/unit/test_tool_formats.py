"""logcat's line formats (tools/logformat.py) byte for byte against liblog's logprint.cpp
android_log_formatLogLine, the content tool's argument parser (tools/t_content.py) against
cmds/content Content.Parser, and the APK manifest reader (tools/apkinfo.py) against aapt (pure;
no phone)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from vphone.testing.phonetools import load_tool

F = load_tool("logformat")
C = load_tool("t_content")

# 2024-01-02 03:04:05.678901234 UTC
T_NS = 1704164645 * 1_000_000_000 + 678_901_234
ENTRY = F.Entry(T_NS, 123, 456, "W", "Tag", "first\nsecond")


def fmt(words: str) -> object:
    made = F.with_words(F.Format(), words)
    assert made is not None
    return made


def test_each_style_is_logprints_snprintf() -> None:
    """brief "%c/%-8.*s(%s%5d): ", tag "%c/%-8.*s: ", process "%c(%s%5d) " + "  (%.*s)",
    thread "%c(%s%5d:%5d) ", raw: the message; each line of the message gets the prefix."""
    render = F.render
    assert (
        render(fmt("brief"), ENTRY, uid=None, boot_ns=0)
        == "W/Tag     (  123): first\nW/Tag     (  123): second\n"
    )
    assert render(fmt("tag"), ENTRY, uid=None, boot_ns=0) == "W/Tag     : first\nW/Tag     : second\n"
    assert (
        render(fmt("process"), ENTRY, uid=None, boot_ns=0)
        == "W(  123) first  (Tag)\nW(  123) second  (Tag)\n"
    )
    assert render(fmt("thread"), ENTRY, uid=None, boot_ns=0).startswith("W(  123:  456) first\n")
    assert render(fmt("raw"), ENTRY, uid=None, boot_ns=0) == "first\nsecond\n"


def test_stamps_and_modifiers() -> None:
    """ "%m-%d %H:%M:%S" + ".%03ld"; UTC; usec ".%06ld"; nsec ".%09ld"; year "%Y-..."; epoch "%19lld";
    monotonic "%6lld" since boot; long: "[ %s %s%5d:%5d %c/%-8.*s ]\\n" + message + "\\n\\n"."""
    one = F.Entry(T_NS, 123, 456, "I", "T", "m")
    assert F.render(fmt("time UTC"), one, uid=None, boot_ns=0) == "01-02 03:04:05.678 I/T       (  123): m\n"
    assert F.render(fmt("threadtime,UTC,usec"), one, uid=None, boot_ns=0) == (
        "01-02 03:04:05.678901   123   456 I T       : m\n"
    )
    assert F.render(fmt("UTC year nsec"), one, uid=None, boot_ns=0).startswith(
        "2024-01-02 03:04:05.678901234 "
    )
    assert F.render(fmt("epoch"), one, uid=None, boot_ns=0).startswith(f"{1704164645:19d}.678   123")
    boot = T_NS - 42_500_000_000
    assert F.render(fmt("monotonic"), one, uid=None, boot_ns=boot).startswith("    42.500   123")
    assert (
        F.render(fmt("long UTC"), one, uid=None, boot_ns=0)
        == "[ 01-02 03:04:05.678   123:  456 I/T        ]\nm\n\n"
    )
    assert F.with_words(F.Format(), "bogus") is None


def test_since_takes_epoch_seconds_or_a_local_date() -> None:
    assert F.since_ns("1704164645.5", T_NS) == 1704164645_500_000_000
    local = time.localtime(1704164645)
    text = time.strftime("%m-%d %H:%M:%S", local) + ".678"
    assert F.since_ns(text, T_NS) == 1704164645_678_000_000
    assert F.since_ns("100", T_NS) is None  # a count, not a time


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Unsupported operation: null"),
        (
            ["query", "--projection", "value"],
            "Content provider URI not specified. Did you specify --uri argument?",
        ),
        (["query", "--uri"], "No value for argument: --uri"),
        (
            ["insert", "--uri", "content://settings/secure", "--bind", "name:s"],
            "Binding not well formed: name:s",
        ),
        (["insert", "--uri", "content://settings/secure", "--bind", "a:q:1"], "Unsupported type: q"),
        (["query", "--uri", "content://settings/secure", "--bogus"], "Unsupported argument: --bogus"),
    ],
)
def test_content_parser_errors_are_content_parsers(argv: list[str], message: str) -> None:
    with pytest.raises(C.UsageError, match=f"^{re.escape(message)}$"):
        C.parse(argv)


def test_content_bindings_escape_colons_and_type_their_values() -> None:
    """splitWithEscaping: a backslash keeps the next character; b: Boolean.parseBoolean; n: null."""
    request = C.parse(
        ["insert", "--uri", "content://settings/system", "--bind", r"name:s:a\:b", "--bind", "value:b:TRUE"]
    )
    assert request.values == {"name": "a:b", "value": "true"}
    assert C.parse(["update", "--uri", "u", "--bind", "value:n:"]).values == {"value": None}


# -- apkinfo: the manifest PackageManager reads (binary XML, ResourceTypes.h) ---------------------

A = load_tool("apkinfo")


@pytest.mark.skipif(shutil.which("aapt") is None, reason="needs aapt (apt-get install aapt)")
def test_apkinfo_reads_the_package_aapt_wrote(tmp_path: Path) -> None:
    """The independent truth: Debian's aapt compiles the manifest to binary XML (UTF-16 string
    pool) and `aapt dump xmltree` shows the package."""
    (tmp_path / "AndroidManifest.xml").write_text(
        '<manifest xmlns:android="http://schemas.android.com/apk/res/android" package="org.farm.unit">'
        "<application/></manifest>"
    )
    apk = tmp_path / "a.apk"
    subprocess.run(
        ["aapt", "package", "-M", str(tmp_path / "AndroidManifest.xml"), "-F", str(apk)], check=True
    )
    tree = subprocess.run(
        ["aapt", "dump", "xmltree", str(apk), "AndroidManifest.xml"], capture_output=True, text=True
    )
    assert 'package="org.farm.unit"' in tree.stdout
    manifest = A.read_apk(apk.read_bytes())
    assert (manifest.package, manifest.version_code, manifest.permissions) == ("org.farm.unit", None, ())
    with pytest.raises(A.NotAnApk):
        A.read_apk(b"ro.build.type=user\n")
