"""Requests to the phone's daemon are judged by their file's owner, so nobody else may change
them: a root tool's `mount -t cgroup` request was world-writable until the daemon took it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from vphone.testing.phonetools import load_tool


@pytest.fixture
def ctlstore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    module = load_tool("ctlstore")
    monkeypatch.setattr(module, "CTL", str(tmp_path))
    return module


def test_a_request_is_its_writers_alone_and_whole(ctlstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    old = os.umask(0)  # a permissive umask must not make it writable by others either
    try:
        ctlstore.write_request("mount.request.7", {"dir": "/data/local/tmp/cg", "options": "cpuset"})
    finally:
        os.umask(old)
    final = tmp_path / "mount.request.7"
    assert stat.S_IMODE(final.stat().st_mode) == 0o644
    assert json.loads(final.read_text()) == {"dir": "/data/local/tmp/cg", "options": "cpuset"}
    assert [p.name for p in tmp_path.iterdir()] == ["mount.request.7"]  # no temporary left


def test_a_link_planted_at_the_temporary_is_not_written_through(ctlstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / f"taskset.request.1.{os.getpid()}.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        ctlstore.write_request("taskset.request.1", {"tids": [1], "mask": 1})
    assert victim.read_text() == "untouched" and not (tmp_path / "taskset.request.1").exists()
