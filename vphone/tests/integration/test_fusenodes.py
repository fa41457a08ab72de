"""The FUSE clock-node server against the real kernel, and its confinement.

On the host (root): the mount serves its nodes and nothing else (no lookup beyond them, no link,
file, directory, rename, chmod or chown), a refused write fails in write(2). In a rooted phone:
the nodes are bound files whose filesystem root cannot be reached, the phone's root cannot
unmount, move, replace or re-mode them, the host mount is gone once they are bound, and the
daemon (host root) never follows anything the phone does there to a host file."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from vphone.fusenodes import FuseUnavailable, NodeServer, ServedNode
from vphone.physics import CLOCK_FUSE_ENV
from vphone.profiles import load_profile
from vphone.testing.socphone import phone, read, su, wait_until
from vphone.worldthread import WorldThread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting FUSE needs root"),
]
GOVERNOR = "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[NodeServer, dict[str, bytes]]]:
    values = {"a/governor": b"schedutil\n", "b/max_freq": b"1804800\n"}

    def write(rel: str, data: bytes) -> int | None:
        if not data.strip().isalnum():
            return errno.EINVAL
        values[rel] = data
        return None

    nodes = tuple(ServedNode(rel, 0o644, 0, 0) for rel in values)
    server = NodeServer(nodes, lambda rel: values[rel], write)
    try:
        server.mount(tmp_path / "mnt")
    except FuseUnavailable as exc:
        pytest.skip(str(exc))
    with server:
        yield server, values


def test_the_kernel_sees_the_nodes_and_the_refusals(served: tuple[NodeServer, dict[str, bytes]]) -> None:
    server, values = served
    node = server.path_of(0)
    assert node.read_text() == "schedutil\n" and os.stat(node).st_size == 4096
    fd = os.open(node, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"performance\n")
        with pytest.raises(OSError) as refused:
            os.write(fd, b"no such governor\n")
        assert refused.value.errno == errno.EINVAL
    finally:
        os.close(fd)
    assert values["a/governor"] == b"performance\n" and node.read_text() == "performance\n"
    # A reader that keeps the node open sees each new value (no page cache: direct I/O).
    with open(node, "rb", buffering=0) as keeper:
        assert os.pread(keeper.fileno(), 64, 0) == b"performance\n"
        values["a/governor"] = b"powersave\n"
        assert os.pread(keeper.fileno(), 64, 0) == b"powersave\n"


def test_a_read_continues_its_own_snapshot_and_a_node_without_store_refuses_writers(
    tmp_path: Path,
) -> None:
    """As kernfs: reads that continue an open file's read at offset 0 come from the page that
    read filled (old code: each READ took the value anew, so a byte-wise reader mixed two values);
    a read-only attribute cannot be opened for writing (old code: the open succeeded)."""
    values = {"temp": b"41500\n"}
    server = NodeServer((ServedNode("temp", 0o444, 0, 0),), lambda rel: values[rel], lambda _r, _d: None)
    try:
        server.mount(tmp_path / "mnt")
    except FuseUnavailable as exc:
        pytest.skip(str(exc))
    with server:
        fd = os.open(server.path_of(0), os.O_RDONLY)
        try:
            first = os.read(fd, 2)
            values["temp"] = b"9\n"
            assert first + os.read(fd, 4096) == b"41500\n"
            assert os.pread(fd, 4096, 0) == b"9\n"  # offset 0 again: a new snapshot
        finally:
            os.close(fd)
        with pytest.raises(PermissionError):
            os.open(server.path_of(0), os.O_WRONLY)


def test_nothing_beyond_the_nodes_can_be_named_made_or_changed(
    served: tuple[NodeServer, dict[str, bytes]], tmp_path: Path
) -> None:
    server, _ = served
    mnt = tmp_path / "mnt"
    assert sorted(os.listdir(mnt)) == []  # the directory lists nothing
    for name in ("passwd", "../mnt", "n0/..", "n7"):
        assert not os.path.exists(mnt / name) or name == "../mnt"
    attempts = {
        "symlink": lambda: os.symlink("/etc/shadow", mnt / "n9"),
        "link": lambda: os.link(server.path_of(0), mnt / "n9"),
        "create": lambda: os.open(mnt / "n9", os.O_CREAT | os.O_WRONLY, 0o644),
        "mkdir": lambda: os.mkdir(mnt / "d"),
        "mknod": lambda: os.mknod(mnt / "fifo", 0o600 | 0o010000),
        "unlink": lambda: os.unlink(server.path_of(0)),
        "rename": lambda: os.rename(server.path_of(0), mnt / "n9"),
        "chmod": lambda: os.chmod(server.path_of(0), 0o4777),
        "chown": lambda: os.chown(server.path_of(0), 1000, 1000),
        "below a node": lambda: os.stat(server.path_of(0) / "x"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(OSError) as refused:
            attempt()
        assert refused.value.errno in (errno.EPERM, errno.EACCES, errno.ENOTDIR, errno.ENOENT), what
    assert os.stat(server.path_of(0)).st_mode & 0o7777 == 0o644


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap")
def test_in_a_rooted_phone_the_nodes_are_bound_files_its_root_cannot_escape_through(tmp_path: Path) -> None:
    with phone(load_profile("adreno-sd865"), "VPFUSE1", tmp_path) as w:
        if w.world.physics._fused is None:
            pytest.skip("FUSE is not usable here (the daemon log says why)")
        _phone_root_attempts(w, tmp_path)


def _phone_root_attempts(w: WorldThread, tmp_path: Path) -> None:
    mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    assert "farm-clocknodes" not in mounts  # the host mount is detached once the nodes are bound
    inside = su(w, "grep -c farm-clocknodes /proc/self/mountinfo").stdout.strip()
    # the clock nodes root may write and the charging switch, each bound from the FUSE server
    charging = w.world.physics.nodes.charging_rel()
    assert int(inside) == len(w.world.physics.clock_nodes.writable_paths()) + (1 if charging else 0)
    victim = tmp_path / "host-file"
    victim.write_text("host\n")
    attempts = [
        f"ls {GOVERNOR}/..",  # the filesystem's root is not reachable through a bound file
        f"umount {GOVERNOR}",  # no mount rights (seccomp, no CAP_SYS_ADMIN)
        f"rm {GOVERNOR}",  # a mount point
        f"mv {GOVERNOR} /data/local/tmp/g",
        f"ln -sf {victim} {GOVERNOR}",
        f"chmod 4777 {GOVERNOR}",
        f"chown 2000 {GOVERNOR}",
    ]
    for command in attempts:
        result = su(w, command)
        assert result.returncode != 0, (command, result)
    assert read(w, GOVERNOR) == "schedutil\n"
    assert su(w, f"echo performance > {GOVERNOR}").returncode == 0
    assert read(w, GOVERNOR) == "performance\n"
    assert victim.read_text() == "host\n" and victim.stat().st_uid == 0
    ls = su(w, f"ls -l {GOVERNOR}").stdout.split()
    assert ls[0] == "-rw-r--r--" and ls[2] == "root"  # the phone's root owns it, as on a phone


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap")
def test_without_fuse_the_nodes_are_plain_files_that_revert_a_refused_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback (no /dev/fuse, or switched off): the write succeeds, inotify reverts it."""
    monkeypatch.setenv(CLOCK_FUSE_ENV, "0")
    with phone(load_profile("adreno-sd865"), "VPFUSE2", tmp_path) as w:
        assert w.world.physics._fused is None
        assert su(w, f"echo bogus > {GOVERNOR}").returncode == 0
        wait_until(lambda: read(w, GOVERNOR) == "schedutil\n", "the governor to come back")
        assert "governor 'bogus' is not available (EINVAL)" in read(w, "/dev/.farm/kmsg")
        assert su(w, f"echo performance > {GOVERNOR}").returncode == 0
        wait_until(lambda: read(w, GOVERNOR) == "performance\n", "the governor to take")
