"""The phone's taskset (tools/t_taskset.py) and the daemon's side (vphone/src/vphone/affinity.py):
masks as toybox parses and prints them, the affinity read back from a thread's cgroup, the
kernel's answers (ESRCH, EPERM, EINVAL) and the quota of a pin (pure; no processes)."""

from __future__ import annotations

import errno
import math

import pytest
from vphone.affinity import (
    PhoneThread,
    Request,
    cpus_mask,
    group_of,
    judge,
    mask_cpus,
    nspid,
    parse_request,
    status_uids,
)
from vphone.profiles import load_profile
from vphone.socmodel import SocModel
from vphone.testing.phonetools import load_tool

ROOT, SHELL, OTHER = 1000, 3000, 4000  # host uids of phone root, shell, another phone user
T = load_tool("t_taskset")


@pytest.mark.parametrize(
    ("text", "mask"),
    [
        ("70", 0x70),
        ("F", 0xF),
        ("0003", 3),
        ("80", 0x80),
        ("1" + "0" * 300, 0),  # bits past the kernel's 1024 CPUs count for nothing
        ("0x1", None),  # toybox: bad mask '0x1'
        ("", None),
        ("zz", None),
        ("-1", None),
    ],
)
def test_masks_parse_as_toybox_parses_them(text: str, mask: int | None) -> None:
    assert T.parse_mask(text) == mask


def test_masks_print_in_hex_without_leading_zeros_and_map_to_cpus() -> None:
    assert T.format_mask(0x70) == "70" and T.format_mask(0xFF) == "ff"
    assert mask_cpus(0x70) == (4, 5, 6) and mask_cpus(0) == ()
    assert cpus_mask((4, 5, 6)) == 0x70
    assert group_of((7,)) == "cpu/affinity-80"
    assert T.parse_cpulist("0-3,7\n") == 0x8F and T.parse_cpulist("") == 0


@pytest.mark.parametrize(
    ("cgroup", "path"),
    [
        ("12:pids:/\n3:cpu,cpuacct:/affinity-70\n0::/\n", "/affinity-70"),  # v1 (cpu bound)
        ("0::/affinity-f\n", "/affinity-f"),  # v2 only
        ("1:name=systemd:/\n", None),
    ],
)
def test_the_cpu_cgroup_of_a_thread_is_found_in_v1_and_v2(cgroup: str, path: str | None) -> None:
    assert T.cpu_cgroup(cgroup) == path


def test_a_threads_mask_comes_from_its_group() -> None:
    online = 0xFF
    assert T.mask_of_group("/affinity-70", online, None) == 0x70
    assert T.mask_of_group("/affinity-70", 0x3F, None) == 0x30  # offline CPUs are not shown
    assert T.mask_of_group("/", online, None) == online
    assert T.mask_of_group("/background", online, "0-3\n") == 0x0F  # a cpuset group's CPUs
    assert T.mask_of_group("/../gpu", online, None) == online  # PoCL's workers: everywhere


def _threads() -> dict[int, PhoneThread]:
    return {
        1: PhoneThread(host_tid=5001, phone_tid=1, uids=(ROOT, ROOT, ROOT, ROOT)),
        20: PhoneThread(host_tid=5020, phone_tid=20, uids=(SHELL, SHELL, SHELL, SHELL)),
        21: PhoneThread(host_tid=5021, phone_tid=21, uids=(SHELL, SHELL, SHELL, SHELL)),
    }


def test_requests_are_judged_as_sched_setaffinity() -> None:
    online = tuple(range(8))
    ok = judge(Request((20, 21), 0x70), SHELL, ROOT, _threads(), online)
    assert ok.errno == 0 and ok.cpus == (4, 5, 6)
    # A thread that is not the phone's: ESRCH (the host's and other phones' have no phone tid).
    assert judge(Request((99,), 0x70), ROOT, ROOT, _threads(), online).errno == errno.ESRCH
    # Shell may not pin root's init; root may pin anything of its phone (CAP_SYS_NICE).
    assert judge(Request((1,), 1), SHELL, ROOT, _threads(), online).errno == errno.EPERM
    assert judge(Request((20,), 1), OTHER, ROOT, _threads(), online).errno == errno.EPERM
    assert judge(Request((1, 20), 1), ROOT, ROOT, _threads(), online).errno == 0
    # A mask that names no online CPU of the phone: EINVAL.
    assert judge(Request((20,), 0x100), SHELL, ROOT, _threads(), online).errno == errno.EINVAL
    assert judge(Request((20,), 0x80), SHELL, ROOT, _threads(), online[:7]).errno == errno.EINVAL
    assert judge(Request((20,), 0x180), SHELL, ROOT, _threads(), online).cpus == (7,)


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"tids": [], "mask": 1},
        {"tids": [1], "mask": "1"},
        {"tids": [0], "mask": 1},
        {"tids": [True], "mask": 1},
        {"tids": [1], "mask": -1},
        {"tids": list(range(1, 5000)), "mask": 1},
    ],
)
def test_malformed_requests_are_refused(body: object) -> None:
    assert parse_request(body) is None


def test_phone_tids_and_uids_come_from_the_hosts_status() -> None:
    status = "Name:\tsh\nUid:\t131074000\t131074000\t131074000\t131074000\nNSpid:\t48213\t17\n"
    assert nspid(status) == 17 and status_uids(status)[:2] == (131074000, 131074000)
    assert nspid("Name:\tx\n") is None
    assert parse_request({"tids": [17], "mask": 0x70}) == Request((17,), 0x70)


def test_a_pin_runs_at_its_fastest_cores_speed_with_a_core_per_cpu() -> None:
    sd865 = load_profile("adreno-sd865")  # little 4 x 256, big 3 x 900, prime 1 x 1024
    m = SocModel(sd865)
    every = tuple(range(8))
    groups = {"": every, "affinity-f": (0, 1, 2, 3), "affinity-80": (7,), "affinity-70": (4, 5, 6)}
    one = m.quotas(groups, threads=1.0).cores
    assert math.isclose(one["cpu/affinity-f"], 256 / 1024) and one["cpu/affinity-80"] == 1.0
    assert math.isclose(one["cpu/affinity-70"], 900 / 1024)
    many = m.quotas(groups, threads=4.0).cores  # budget 2: the prime core alone runs one thread
    assert many["cpu/affinity-80"] == 1.0 and many["cpu"] == 2.0
    assert math.isclose(many["cpu/affinity-f"], 2 * 256 / 1024)
