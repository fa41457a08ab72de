"""Telling phones that report one serial apart (pure): `adb devices -l` lines, how each phone is
reached, and the identity each is given (issue 27)."""

from __future__ import annotations

import pytest

from farm.fleet.endpoint import AdbState, Listed, parse_devices_l
from farm.fleet.inventory import (
    IdentityMismatch,
    Phone,
    PhoneState,
    addresses,
    check_identity,
    duplicate_serials,
    tell_apart,
)

# Two USB clones with one serial, and a TCP phone (the adb server's own format).
DEVICES_L = (
    "0123456789ABCDEF       device usb:1-1.2 product:sargo model:Pixel_3a device:sargo transport_id:4\n"
    "0123456789ABCDEF       device usb:1-1.3 product:sargo model:Pixel_3a device:sargo transport_id:7\n"
    "127.0.0.1:5555         offline transport_id:9\n"
)


def _phone(device_id: str, adb_serial: str, usb: str | None) -> Phone:
    host, serial = device_id.split("/")
    return Phone(device_id, host, serial, adb_serial, PhoneState.ONLINE, model="Pixel 3a", usb=usb)


def test_devices_l_lines_give_usb_port_and_transport_id() -> None:
    assert parse_devices_l(DEVICES_L) == [
        Listed("0123456789ABCDEF", AdbState.DEVICE, usb="1-1.2", transport_id=4),
        Listed("0123456789ABCDEF", AdbState.DEVICE, usb="1-1.3", transport_id=7),
        Listed("127.0.0.1:5555", AdbState.OFFLINE, usb=None, transport_id=9),
    ]


def test_a_serial_the_server_lists_twice_is_reached_by_transport_id() -> None:
    assert addresses(parse_devices_l(DEVICES_L)) == ["transport-id:4", "transport-id:7", "127.0.0.1:5555"]


def test_phones_reporting_one_serial_each_get_their_own_identity() -> None:
    usb_a = _phone("local/0123456789ABCDEF", "transport-id:4", "1-1.2")
    usb_b = _phone("local/0123456789ABCDEF", "transport-id:7", "1-1.3")
    tcp = _phone("local/0123456789ABCDEF", "127.0.0.1:5555", None)  # a third, spoofing over TCP
    other = _phone("lab1/0123456789ABCDEF", "0123456789ABCDEF", "2-1")  # another host: no clash
    told = tell_apart([usb_a, usb_b, tcp, other])
    assert [p.device_id for p in told] == [
        "local/0123456789ABCDEF@usb:1-1.2",
        "local/0123456789ABCDEF@usb:1-1.3",
        "local/0123456789ABCDEF@127.0.0.1:5555",
        "lab1/0123456789ABCDEF",
    ]
    assert [p.shares_serial for p in told] == [3, 3, 3, 1]
    assert list(duplicate_serials(told)) == ["local/0123456789ABCDEF"]


def test_a_phone_unlike_the_stored_one_is_refused_in_one_line() -> None:
    phone = _phone("local/0123456789ABCDEF", "0123456789ABCDEF", None)
    check_identity(phone, "Pixel 3a", None)  # what the store never recorded is not compared
    with pytest.raises(IdentityMismatch) as caught:
        check_identity(phone, "Pixel 4a", None)
    assert str(caught.value).startswith(
        "local/0123456789ABCDEF: this phone reports model 'Pixel 3a' (the store knows 'Pixel 4a')"
    )
    assert "\n" not in str(caught.value)
