"""The build identity a phone's build.prop carries, derived from its profile (pure).

Clients read more of it than a profile names: Mobly's AndroidDevice.build_info reports
ro.build.id, ro.build.version.incremental, .codename, ro.build.product and
ro.build.characteristics, and a report of a run should name the build the way a real one does.
The values hang together as on a phone: the fingerprint is
brand/name/device:release/id/incremental:type/tags, the display id is the build id, and the
partition fingerprints (system, vendor) equal the build's. A profile may set any of them itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

BUILD_DATE_UTC_S = 1_793_491_200  # 2026-11-01 00:00:00 UTC: every virtual build's date
BUILD_DATE_TEXT = "Sun Nov  1 00:00:00 UTC 2026"
SECURITY_PATCH = "2026-11-01"
INCREMENTAL = "1"
TAGS = "release-keys"


def build_props(profile_props: Mapping[str, str], serial: str) -> dict[str, str]:
    """The profile's props with the build identity filled in; the build id comes from the
    serial, so that two phones of one profile have builds of their own."""
    props = dict(profile_props)
    digest = hashlib.sha256(serial.encode()).hexdigest()
    build_id = props.get("ro.build.id", f"FARM.{digest[:6].upper()}")
    build_type = props.get("ro.build.type", "user")
    defaults = {
        "ro.build.id": build_id,
        "ro.build.display.id": build_id,
        "ro.build.version.incremental": INCREMENTAL,
        "ro.build.version.codename": "REL",
        "ro.build.version.all_codenames": "REL",
        "ro.build.version.preview_sdk": "0",
        "ro.build.version.security_patch": SECURITY_PATCH,
        "ro.build.type": build_type,
        "ro.build.tags": TAGS,
        "ro.build.date": BUILD_DATE_TEXT,
        "ro.build.date.utc": str(BUILD_DATE_UTC_S),
        "ro.build.user": "farm",
        "ro.build.host": "farm-virtual",
        "ro.build.product": props["ro.product.device"],
        "ro.build.characteristics": "default",
        "ro.product.board": props.get("ro.board.platform", props["ro.product.device"]),
        "ro.bootloader": "unknown",
    }
    for key, value in defaults.items():
        props.setdefault(key, value)
    fingerprint = (
        f"{props['ro.product.brand']}/{props['ro.product.name']}/{props['ro.product.device']}:"
        f"{props['ro.build.version.release']}/{props['ro.build.id']}/{props['ro.build.version.incremental']}:"
        f"{props['ro.build.type']}/{props['ro.build.tags']}"
    )
    props.setdefault("ro.build.fingerprint", fingerprint)
    for partition in ("system", "vendor", "product"):
        props.setdefault(f"ro.{partition}.build.fingerprint", props["ro.build.fingerprint"])
    return props
