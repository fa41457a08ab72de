"""Which Android ABI a program binary is built for, read from its ELF header (pure).

A binary pushed to a phone of another ABI fails there with an exec error that names nothing;
reading the header on the host first turns that into one clear line before anything is pushed.
Only what deploying needs is read: class (32/64-bit), byte order, machine, and whether a program
interpreter is requested (a dynamically linked binary; one without is static).

    header = elf_header(path.read_bytes()[:ELF_PREFIX_BYTES])  # ValueError if not an ELF
    header.abis        # ("arm64-v8a",): the Android ABIs it can run as
    header.static      # no PT_INTERP: runs without the phone's dynamic linker
    runs_on(header, "armeabi-v7a")
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
# Enough for the ELF header and the program headers of any binary a toolchain writes (they
# follow the 52/64-byte header; a static glibc binary has about 10).
ELF_PREFIX_BYTES = 4096

_PT_INTERP = 3
# e_machine -> (bits, Android ABIs). armeabi is the pre-v7 32-bit ARM ABI; the same machine.
_MACHINES: dict[int, tuple[int, tuple[str, ...], str]] = {
    183: (64, ("arm64-v8a",), "ARM aarch64"),
    40: (32, ("armeabi-v7a", "armeabi"), "ARM"),
    62: (64, ("x86_64",), "x86-64"),
    3: (32, ("x86",), "Intel 80386"),
    243: (64, ("riscv64",), "RISC-V"),
}


class ElfCutShort(ValueError):
    """The bytes given end before the header or program headers do."""


@dataclass(frozen=True)
class ElfHeader:
    bits: int  # 32 or 64 (EI_CLASS)
    little_endian: bool
    machine: int  # e_machine
    machine_name: str  # as `file` prints it ("ARM aarch64"), or "machine N"
    abis: tuple[str, ...]  # Android ABIs of this machine and class; () when none
    static: bool  # no program interpreter (PT_INTERP) requested

    def describe(self) -> str:
        linkage = "statically linked" if self.static else "dynamically linked"
        return f"ELF {self.bits}-bit {self.machine_name}, {linkage}"


def is_elf(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


def elf_header(data: bytes) -> ElfHeader:
    """The header of the ELF file whose first bytes are `data` (ELF_PREFIX_BYTES are enough).

    Raises ValueError naming what is wrong: not an ELF, an unknown class, or (ElfCutShort) the
    bytes end before the program headers do."""
    if not is_elf(data):
        raise ValueError("not an ELF file")
    if len(data) < 52:
        raise ElfCutShort("ELF header cut short")
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise ValueError(f"ELF header with unknown class {ei_class} or byte order {ei_data}")
    bits = 32 if ei_class == 1 else 64
    order = "<" if ei_data == 1 else ">"
    (machine,) = struct.unpack_from(order + "H", data, 18)
    if bits == 32:
        phoff, phentsize, phnum = (
            *struct.unpack_from(order + "I", data, 28),
            *struct.unpack_from(order + "HH", data, 42),
        )
    else:
        if len(data) < 64:
            raise ElfCutShort("ELF header cut short")
        phoff, phentsize, phnum = (
            *struct.unpack_from(order + "Q", data, 32),
            *struct.unpack_from(order + "HH", data, 54),
        )
    end = phoff + phentsize * phnum
    if phnum and phentsize < 4:
        raise ValueError(f"ELF program header entries of {phentsize} bytes")
    if end > len(data):
        raise ElfCutShort(f"ELF program headers end at byte {end}, past the {len(data)} bytes read")
    types = [struct.unpack_from(order + "I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    known_bits, abis, name = _MACHINES.get(machine, (bits, (), f"machine {machine}"))
    return ElfHeader(
        bits=bits,
        little_endian=ei_data == 1,
        machine=machine,
        machine_name=name,
        abis=abis if known_bits == bits else (),
        static=_PT_INTERP not in types,
    )


def read_elf_header(path: Path) -> ElfHeader | None:
    """The ELF header of a file on this host, None when it is not an ELF (a script)."""
    with path.open("rb") as f:
        data = f.read(ELF_PREFIX_BYTES)
        if not is_elf(data):
            return None
        try:
            return elf_header(data)
        except ElfCutShort:
            return elf_header(data + f.read())  # program headers placed far into the file


def runs_on(header: ElfHeader, abi: str) -> bool:
    """Whether a phone process of `abi` can exec this binary."""
    return header.little_endian and abi in header.abis
