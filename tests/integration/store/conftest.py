"""Store fault fixtures: a tiny tmpfs (mounted and unmounted here; needs root, as in CI)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


class Tmpfs:
    """A tmpfs of `size` at `.path`; `.remount(read_only=...)` flips it."""

    def __init__(self, path: Path, size: str) -> None:
        self.path = path
        self.size = size

    def remount(self, *, read_only: bool) -> None:
        mode = "ro" if read_only else "rw"
        subprocess.run(["mount", "-o", f"remount,{mode}", str(self.path)], check=True, capture_output=True)

    def fill(self) -> Path:
        """Write zeros to the last block (the disk is then full); the filler file's path."""
        filler = self.path / "filler"
        with filler.open("wb") as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
            except OSError:
                pass
        return filler


@pytest.fixture
def tiny_tmpfs() -> Iterator[Callable[[str], Tmpfs]]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mounted: list[Tmpfs] = []

    def mount(size: str) -> Tmpfs:
        path = Path(tempfile.mkdtemp(prefix="farm-tmpfs-"))
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
            check=True,
            capture_output=True,
        )
        mounted.append(Tmpfs(path, size))
        return mounted[-1]

    try:
        yield mount
    finally:
        for fs in mounted:
            try:
                subprocess.run(["umount", str(fs.path)], check=True, capture_output=True)
            except subprocess.CalledProcessError:  # still busy: detach it now, freed when let go
                subprocess.run(["umount", "--lazy", str(fs.path)], check=True, capture_output=True)
            with contextlib.suppress(OSError):
                fs.path.rmdir()
