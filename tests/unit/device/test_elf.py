"""farm.device.elf on headers built from the ELF specification's field layout (tests/fixtures/elf.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.device.elf import ElfCutShort, elf_header, read_elf_header, runs_on
from tests.fixtures.elf import EM_AARCH64, EM_ARM, EM_X86_64, PT_DYNAMIC, PT_INTERP, PT_LOAD, make_elf


@pytest.mark.parametrize(
    ("bits", "machine", "abi"),
    [(64, EM_AARCH64, "arm64-v8a"), (32, EM_ARM, "armeabi-v7a"), (64, EM_X86_64, "x86_64")],
)
def test_machine_and_linkage(bits: int, machine: int, abi: str) -> None:
    static = elf_header(make_elf(bits, machine, [PT_LOAD, PT_LOAD]))
    assert static.bits == bits and static.static and runs_on(static, abi)
    dynamic = elf_header(make_elf(bits, machine, [PT_LOAD, PT_INTERP, PT_DYNAMIC]))
    assert not dynamic.static and runs_on(dynamic, abi)
    assert "dynamically linked" in dynamic.describe()


def test_static_pie_has_a_dynamic_segment_but_no_interpreter() -> None:
    assert elf_header(make_elf(64, EM_AARCH64, [PT_LOAD, PT_DYNAMIC])).static


def test_a_binary_runs_only_on_its_own_abis() -> None:
    arm32 = elf_header(make_elf(32, EM_ARM, [PT_LOAD]))
    assert arm32.abis == ("armeabi-v7a", "armeabi")
    assert not runs_on(arm32, "arm64-v8a") and not runs_on(arm32, "x86_64")
    # 32-bit x86-64 (x32) and big-endian ARM are not Android ABIs
    assert elf_header(make_elf(32, EM_X86_64, [PT_LOAD])).abis == ()
    assert not runs_on(elf_header(make_elf(32, EM_ARM, [PT_LOAD], big=True)), "armeabi-v7a")
    unknown = elf_header(make_elf(64, 9999, [PT_LOAD]))
    assert unknown.abis == () and unknown.machine_name == "machine 9999"


def test_not_an_elf_and_cut_short() -> None:
    with pytest.raises(ValueError, match="not an ELF"):
        elf_header(b"#!/bin/sh\necho hi\n")
    with pytest.raises(ElfCutShort):
        elf_header(make_elf(64, EM_AARCH64, [PT_LOAD])[:40])
    with pytest.raises(ElfCutShort):
        elf_header(make_elf(64, EM_AARCH64, [PT_LOAD, PT_INTERP])[:100])


def test_read_from_a_file(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    assert read_elf_header(script) is None
    # program headers far into the file: more than the first read is read
    far = tmp_path / "far"
    far.write_bytes(make_elf(64, EM_AARCH64, [PT_LOAD, PT_INTERP], phoff=10_000))
    header = read_elf_header(far)
    assert header is not None and not header.static
