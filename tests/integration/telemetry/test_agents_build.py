"""The built agents of each ABI: an ELF of that ABI's machine, statically linked, as `file` says.

farm.device.elf reads the header; `file` (libmagic) is the independent reading it is checked
against. Static matters most for the ARM builds: they use glibc, and a phone has no ld-linux.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from telemetry_trees import Agents

from farm.device.elf import read_elf_header, runs_on
from tests.fixtures.cross import ALL_ABIS

AGENT_ABIS = ALL_ABIS
# What `file` prints for each ABI's machine
FILE_SAYS = {
    "x86_64": "ELF 64-bit LSB executable, x86-64",
    "arm64-v8a": "ELF 64-bit LSB executable, ARM aarch64",
    "armeabi-v7a": "ELF 32-bit LSB executable, ARM, EABI5",
}


@pytest.mark.parametrize("program", ["probe", "sampler", "pagecache"])
def test_agent_is_a_static_elf_of_its_abi(agents: Agents, program: str) -> None:
    path = {"probe": agents.probe, "sampler": agents.sampler, "pagecache": agents.pagecache}[program]
    assert path is not None
    header = read_elf_header(path)
    assert header is not None and runs_on(header, agents.abi), header
    assert header.static
    others = [abi for abi in ALL_ABIS if abi != agents.abi]
    assert not any(runs_on(header, abi) for abi in others)
    if shutil.which("file") is None:
        pytest.skip("`file` is not installed (make setup installs it): the header alone was checked")
    said = subprocess.run(["file", "-b", str(path)], capture_output=True, text=True, timeout=10).stdout
    assert said.startswith(FILE_SAYS[agents.abi]) and "statically linked" in said, said
