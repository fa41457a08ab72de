"""taskset inside a virtual phone (vphone/src/vphone/affinity.py, tools/t_taskset.py): toybox's
options, messages and exit codes with masks in the phone's CPU numbers (8 CPUs on a 2-core
host), children and the exec'd command inheriting the pin, the kernel's refusals, a sandbox the
phone cannot leave through it, and a pinned kernel running at its CPUs' speed. Checked through
adb (adbutils) as a client sees it, and the speed on an in-process phone whose quotas we read."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import adbutils
import pytest
from vphone.layout import HOST_TOYBOX, StateLayout
from vphone.testing.phones import PhoneFactory, PhoneSet
from vphone.testing.socphone import budgeted, install, kernel_binary, phone, run_gemm, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]
CGROUP_ROOTS = (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup"))
PID = re.compile(r"pid \d+'s")


@pytest.fixture(scope="module")
def phones(module_virtual_phones: PhoneFactory) -> PhoneSet:
    return module_virtual_phones(count=2, profiles=["adreno-sd8gen2", "adreno-sd865"])


@pytest.fixture(scope="module")
def devices(phones: PhoneSet) -> dict[str, adbutils.AdbDevice]:
    client = phones.client()
    return {p.profile: p.device(client) for p in phones}


def run(device: adbutils.AdbDevice, command: str) -> tuple[int, str, str]:
    result = device.shell2(command, v2=True, rstrip=False)
    return result.returncode, result.stdout, result.stderr


def _host(command: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["1"],
        ["zz", "true"],
        ["0x1", "true"],
        ["-c", "1", "true"],
        ["1", "nonexistent-command"],
        ["-p", "1", "abc"],
        ["1", "sh", "-c", "exit 7"],
        ["3", "echo", "hi"],
        ["--help"],
    ],
)
def test_bad_input_and_exit_codes_are_toyboxs(
    devices: dict[str, adbutils.AdbDevice], args: list[str]
) -> None:
    """The independent truth: Debian's toybox on this host, for input that names no CPU number."""
    expected = _host([HOST_TOYBOX, "taskset", *args])
    quoted = " ".join("'" + a + "'" for a in args)
    assert run(devices["adreno-sd8gen2"], f"taskset {quoted}") == expected


def test_masks_are_the_phones_cpus_and_children_inherit_them(devices: dict[str, adbutils.AdbDevice]) -> None:
    d = devices["adreno-sd8gen2"]  # 8 CPUs: little 0-2, mid 3-6, prime 7
    assert d.shell("cat /sys/devices/system/cpu/online") == "0-7"
    status, out, _ = run(d, "taskset -p $$")
    assert status == 0 and PID.sub("pid N's", out) == "pid N's current affinity mask: ff\n"
    # `taskset MASK cmd` execs cmd in its own process (same pid, the shell its parent), pinned to
    # phone CPUs the host does not have, and cmd's children inherit the pin.
    out = d.shell("echo $$; taskset 78 sh -c 'echo $PPID; taskset -p $$; sh -c \"taskset -p \\$\\$\"'")
    shell, parent, mine, child = out.splitlines()
    assert parent == shell
    assert mine.endswith("current affinity mask: 78") and child.endswith("current affinity mask: 78")
    # -p MASK PID: the current mask, then the new one read back; -a: every thread.
    status, out, err = run(d, "sleep 30 & p=$!; taskset -p 80 $p; taskset -ap $p; kill $p")
    assert (status, err) == (0, ""), err
    lines = [PID.sub("pid N's", x) for x in out.splitlines()]
    assert lines == [
        "pid N's current affinity mask: ff",
        "pid N's new affinity mask: 80",
        "pid N's current affinity mask: 80",
    ]
    # A mask beyond the phone's CPUs is kept to those it has; one naming none of them: EINVAL.
    assert d.shell("taskset 3ff sh -c 'taskset -p $$'").endswith("mask: ff")
    status, out, err = run(d, "taskset 100 true")
    assert (
        status == 1
        and out == ""
        and re.fullmatch(r"taskset: failed to set pid \d+'s affinity: Invalid argument\n", err)
    )
    # Moving a pinned task into a cpuset group resets its affinity to the group's CPUs, as the
    # kernel's cpuset does (the rooted phone; sd865's background is the little cores 0-3).
    out = devices["adreno-sd865"].shell(
        "su -c 'sleep 30 & p=$!; taskset -p 80 $p >/dev/null; echo $p > /dev/cpuset/background/tasks; "
        "taskset -p $p; kill $p'"
    )
    assert out.endswith("current affinity mask: f"), out


