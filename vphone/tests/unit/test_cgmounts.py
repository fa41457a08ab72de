"""cgroup v1 mounts inside a phone (vphone/src/vphone/cgmounts.py, tools/t_mount.py): which hierarchy
a `mount -t cgroup -o ...` names, where a view may go, what /proc/cgroups and `mount` show, and
that the daemon's writes never follow a link the phone's root planted."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import ModuleType

import pytest
from vphone.cgmounts import (
    CgroupMount,
    Hierarchy,
    choose_hierarchy,
    proc_cgroups_text,
    refused_dir,
    table_entries,
)
from vphone.nodes import write_node
from vphone.testing.phonetools import load_tool

from vphone import beneath

HS = (
    Hierarchy(1, "cpuset", "/dev/cpuset", True, 6),
    Hierarchy(2, "cpu", "/dev/cpuctl", False, 7),
)


def _t_mount() -> ModuleType:
    return load_tool("t_mount")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("cpuset", HS[0]),
        ("rw,nosuid,cpuset,noprefix", HS[0]),  # options other than controllers are ignored
        ("cpu", HS[1]),
        ("cpu,cpuset", errno.EBUSY),  # two hierarchies
        ("", errno.EBUSY),  # none named: all of them, which are not one hierarchy
        ("memory", errno.EINVAL),  # a controller the phone has no view of
        ("cpuset,bogus", errno.EINVAL),
    ],
)
def test_choose_hierarchy_as_the_kernel_answers(options: str, expected: object) -> None:
    assert choose_hierarchy(options, HS) == expected


@pytest.mark.parametrize(
    ("phone_dir", "expected"),
    [
        ("/data/local/tmp/devlib-target/cgroups/devlib_cgh1", None),
        ("/storage/emulated/0/devlib-target/cgroups/devlib_cgh1", None),
        ("/", errno.EACCES),
        ("/dev/.farm", errno.EACCES),
        ("/dev/.farm/x", errno.EACCES),
        ("/proc/1", errno.EACCES),
        ("/system/bin", errno.EACCES),
        ("/sys", errno.EACCES),
        ("/data/../proc", errno.EINVAL),
        ("relative/dir", errno.EINVAL),
    ],
)
def test_refused_dirs(phone_dir: str, expected: int | None) -> None:
    assert refused_dir(phone_dir) == expected


def test_proc_cgroups_lists_only_the_phones_hierarchies() -> None:
    assert proc_cgroups_text(HS) == (
        "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t1\t6\t1\ncpu\t2\t7\t1\n"
    )


def test_mount_lists_views_as_cgroup_mounts_and_hides_their_inner_binds() -> None:
    table = table_entries([CgroupMount("devlib_cgh1", "/data/cg/devlib_cgh1", 1)], HS)
    proc_mounts = (
        "/dev/vda /data ext4 rw,nosuid,nodev,relatime 0 0\n"
        "/dev/vda /dev/cpuset ext4 rw,nosuid,nodev,relatime 0 0\n"
        "cgroup /dev/cpuset/top-app/tasks cgroup rw,nosuid,nodev,relatime,cpu 0 0\n"
        "/dev/vda /data/cg/devlib_cgh1 ext4 rw,nosuid,nodev,relatime 0 0\n"
        "cgroup /data/cg/devlib_cgh1/top-app/tasks cgroup rw,cpu 0 0\n"
        "/dev/vda /data/with\\040space ext4 rw 0 0\n"
    )
    assert _t_mount().list_mounts(proc_mounts, table).splitlines() == [
        "/dev/vda on /data type ext4 (rw,nosuid,nodev,relatime)",
        "none on /dev/cpuset type cgroup "
        "(rw,nosuid,nodev,noexec,relatime,cpuset,noprefix,release_agent=/sbin/cpuset_release_agent)",
        "devlib_cgh1 on /data/cg/devlib_cgh1 type cgroup "
        "(rw,nosuid,nodev,noexec,relatime,cpuset,noprefix,release_agent=/sbin/cpuset_release_agent)",
        "/dev/vda on /data/with space type ext4 (rw)",
    ]


def test_writes_below_a_phone_tree_never_follow_a_planted_link(tmp_path: Path) -> None:
    tree, host = tmp_path / "tree", tmp_path / "host"
    (tree / "group").mkdir(parents=True)
    host.mkdir()
    victim = host / "effective_cpus"
    victim.write_text("host's\n")
    (tree / "group" / "cpus").write_text("0-3\n")
    # A link as the last component, and a directory swapped for a link to the host's.
    (tree / "group" / "effective_cpus").symlink_to(victim)
    (tree / "swapped").symlink_to(host)
    for rel in ("group/effective_cpus", "swapped/effective_cpus"):
        with pytest.raises(OSError) as refused:
            write_node(tree / rel, "0-1\n", beneath=tree)
        assert refused.value.errno in (errno.ELOOP, errno.ENOTDIR)
        with pytest.raises(OSError):
            beneath.read_text(tree, rel)
    assert victim.read_text() == "host's\n"
    with pytest.raises(OSError):
        write_node(tree / "group" / "effective_cpus", "0-1\n")  # no tree given: still no link
    with pytest.raises(OSError):
        beneath.open_file(tree, "group/../../host/effective_cpus", os.O_RDONLY)
    write_node(tree / "group" / "cpus", "0-1\n", beneath=tree)
    assert beneath.read_text(tree, "group/cpus") == "0-1\n"
    # Atomic replaces and appends in the control dir (shell's) follow no link either.
    (tree / "kmsg").symlink_to(victim)
    with pytest.raises(OSError):
        beneath.append_text(tree, "kmsg", "a kernel line\n")
    beneath.replace_text(tree, "kmsg", "replaced\n", 0o644)  # the link itself is replaced
    assert not (tree / "kmsg").is_symlink() and (tree / "kmsg").read_text() == "replaced\n"
    with pytest.raises(OSError):
        beneath.replace_text(tree, "swapped/state.json", "{}", 0o644)
    assert victim.read_text() == "host's\n" and sorted(p.name for p in host.iterdir()) == ["effective_cpus"]
