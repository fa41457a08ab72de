"""device_agents/run/farm-run.sh under both shells it must run in: mksh (Android's /system/bin/sh)
and dash (POSIX, nothing more), driven by the host's own conversation loop
(farm.engine.conversation + steering) over pipes instead of an adb stream.

The script's whole command line goes through the session's quote_argv and is parsed by the shell
under test, as adbd's shell parses it on a phone; the parameter values must arrive verbatim."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import pytest

from farm.device.session import quote_argv
from farm.engine.conversation import FileTooLarge, converse
from farm.engine.onphone import RunDir
from farm.engine.runscript import RUN_FILES, SCRIPT_SOURCE, block, gated_argv
from farm.engine.steering import BenchEnd, Ended, Steering, SteeringPlan

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / SCRIPT_SOURCE
SHELLS = [name for name in ("mksh", "dash") if shutil.which(name)]
# Every character a value may carry that a shell would otherwise act on.
HOSTILE = ["it's", 'say "hi"', "$HOME ${PATH} $(id) `id`", "two\nlines", "  spaces  ", "*", "-- ;|&<>"]
PLAN = SteeringPlan(20.0, 10.0, 40.0, 20.0, None, 0.0, 0.1)
DEADLINE_S = 60.0


class PipeChannel:
    """The script under a local shell, read with a deadline (farm.engine.conversation.Channel)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.buffer = bytearray()
        self.deadline = time.monotonic() + DEADLINE_S

    def _fill(self) -> bool:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(0.0, self.deadline - time.monotonic()))
        assert ready, "the script said nothing before the test's deadline"
        chunk = os.read(fd, 65536)
        self.buffer += chunk
        return bool(chunk)

    def read_line(self) -> bytes | None:
        while b"\n" not in self.buffer:
            if not self._fill():
                return None
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line

    def copy_to(self, size: int, sink: BinaryIO) -> None:
        while len(self.buffer) < size:
            assert self._fill(), "the bundle ended early"
        sink.write(self.buffer[:size])
        del self.buffer[:size]

    def send_line(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")
        self.process.stdin.flush()


@pytest.fixture(params=SHELLS)
def shell_bin(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A folder whose `sh` is the shell under test (the gate's inner `sh -c` runs in it too)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "sh").symlink_to(shutil.which(request.param) or request.param)
    return folder


def start(shell_bin: Path, params: dict[str, str], bench: Sequence[str]) -> subprocess.Popen[bytes]:
    argv = ["sh", str(SCRIPT), *(f"{k}={v}" for k, v in params.items()), "--", *bench]
    env = {**os.environ, "PATH": f"{shell_bin}:{os.environ['PATH']}"}
    return subprocess.Popen(
        [str(shell_bin / "sh"), "-c", quote_argv(argv)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[RunDir]:
    yield RunDir(str(tmp_path / "runs" / 'a run\'s "dir" $x'))


def params_for(run_dir: RunDir, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "dir": run_dir.path,
        "cache": str(tmp_path / "cache"),
        "env": "0",
        "beat_s": "0.2",
        "beat_ms": "200",
        "files": block([*RUN_FILES, "sampler.out"]),
        **extra,
    }


def talk(process: subprocess.Popen[bytes], steering: Steering, **kwargs: object) -> dict[str, bytes]:
    """The conversation to its end; the bundle's files by phone name, read back from where they
    were written."""
    with tempfile.TemporaryDirectory(prefix="farm-bundle-") as folder:
        keep = {name: Path(folder) / name for name in [*RUN_FILES, "sampler.out"]}
        try:
            files = converse(
                PipeChannel(process),
                steering,
                cancel=kwargs.get("cancel", threading.Event()),  # type: ignore[arg-type]
                run_timeout_s=float(kwargs.get("run_timeout_s", 60.0)),  # type: ignore[arg-type]
                request_stop=kwargs.get("request_stop", lambda: None),  # type: ignore[arg-type]
                keep=keep,
                max_file_bytes=int(kwargs.get("max_file_bytes", 1 << 20)),  # type: ignore[call-overload]
            )
        finally:
            process.wait(timeout=DEADLINE_S)
        return {name: path.read_bytes() for name, path in files.items()}


def args_of(data: bytes) -> list[str]:
    return data.decode().split("\0")[:-1]


def test_values_arrive_verbatim_as_scalars_blocks_and_benchmark_argv(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    record = 'printf "%s\\0" "$@"'
    sampler = ["sh", "-c", record, "sampler", *HOSTILE]
    # The memory sampler stand-in writes mem.bin: the benchmark's gate opens on it.
    mem = ["sh", "-c", record + ' > "$0"', run_dir.file("mem.bin"), *HOSTILE]
    # The benchmark records once the sampler has (both run in the run folder): a benchmark that
    # ended before a loaded host even started the sampler would leave it no output to bundle.
    sampled_first = "while [ ! -s sampler.out ]; do sleep 0.01; done; " + record
    bench = gated_argv(["sh", "-c", sampled_first, "bench", *HOSTILE], run_dir, wait_s=20.0)
    params = params_for(run_dir, tmp_path, sampler=block(sampler), mem=block(mem))
    steering = Steering(PLAN)
    files = talk(start(shell_bin, params, bench), steering)
    report = steering.report
    assert report.bench_end == Ended(BenchEnd.EXITED, 0) and report.done
    assert args_of(files["bench.out"]) == HOSTILE  # through the script's "$@" and the gate's exec
    assert args_of(files["sampler.out"]) == HOSTILE  # through a quoted block and eval
    watched = args_of(files["mem.bin"])  # the memory sampler got the benchmark's pid appended
    assert watched[:-1] == HOSTILE and watched[-1] == f"--watch-pid={report.started['bench']}"
    assert Path(run_dir.path).is_dir()  # the scalar path, quotes and all, is the folder it made
    assert set(files) == {"bench.out", "bench.err", "mem.bin", "sampler.out", "sampler.err"}


def test_the_host_answers_the_cooldown_gate_until_the_phone_is_cool(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    node = tmp_path / "thermal temp"
    node.write_text("45000\n")
    params = params_for(
        run_dir, tmp_path, cool="1", temps=block([str(node)]), cool_poll_s="0.05", temp_limit_mc="40000"
    )
    steering = Steering(PLAN)
    waits = []

    def cool_down_after_two_waits(event: object) -> None:
        if type(event).__name__ == "Block" and getattr(event, "name", "") == "temp":
            waits.append(event)
            if len(waits) == 2:
                node.write_text("30000\n")

    process = start(shell_bin, params, ["true"])
    try:
        converse(
            PipeChannel(process),
            steering,
            cancel=threading.Event(),
            run_timeout_s=60.0,
            request_stop=lambda: None,
            on_event=cool_down_after_two_waits,
            keep={},
            max_file_bytes=1 << 20,
        )
    finally:
        process.wait(timeout=DEADLINE_S)
    assert len(waits) >= 3  # read again after each `wait`, until it is cool
    assert steering.report.temperature_start_c == 30.0
    assert steering.report.bench_end == Ended(BenchEnd.EXITED, 0)


def test_the_run_timeout_and_the_stop_file_kill_the_benchmark(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    steering = Steering(PLAN)
    talk(start(shell_bin, params_for(run_dir, tmp_path, timeout_ms="600"), ["sleep", "30"]), steering)
    assert steering.report.bench_end == Ended(BenchEnd.TIMEOUT, 137)

    steering = Steering(PLAN)
    cancel = threading.Event()
    process = start(shell_bin, params_for(run_dir, tmp_path), ["sleep", "30"])
    cancel.set()  # Ctrl-C: the host writes the stop file once the benchmark runs
    stop_file = Path(run_dir.file("farm.stop"))
    started = time.monotonic()
    talk(process, steering, cancel=cancel, request_stop=stop_file.touch)
    assert steering.report.bench_end == Ended(BenchEnd.STOPPED, 137)
    assert time.monotonic() - started < 20.0  # not the benchmark's 30 s


def test_the_end_of_the_benchmark_is_seen_at_once_not_at_the_next_heartbeat(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    params = params_for(run_dir, tmp_path, beat_s="30", beat_ms="30000")
    steering = Steering(PLAN)
    started = time.monotonic()
    talk(start(shell_bin, params, ["sleep", "0.2"]), steering)
    assert steering.report.bench_end == Ended(BenchEnd.EXITED, 0)
    assert time.monotonic() - started < 15.0  # woken by the benchmark's end, not the 30 s beat


def test_the_host_hanging_up_kills_the_benchmark(shell_bin: Path, run_dir: RunDir, tmp_path: Path) -> None:
    process = start(shell_bin, params_for(run_dir, tmp_path), ["sleep", "30"])
    channel = PipeChannel(process)
    pid = None
    while pid is None:
        line = channel.read_line()
        assert line is not None
        if line.startswith(b"bench "):
            pid = int(line.split()[1])
    assert process.stdout is not None and process.stdin is not None
    process.stdout.close()  # adbd closes the stream: the next heartbeat gets SIGPIPE
    process.stdin.close()
    process.wait(timeout=DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, "the benchmark outlived the conversation"
        time.sleep(0.05)


def test_a_gate_that_would_not_hold_the_run_asks_nothing(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    nodes = [tmp_path / "zone0", tmp_path / "zone1", tmp_path / "unreadable"]
    nodes[0].write_text("385\n")  # decidegrees: 38.5 °C
    nodes[1].write_text("39000\n")  # millidegrees: the hottest, still below the limit
    params = params_for(run_dir, tmp_path, cool="1", temps=block(map(str, nodes)), temp_limit_mc="40000")
    process = start(shell_bin, params, ["true"])
    channel = PipeChannel(process)
    sent: list[str] = []
    channel.send_line = sent.append  # type: ignore[method-assign]
    steering = Steering(PLAN)
    try:
        converse(
            channel,
            steering,
            cancel=threading.Event(),
            run_timeout_s=60.0,
            request_stop=lambda: None,
            keep={},
            max_file_bytes=1 << 20,
        )
    finally:
        process.wait(timeout=DEADLINE_S)
    assert sent == []  # no question, so no wait for an answer
    assert steering.report.temperature_start_c == 39.0 and steering.report.cooldown_waited_s == 0.0
    assert steering.report.bench_end == Ended(BenchEnd.EXITED, 0)


# (format, node text while busy, the busy percent it means, node text once idle)
BUSY_NODES = [
    ("kgsl", "600000 1000000\n", 60, "10 1000000\n"),
    ("pct", "45 %\n", 45, "0 %\n"),
    ("int", "45\n", 45, "1\n"),
    ("float", "0.45\n", 45, "0.01\n"),
]


@pytest.mark.parametrize(("fmt", "busy", "busy_pct", "idle"), BUSY_NODES)
def test_a_cell_without_load_waits_for_the_gpu_counter_to_idle(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path, fmt: str, busy: str, busy_pct: int, idle: str
) -> None:
    node = tmp_path / "gpu busy"
    params = params_for(run_dir, tmp_path, idle_node=str(node), idle_fmt=fmt, idle_max_pct="5")

    node.write_text(busy)  # stays busy: the script waits its limit, then runs and says so
    steering = Steering(PLAN)
    talk(start(shell_bin, {**params, "idle_wait_ms": "300"}, ["true"]), steering)
    gate = steering.report.gpu_idle
    assert gate is not None and gate.busy_pct == busy_pct and gate.waited_ms >= 300
    assert steering.report.bench_end == Ended(BenchEnd.EXITED, 0)

    node.write_text(idle)  # already idle: no wait
    steering = Steering(PLAN)
    talk(start(shell_bin, {**params, "idle_wait_ms": "30000"}, ["true"]), steering)
    gate = steering.report.gpu_idle
    assert gate is not None and gate.busy_pct is not None and gate.busy_pct <= 5 and gate.waited_ms == 0


@pytest.mark.skipif(not shutil.which("mksh") or not shutil.which("strace"), reason="needs mksh and strace")
def test_no_process_is_started_per_line_the_script_prints(tmp_path: Path, run_dir: RunDir) -> None:
    """Android's mksh has no printf builtin: a `printf` per protocol line is a fork and exec of
    toybox inside the measured window. Every execve of the run is traced (strace -f), and none may
    be printf's, while the script printed heartbeats and throttle blocks."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "sh").symlink_to(shutil.which("mksh") or "mksh")
    policy = tmp_path / "policy0"
    policy.mkdir()
    (policy / "scaling_max_freq").write_text("1800000\n")
    params = params_for(
        run_dir,
        tmp_path,
        beat_s="0.05",
        beat_ms="50",
        throttle_ms="50",
        status_ms="3600000",
        policies=block([str(policy)]),
    )
    trace = tmp_path / "execve.log"
    argv = ["sh", str(SCRIPT), *(f"{k}={v}" for k, v in params.items()), "--", "sleep", "1"]
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
    traced = ["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(trace), str(folder / "sh")]
    process = subprocess.Popen(
        [*traced, "-c", quote_argv(argv)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    steering = Steering(PLAN)
    talk(process, steering)
    assert steering.report.bench_end == Ended(BenchEnd.EXITED, 0) and steering.report.done
    assert steering.report.throttle_samples and steering.report.last_beat_ms is not None
    execs = [line for line in trace.read_text().splitlines() if "execve(" in line and line.endswith("= 0")]
    assert any('"sleep"' in e for e in execs)  # the trace sees the script's own children
    assert [e for e in execs if '/printf"' in e] == []


def test_a_file_over_max_bytes_stays_on_the_phone_and_is_named(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    # A sparse stdout: free to make, 64 MiB for whoever reads it back.
    bench = ["sh", "-c", 'echo "head line"; truncate -s 67108864 bench.out; echo oops >&2']
    steering = Steering(PLAN)
    files = talk(start(shell_bin, params_for(run_dir, tmp_path, max_bytes="4096"), bench), steering)
    report = steering.report
    assert report.done and report.bench_end == Ended(BenchEnd.EXITED, 0)
    assert report.oversize == [("bench.out", 64 << 20)]
    assert "bench.out" not in files and files["bench.err"] == b"oops\n"
    assert dict(report.sizes) == {name: len(data) for name, data in files.items()}


def test_the_host_refuses_a_bundle_whose_sizes_pass_its_limit_before_reading_it(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    # The script leaves max_bytes unset (a phone that does not bound its own files): the host does.
    bench = ["sh", "-c", "head -c 5000 /dev/zero"]
    steering = Steering(PLAN)
    with pytest.raises(FileTooLarge, match=r"bench\.out is 5000 bytes, over the 4096 bytes"):
        talk(start(shell_bin, params_for(run_dir, tmp_path), bench), steering, max_file_bytes=4096)


def test_a_pin_a_boost_end_breaks_again_during_its_re_apply_is_tried_again_until_it_holds(
    shell_bin: Path, run_dir: RunDir, tmp_path: Path
) -> None:
    """A pinned scaling_min_freq found broken mid-run is written again as root; here the power
    HAL's end-of-boost write (its default) lands between that write and its read-back, as it did
    on a loaded CI host with a 500 ms interaction boost. The next throttle sample finds the node
    broken again and tries once more; the run records the try that held and how many it took."""
    node = tmp_path / "scaling_min_freq"
    node.write_text("300000\n")  # the boost's end already wrote the HAL's default over the pin
    mark = tmp_path / "clobbered"
    # The read-back's `cat` (the script's root write is `echo V > N; [ "$(cat N)" = V ]`): the
    # first time it reads the node, the HAL writes its default first.
    real_cat = shutil.which("cat")
    (shell_bin / "cat").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "{node}" ] && [ ! -e "{mark}" ]; then echo 300000 > "$1"; : > "{mark}"; fi\n'
        f'exec {real_cat} "$@"\n'
    )
    (shell_bin / "cat").chmod(0o755)
    # adbd as root: the direct write is the one way (no `su` to fall back on within a try).
    (shell_bin / "su").write_text("#!/bin/sh\nexit 1\n")
    (shell_bin / "su").chmod(0o755)
    # The benchmark ends once the node holds the pin after the clobber (or at the run timeout).
    held = f'until [ -e "{mark}" ] && read -r v < "{node}" && [ "$v" = 2841600 ]; do sleep 0.05; done'
    params = params_for(
        run_dir,
        tmp_path,
        timeout_ms="20000",
        throttle_ms="200",
        root_way="direct",
        repin="pin",
        clock_pins=block([str(node), "2841600"]),
        clock_nodes=block([str(node)]),
    )
    steering = Steering(PLAN)
    talk(start(shell_bin, params, ["sh", "-c", held]), steering)
    report = steering.report
    assert report.bench_end == Ended(BenchEnd.EXITED, 0)  # the pin held before the timeout
    assert report.repinned is not None and report.repinned.how == "direct", report.repinned
    assert report.repinned.nodes == (str(node),) and report.repin_tries == 2
    assert node.read_text() == "2841600\n"