def test_the_kernels_refusals_and_a_sandbox_the_phone_cannot_leave(
    phones: PhoneSet, devices: dict[str, adbutils.AdbDevice]
) -> None:
    d = devices["adreno-sd8gen2"]
    # Shell may not pin root's processes (init); their mask stays.
    status, out, err = run(d, "taskset -p 1 1")
    assert status == 1 and out == "pid 1's current affinity mask: ff\n"
    assert err == "taskset: failed to set pid 1's affinity: Operation not permitted\n"
    assert d.shell("taskset -p 1") == "pid 1's current affinity mask: ff"
    # A host process is no pid of the phone: ESRCH, as the kernel says for an invisible pid.
    host_pid = phones.daemon_pid or os.getpid()
    assert d.shell(f"[ -e /proc/{host_pid} ] && echo visible || echo absent") == "absent"
    status, _, err = run(d, f"taskset -p 1 {host_pid}")
    assert status == 1 and err == f"taskset: failed to get pid {host_pid}'s affinity: No such process\n"
    # Requests written by hand, past the tool, get the same answers: the daemon judges them by
    # the file's owner and the phone's own PID namespace, never the host's pids.
    before = Path(f"/proc/{host_pid}/cgroup").read_text()
    for name, tids in (("host", [host_pid]), ("init", [1])):
        body = json.dumps({"tids": tids, "mask": 1})
        request = f"/dev/.farm/shared/taskset.request.forged-{name}"
        d.shell(f"echo '{body}' > {request}.tmp && mv {request}.tmp {request}")
    answers = {}
    for name in ("host", "init"):
        answer = f"/dev/.farm/shared/taskset.answer.forged-{name}"
        wait_until(lambda a=answer: d.shell(f"[ -e {a} ] && echo yes") == "yes", f"the answer {answer}")
        answers[name] = json.loads(d.shell(f"cat {answer}"))["errno"]
    assert answers == {"host": errno.ESRCH, "init": errno.EPERM}
    # A request that is a link (to a request in the phone's data, by its host path) is not
    # followed: it gets no answer, while a request moved in after it does (events come in order).
    phone8 = next(p for p in phones if p.profile == "adreno-sd8gen2")
    d.shell(f"echo '{json.dumps({'tids': [1], 'mask': 1})}' > /data/local/tmp/req.json")
    target = StateLayout(phone8.state_dir).data / "local" / "tmp" / "req.json"
    assert target.is_file()
    d.shell(f"cd /dev/.farm/shared && ln -s {target} linked.tmp && mv linked.tmp taskset.request.linked")
    body = json.dumps({"tids": [99999], "mask": 1})
    d.shell(f"cd /dev/.farm/shared && echo '{body}' > after.tmp && mv after.tmp taskset.request.after")
    after = "/dev/.farm/shared/taskset.answer.after"
    wait_until(lambda: d.shell(f"[ -e {after} ] && echo yes") == "yes", "the answer after the link")
    assert d.shell("ls /dev/.farm/shared | grep -c taskset.answer.linked; true") == "0"
    assert Path(f"/proc/{host_pid}/cgroup").read_text() == before
    # The phone's root reaches no host process either.
    root = devices["adreno-sd865"]
    status, out, _ = run(root, f"su -c 'taskset -p 1 {host_pid}; echo rc=$?'")
    assert out.strip().endswith("rc=1")
    # Every group a pin made is a host cgroup under its phone's own cpu group, nowhere else.
    made = [
        p
        for base in CGROUP_ROOTS
        if (base / "farm-virtual").is_dir()
        for p in (base / "farm-virtual").rglob("affinity-*")
    ]
    assert made, "no pinned group on the host"
    assert all(p.parent.name == "cpu" and p.parent.parent.parent.name == "farm-virtual" for p in made), made


@pytest.mark.serial  # a speed ratio: needs the host's cores
def test_a_pinned_kernel_runs_at_the_speed_of_its_cpus(tmp_path: Path) -> None:
    # A budget of half a host core binds even on a loaded 2-core host, so the quotas decide.
    with phone(budgeted("adreno-sd865", cpu=0.5), "VPTSK01", tmp_path) as w:
        gemm = install(w, kernel_binary("gemm"))
        # Long enough (~0.4 s on the prime core) for many CFS periods: a shorter run finishes on
        # the quota left in its first periods and looks faster than its budget.
        args = ("--m=192", "--n=192", "--k=192", "--warmup=2", "--iters=120")
        cg = w.world.cgroups
        if cg is None:
            pytest.skip(f"no host cgroups here: {w.world.budget_note}")
        prime = run_gemm(w, f"taskset 80 {gemm}", *args)
        little = run_gemm(w, f"taskset f {gemm}", *args)
        # The quotas are the phone's CPUs' speed: a core per CPU at most, the budget at most.
        assert cg.quota_cores("cpu/affinity-80") == pytest.approx(0.5, rel=0.01)
        assert cg.quota_cores("cpu/affinity-f") == pytest.approx(0.5 * 256 / 1024, rel=0.01)
        # The profile's own ratio (prime 1024 / little 256 at their top clocks) is the truth; a
        # host too busy to give the prime run its half core makes the ratio smaller, never larger.
        ratio = little.per_iteration_s / prime.per_iteration_s
        assert 2.0 < ratio < 1.4 * 1024 / 256, (ratio, prime, little, os.getloadavg())
        # While it runs, the phone's taskset reads the pin back from the benchmark itself (once
        # taskset has exec'd it: the pin comes first).
        out = w.sh(
            f"taskset 70 {gemm} {' '.join(args)} >/dev/null & p=$!; "
            'until [ "$(cat /proc/$p/comm)" = gemm ]; do sleep 0.01; done; taskset -p $p; wait $p'
        ).stdout
        assert out.strip().endswith("current affinity mask: 70"), out


def test_the_full_mask_is_no_pin_and_the_phones_quotas_keep_applying(phones: PhoneSet) -> None:
    """PoCL and OpenMP set every online CPU on their threads: the kernel's default affinity, not
    a pin (affinity._unpin). The daemon once still registered an `affinity-ff` group for it, whose
    quota file does not exist, so every later quota write of that phone failed (ENOENT) and the
    phone's CPU and GPU budgets stopped following its clocks."""
    phone = next(p for p in phones if p.profile == "adreno-sd8gen2")
    device = phone.device(phones.client())
    assert device.shell("taskset ff sh -c 'taskset -p $$'").endswith("current affinity mask: ff")
    assert device.shell("taskset 80 sh -c 'taskset -p $$'").endswith("current affinity mask: 80")
    log = (phones.state_dir / "daemon.log").read_text(encoding="utf-8", errors="replace")
    assert f"{phone.serial}: cannot set CPU quotas" not in log
