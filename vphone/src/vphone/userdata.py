"""The phone's userdata partition: a bounded filesystem for what the phone can write to disk.

A phone's /data, /sdcard and /dev/.farm were plain directories of the host's disk: one shell wrote
3 GiB there and would have filled the disk. As on a phone, where /sdcard is /data/media/0 on
the userdata partition, they now live on one ext4 filesystem of the profile's storage size
(scaled to the host, `size_bytes`), in a sparse image file beside the phone's state dir:

  <state_dir>/phones/<serial>.userdata.img     the image (sparse: the host pays for what is used)
  <state_dir>/phones/<serial>/.userdata/       its mount (a loop device)
      data/  media/  ctl/                      bound at <serial>/data, sdcard, ctl

A write past it fails with ENOSPC inside the phone (`No space left on device`), and `df /data`
shows the partition's size. The image outlives down/up like the trees did; the mounts are made
at the phone's first start and kept across its reboots, removed when the daemon stops it.
Without loop devices (a container without them, not root) the trees stay plain directories and
the daemon log says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

MOUNT_DIR = ".userdata"
TREES = (("data", "data"), ("media", "sdcard"), ("ctl", "ctl"))  # (in the image, in the state dir)
MIN_BYTES = 32 << 20  # ext4's journal and the phone's own files fit
HOST_FREE_SHARE = 8  # a phone's partition is at most 1/8 of the host's free space at creation
MKFS_TIMEOUT_S = 60.0
MOUNT_TIMEOUT_S = 30.0


class UserdataUnavailable(OSError):
    """No bounded filesystem here (no loop device, no mkfs.ext4, not root)."""


def size_bytes(storage_mb: int, host_free_bytes: int) -> int:
    """The partition's size: the phone's storage, at most a share of the host's free space (so a
    128 GB phone on a lab machine cannot fill its disk), at least MIN_BYTES."""
    return max(MIN_BYTES, min(storage_mb << 20, host_free_bytes // HOST_FREE_SHARE))


def image_path(root: Path) -> Path:
    return root.parent / f"{root.name}.userdata.img"


def _run(argv: list[str], timeout_s: float) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UserdataUnavailable(f"{argv[0]}: {error}") from error
    if result.returncode != 0:
        raise UserdataUnavailable(f"{' '.join(argv[:2])}: {result.stderr.strip() or result.returncode}")


def _mounted(path: Path) -> bool:
    return os.path.ismount(path)


def mount(root: Path, storage_mb: int) -> None:
    """Mount the phone's partition (made on first use) and bind its trees into `root`; raises
    UserdataUnavailable when this host cannot."""
    image = image_path(root)
    top = root / MOUNT_DIR
    root.mkdir(parents=True, exist_ok=True)
    if not image.exists():
        size = size_bytes(storage_mb, _free_bytes(root.parent))
        tmp = image.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.truncate(size)
        # No reserved blocks (a phone's root gets no extra room either); inode tables written
        # lazily, so a large sparse image is made in a moment.
        _run(
            ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", str(tmp)],
            MKFS_TIMEOUT_S,
        )
        os.replace(tmp, image)
    top.mkdir(mode=0o700, exist_ok=True)
    if not _mounted(top):
        # A loop device may still hold the image: a mount namespace copied while it was mounted
        # (another phone's, made by vphone-exec launch) keeps it after our unmount. Its device is
        # mounted again then (the same superblock): a second loop device on the same ext4 image
        # would corrupt it.
        device = _loop_device(image)
        if device is not None:
            _run(["mount", "-o", "nosuid,nodev", device, str(top)], MOUNT_TIMEOUT_S)
        else:
            _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(top)], MOUNT_TIMEOUT_S)
    os.chmod(top, 0o755)
    for inside, outside in TREES:
        source, target = top / inside, root / outside
        source.mkdir(exist_ok=True)
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        target.mkdir(exist_ok=True)
        if not _mounted(target):
            _run(["mount", "--bind", str(source), str(target)], MOUNT_TIMEOUT_S)


def unmount(root: Path) -> None:
    """Remove the binds and the partition's mount (lazily where a process still holds a file
    there: it lives until that one leaves); the loop device goes with the last (autoclear)."""
    for _inside, outside in TREES:
        _detach(root / outside)
    _detach(root / MOUNT_DIR)


def _detach(path: Path) -> None:
    if not _mounted(path):
        return
    try:
        _run(["umount", str(path)], MOUNT_TIMEOUT_S)
    except UserdataUnavailable:
        with contextlib.suppress(UserdataUnavailable):
            _run(["umount", "-l", str(path)], MOUNT_TIMEOUT_S)


def _loop_device(image: Path) -> str | None:
    """The loop device that holds `image`, if one does (`losetup -j`: "/dev/loopN: ...")."""
    try:
        result = subprocess.run(
            ["losetup", "-j", str(image)],
            capture_output=True,
            text=True,
            timeout=MOUNT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UserdataUnavailable(f"losetup: {error}") from error
    first = result.stdout.strip().partition("\n")[0]
    return first.partition(":")[0] or None


def _free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
