"""farm's clock control on a rooted virtual phone whose kernel refuses a write (EINVAL in the
write, as a real sysfs store does): the write counts as failed, and the error names the phone
and the node. The case that happens in a lab: a restore record (from a farm killed mid-run)
holding a value this phone's kernel no longer takes, e.g. a governor a new ROM dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.device import controls
from farm.device.session import DeviceSession
from farm.engine.clocks import ClockRestore, recover_clocks
from farm.errors import FarmError
from farm.store import Store
from farm.store import devices as device_store

pytestmark = pytest.mark.integration
POLICY = "/sys/devices/system/cpu/cpufreq/policy0"
DEVICE_ID = "local/refusing"


def test_a_refused_write_is_a_failed_write_naming_phone_and_node(virtual_phones, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    phones = virtual_phones(count=1, profiles=["adreno-sd865"])  # rooted, its clock nodes over FUSE
    log = (phones.state_dir / "daemon.log").read_text(encoding="utf-8", errors="replace")
    if "clock nodes served over FUSE" not in log:
        pytest.skip("FUSE is not usable here: writes are judged after the fact")
    session = DeviceSession(phones[0].device(phones.client()), DEVICE_ID, default_timeout_s=30)
    governor, top = f"{POLICY}/scaling_governor", f"{POLICY}/scaling_max_freq"
    written = controls.write_many_as_root(session, [(governor, "bogus"), (top, "1804800")])
    assert written.refused == {governor: "bogus"}  # only the refused one
    assert written.readback == {governor: "schedutil", top: "1804800"}
    # Refused then taken: the last write of a node decides.
    again = controls.write_many_as_root(session, [(governor, "bogus"), (governor, "performance")])
    assert again.refused == {} and again.readback[governor] == "performance"
    with Store(tmp_path / "farm.db") as store:
        left = ClockRestore(((governor, "interactive"), (top, "1804800")))  # not this kernel's
        device_store.mark_clocks_changed(store, DEVICE_ID, left.to_json())
        with pytest.raises(FarmError) as failed:
            recover_clocks(store, session, DEVICE_ID)
        message = str(failed.value)
        assert message.startswith(f"{DEVICE_ID}: clocks not restored:"), message
        assert f"'interactive' for {governor}" in message
        assert device_store.clocks_marker(store, DEVICE_ID) is not None  # kept for the next try
    assert session.read_text(governor) == "performance\n"  # the refused write changed nothing
