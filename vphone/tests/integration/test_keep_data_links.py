"""`farm virtual up` on a state dir a phone has used: links the phone left in its kept trees
(/data, /sdcard, /dev/.farm) must not make the daemon (host root) chmod or chown host files.

Before the fix, prepare_tree's mkdir/chmod/chown followed a link at ctl/props (the phone's shell
owns /dev/.farm) and chown_tree walked a link at data/local/tmp (the phone's root owns /data):
the host directory named by the link became the phone shell's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from vphone.layout import Owners, StateLayout, keeps_data, prepare_tree
from vphone.profiles import load_profile

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")

OWNERS = Owners(root=(2_000_000_000, 2_000_000_000), shell=(2_000_002_000, 2_000_002_000))


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "host-secrets"
    victim.mkdir(mode=0o700)
    (victim / "shadow").write_text("root:x\n")
    os.chmod(victim / "shadow", 0o600)
    return victim


def _assert_untouched(victim: Path) -> None:
    for path in (victim, victim / "shadow"):
        st = os.lstat(path)
        assert (st.st_uid, st.st_gid) == (0, 0), f"{path} was chowned to {st.st_uid}"
    assert os.lstat(victim).st_mode & 0o7777 == 0o700
    assert os.lstat(victim / "shadow").st_mode & 0o7777 == 0o600


def test_same_phone_up_does_not_follow_a_link_in_the_control_dir(tmp_path: Path) -> None:
    profile = load_profile("adreno-sd8gen2")
    lay = StateLayout(tmp_path / "phone")
    prepare_tree(profile, lay, "VP6520", OWNERS, keep_data=False)
    victim = _victim(tmp_path)
    # What the phone's shell could do in /dev/.farm (ctl/) when it owned it (now root's, sticky),
    # and still can in settings/.
    for sub in ("props", "settings"):
        os.rename(lay.ctl / sub, lay.ctl / f"{sub}.old")
        os.symlink(victim, lay.ctl / sub)
    assert keeps_data(lay, profile, "VP6520")
    prepare_tree(profile, lay, "VP6520", OWNERS, keep_data=False)
    _assert_untouched(victim)
    assert not (victim / "set").exists()
    for sub, owner in (("props", OWNERS.root), ("props/set", OWNERS.shell), ("settings", OWNERS.shell)):
        assert not (lay.ctl / sub).is_symlink() and (lay.ctl / sub).is_dir()
        assert os.stat(lay.ctl / sub).st_uid == owner[0]


def test_keep_data_of_another_profile_hands_back_shells_places_without_following_links(
    tmp_path: Path,
) -> None:
    lay = StateLayout(tmp_path / "phone")
    prepare_tree(load_profile("adreno-sd865"), lay, "VP6520", OWNERS, keep_data=False)
    victim = _victim(tmp_path)
    # What the phone's root can do in /data and /sdcard: a link for the daemon's chown walk.
    tmp = lay.data / "local" / "tmp"
    os.rmdir(tmp)
    os.symlink(victim, tmp)
    os.symlink(victim / "shadow", lay.sdcard / "shadow-link")
    os.mkdir(lay.sdcard / "left-by-root")
    prepare_tree(load_profile("adreno-sd8gen2"), lay, "VP6520", OWNERS, keep_data=True)
    _assert_untouched(victim)
    assert tmp.is_dir() and not tmp.is_symlink()
    assert os.stat(tmp).st_uid == OWNERS.shell[0]
    assert os.lstat(lay.sdcard / "shadow-link").st_uid == OWNERS.shell[0]  # the link itself
    assert os.stat(lay.sdcard / "left-by-root").st_uid == OWNERS.shell[0]
