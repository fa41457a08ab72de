"""A phone started with a USB 2 link model (`farm virtual up --link usb2`): a push and a pull of
7 MB arrive intact (the pacer keeps every packet in order) and take at least what the modelled
bandwidth allows (a lower bound: a loaded host only makes them slower); a profile's own `link:`
is read, and a bad value is one line naming the profile file and line."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from vphone.adb.link import PRESETS, LinkKind
from vphone.errors import ConfigError
from vphone.profile import load_profile_file
from vphone.profiles import PROFILES_DIR, load_profile

pytestmark = pytest.mark.integration

SIZE_BYTES = 7_000_000


def test_usb2_link_carries_data_intact_at_no_more_than_its_bandwidth(virtual_phones, tmp_path: Path) -> None:
    phones = virtual_phones(count=1, link=LinkKind.USB2)
    usb2 = PRESETS[LinkKind.USB2]
    assert usb2 is not None
    device = phones[0].device(phones.client())
    blob = os.urandom(SIZE_BYTES)
    local = tmp_path / "blob.bin"
    local.write_bytes(blob)

    started = time.monotonic()
    device.sync.push(str(local), "/data/local/tmp/blob.bin")
    push_s = time.monotonic() - started
    back = tmp_path / "back.bin"
    started = time.monotonic()
    device.sync.pull("/data/local/tmp/blob.bin", str(back))
    pull_s = time.monotonic() - started

    assert hashlib.sha256(back.read_bytes()).digest() == hashlib.sha256(blob).digest()
    on_phone = device.shell("sha256sum /data/local/tmp/blob.bin").split()[0]
    assert on_phone == hashlib.sha256(blob).hexdigest()
    floor_s = usb2.crossing_s(SIZE_BYTES)
    assert push_s >= floor_s, (push_s, floor_s)
    assert pull_s >= floor_s, (pull_s, floor_s)


def test_profile_link_field_is_read_and_a_bad_one_names_the_line(tmp_path: Path) -> None:
    assert load_profile("adreno-sd8gen2").link is LinkKind.NONE
    text = (PROFILES_DIR / "adreno-sd8gen2.yaml").read_text()
    good = tmp_path / "usb3.yaml"
    good.write_text(text + "link: usb3\n")
    assert load_profile_file(good).link is LinkKind.USB3
    bad = tmp_path / "bad.yaml"
    bad.write_text(text + "link: thunderbolt\n")
    line = len(text.splitlines()) + 1
    with pytest.raises(ConfigError) as error:
        load_profile_file(bad)
    assert f"bad.yaml:{line}" in str(error.value) and "link" in str(error.value)
