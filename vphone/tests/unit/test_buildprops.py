"""The build identity filled in from a profile (vphone/src/vphone/buildprops.py)."""

from __future__ import annotations

from vphone.buildprops import build_props
from vphone.profiles import load_profile


def test_the_fingerprint_is_made_of_the_props_it_names() -> None:
    props = build_props(load_profile("adreno-sd865").props, "SERIAL-A")
    brand_name_device, release_id_inc, type_tags = props["ro.build.fingerprint"].split(":")
    assert brand_name_device == "Xiaomi/umi/umi"
    assert release_id_inc == f"12/{props['ro.build.id']}/{props['ro.build.version.incremental']}"
    assert type_tags == "userdebug/release-keys"
    for partition in ("system", "vendor"):
        assert props[f"ro.{partition}.build.fingerprint"] == props["ro.build.fingerprint"]
    assert props["ro.build.product"] == "umi" and props["ro.build.version.codename"] == "REL"


def test_each_phone_has_a_build_of_its_own_and_a_profile_may_name_its_build() -> None:
    profile = dict(load_profile("adreno-sd8gen2").props)
    a, b = build_props(profile, "SERIAL-A"), build_props(profile, "SERIAL-B")
    assert a["ro.build.id"] != b["ro.build.id"]
    assert build_props(profile, "SERIAL-A") == a  # stable across boots of one phone
    named = build_props({**profile, "ro.build.id": "UP1A.231005.007"}, "SERIAL-A")
    assert named["ro.build.id"] == named["ro.build.display.id"] == "UP1A.231005.007"
    assert "/UP1A.231005.007/" in named["ro.build.fingerprint"]
