"""The common runtime (kernels/common) as every benchmark program exposes it, shown through gemm
and lstm: arguments, exit codes, device selection, the program-binary cache, the measurement loop
and the .npy reader/writer."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

PROGRAMS = ["gemm", "lstm"]
BAD_ARGS = [
    ["--no-such-option=1"],
    ["--iters=abc"],
    ["--iters=0"],
    ["--backend=tpu"],
    ["--warmup"],
    ["positional"],
    ["--verify", "--backend=cpu"],
    ["--min-seconds=5", "--max-seconds=1"],
]


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("args", BAD_ARGS, ids=lambda a: " ".join(a))
def test_bad_arguments_exit_2_with_one_line_on_stderr(kernel_program, program, args):
    run = kernel_program(program).run(*args)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{program}: ")
    assert run.one("error")["exit_code"] == 2
    assert not run.of("result")


@pytest.mark.parametrize("program", PROGRAMS)
def test_help_lists_every_common_option_and_an_example(kernel_program, program):
    proc = kernel_program(program).run_raw("--help")
    assert proc.returncode == 0
    for option in ("--backend=S", "--threads=N", "--warmup=N", "--iters=N", "--min-seconds=X",
                   "--max-seconds=X", "--precision=S", "--seed=N", "--verify", "--cl-device=S",
                   "--cl-cache=S", "--list-devices", "--dump-output=S"):  # fmt: skip
        assert option in proc.stdout, option
    assert f"example:\n  {program} --" in proc.stdout


@pytest.mark.parametrize("program", PROGRAMS)
def test_no_opencl_platform_exits_3_naming_what_was_looked_for(kernel_program, tmp_path, program):
    empty = tmp_path / "no-vendors"
    empty.mkdir()
    run = kernel_program(program).run("--backend=gpu", "--iters=1", env={"OCL_ICD_VENDORS": str(empty)})
    assert run.returncode == 3
    line = run.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "OpenCL" in line and str(empty) in line


def test_unknown_device_selector_exits_3(kernel_program):
    run = kernel_program("gemm").run("--backend=gpu", "--cl-device=no-such-gpu", "--iters=1")
    assert run.returncode == 3
    assert "no-such-gpu" in run.one("error")["message"]


def test_cpu_backends_need_no_opencl(kernel_program, tmp_path):
    empty = tmp_path / "no-vendors"
    empty.mkdir()
    run = kernel_program("gemm").run("--backend=cpu", "--iters=1", env={"OCL_ICD_VENDORS": str(empty)})
    assert run.returncode == 0, run.stderr


def test_list_devices_and_select_by_index(kernel_program):
    prog = kernel_program("gemm")
    listing = prog.run("--list-devices")
    assert listing.returncode == 0
    devices = listing.of("device")
    assert devices and all({"index", "platform", "name", "type"} <= d.keys() for d in devices)
    picked = prog.run("--backend=gpu", f"--cl-device={devices[0]['index']}", "--iters=1", "--m=8")
    assert picked.returncode == 0, picked.stderr
    assert picked.one("info")["device"] == devices[0]["name"]


def test_program_binary_cache_hit_on_second_run(kernel_program, tmp_path):
    prog = kernel_program("gemm")
    cache = tmp_path / "cache"
    args = ("--backend=gpu", "--m=8", "--iters=1", "--warmup=0", f"--cl-cache={cache}")
    first, second = prog.run(*args), prog.run(*args)
    assert first.returncode == 0 and second.returncode == 0
    i1, i2 = first.one("info"), second.one("info")
    assert (i1["cache_hit"], i2["cache_hit"]) == (False, True)
    assert i1["cache_path"] == i2["cache_path"] and i1["cache_path"].startswith(str(cache))
    assert i1["build_ms"] > 0 and i2["build_ms"] > 0
    # Different build options (another kernel variant) are a different cache entry.
    third = prog.run(*args, "--vec=8")
    assert third.one("info")["cache_hit"] is False
    assert len(list(cache.iterdir())) == 2


def test_cache_dir_defaults_to_env_then_working_dir(kernel_program, tmp_path):
    prog = kernel_program("gemm")
    args = ("--backend=gpu", "--m=8", "--iters=1", "--warmup=0")
    env_cache = tmp_path / "env-cache"
    from_env = prog.run(*args, env={"FARM_CL_CACHE": str(env_cache)}, private_cache=False)
    assert from_env.one("info")["cache_path"].startswith(str(env_cache))
    assert any(env_cache.iterdir())
    workdir = tmp_path / "work"
    workdir.mkdir()
    from_cwd = prog.run(*args, cwd=workdir, private_cache=False)
    assert from_cwd.one("info")["cache_path"].startswith("./.clcache/")
    assert any((workdir / ".clcache").iterdir())


def test_event_stream_shape_and_iteration_bounds(kernel_program):
    run = kernel_program("gemm").run("--backend=cpu", "--m=8", "--warmup=2", "--iters=4")
    assert run.returncode == 0, run.stderr
    kinds = [e["event"] for e in run.events]
    assert kinds == ["info", "phase", "phase", "iter", "iter", "iter", "iter", "iter_summary", "result"]
    assert [e["phase"] for e in run.of("phase")] == ["warmup", "measure"]
    measure_t = run.of("phase")[1]["t_ns"]
    iters = run.of("iter")
    assert [it["i"] for it in iters] == [0, 1, 2, 3]
    assert iters[0]["t_start_ns"] >= measure_t
    for prev, cur in itertools.pairwise(iters):
        assert cur["t_start_ns"] >= prev["t_end_ns"]
    assert "h2d_ns" not in iters[0]  # no OpenCL split on the cpu backend
    result = run.one("result")
    assert result["iterations"] == 4
    assert result["min_ms"] <= result["median_ms"] <= result["max_ms"]
    summary = run.one("iter_summary")
    assert (summary["iterations"], summary["iter_events"], summary["samples"]) == (4, 4, 0)
    assert (summary["t_start_ns"], summary["t_end_ns"]) == (iters[0]["t_start_ns"], iters[-1]["t_end_ns"])


def test_min_seconds_extends_and_max_seconds_bounds_measurement(kernel_program):
    prog = kernel_program("gemm")
    longer = prog.run("--backend=cpu", "--m=4", "--iters=1", "--warmup=0", "--min-seconds=0.2")
    summary = longer.one("iter_summary")  # a 4x4 product is fast: far more than the printed iterations
    assert summary["iterations"] > 1 and summary["t_end_ns"] - summary["t_start_ns"] >= 0.2e9
    bounded = prog.run("--backend=cpu", "--m=256", "--iters=1000000", "--warmup=0", "--max-seconds=0.3")
    assert bounded.returncode == 0
    it = bounded.of("iter")
    assert 1 <= len(it) < 1000000
    assert bounded.one("result")["iterations"] == len(it)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.float32])
def test_npy_inputs_of_every_float_width(kernel_program, tmp_path, dtype):
    a = np.arange(12, dtype=dtype).reshape(3, 4) / 8
    b = np.ones((4, 2), dtype=dtype)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "c.npy"
    run = kernel_program("gemm").run(
        f"--a={tmp_path / 'a.npy'}", f"--b={tmp_path / 'b.npy'}", "--backend=cpu", "--iters=1",
        f"--dump-output={out}",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    c = np.load(out)
    assert c.dtype == np.float32 and c.shape == (3, 2)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (None, "cannot open"),
        (b"not an npy file at all", "not a .npy file"),
        ("int32", "not supported"),
        ("fortran", "Fortran order"),
        ("3d", "2-D"),
    ],
)
def test_unreadable_npy_inputs_are_bad_arguments(kernel_program, tmp_path, content, expect):
    path = tmp_path / "a.npy"
    if content == "int32":
        np.save(path, np.zeros((2, 2), np.int32))
    elif content == "fortran":
        np.save(path, np.asfortranarray(np.zeros((2, 3), np.float32)))
    elif content == "3d":
        np.save(path, np.zeros((2, 2, 2), np.float32))
    elif content is not None:
        path.write_bytes(content)
    run = kernel_program("gemm").run(f"--a={path}", "--backend=cpu", "--iters=1")
    assert run.returncode == 2
    assert expect in run.stderr and len(run.stderr.strip().splitlines()) == 1


def _wall_ns(events):
    return np.array([e["t_end_ns"] - e["t_start_ns"] for e in events], dtype=np.int64)


def test_a_long_fast_run_prints_its_first_iterations_a_sample_and_an_exact_summary(kernel_program):
    """--iteration-events bounds the output of a time-bound run of a fast kernel: the first N
    iterations, a sample of N of the rest, and a summary whose count, window and histogram cover
    every iteration the program measured (its own `result`, computed from all of them, is the
    independent truth)."""
    args = ("--backend=cpu", "--hidden=8", "--seq-len=8", "--warmup=0", "--iters=1", "--min-seconds=0.5")
    run = kernel_program("lstm").run(*args, "--iteration-events=100")
    assert run.returncode == 0, run.stderr
    result, summary = run.one("result"), run.one("iter_summary")
    head, sample = run.of("iter"), run.of("iter_sample")
    assert result["iterations"] > 1000  # else the run does not test the cap
    printed_bytes = sum(len(json.dumps(e)) + 1 for e in run.events)
    assert printed_bytes < 60_000  # ~200 iteration lines and the summary, whatever the count
    assert [e["i"] for e in head] == list(range(100))
    indices = [e["i"] for e in sample]
    assert len(indices) == 100 and indices == sorted(set(indices)) and indices[0] >= 100
    assert indices[-1] < result["iterations"]
    assert summary["iterations"] == result["iterations"]
    assert (summary["iter_events"], summary["samples"]) == (100, 100)
    assert sum(count for _, count in summary["hist"]) == result["iterations"]
    assert summary["t_start_ns"] == head[0]["t_start_ns"] and summary["t_end_ns"] >= sample[-1]["t_end_ns"]
    assert summary["t_end_ns"] - summary["t_start_ns"] >= 0.5e9
    assert summary["min_ns"] / 1e6 == pytest.approx(result["min_ms"], rel=1e-6)
    assert summary["max_ns"] / 1e6 == pytest.approx(result["max_ms"], rel=1e-6)
    assert summary["mean_ms"] == pytest.approx(result["mean_ms"], rel=1e-6)
    # Every printed iteration sits in the bin the contract names for its wall time.
    bins = dict(map(tuple, summary["hist"]))
    printed = np.concatenate([_wall_ns(head), _wall_ns(sample)])
    for k in np.floor(summary["hist_bins_per_octave"] * np.log2(printed)).astype(int):
        assert bins.get(int(k), 0) > 0


def test_iteration_events_zero_prints_every_iteration(kernel_program):
    run = kernel_program("gemm").run(
        "--backend=cpu", "--m=4", "--warmup=0", "--iters=3000", "--iteration-events=0"
    )
    assert run.returncode == 0, run.stderr
    assert len(run.of("iter")) == 3000 and not run.of("iter_sample")
    summary = run.one("iter_summary")
    assert (summary["iterations"], summary["iter_events"], summary["samples"]) == (3000, 3000, 0)


def _median_p90_ms(wall_ns, binned=False):
    """What the result event means by median (mean of the two middle values) and p90 (nearest
    rank), from every iteration's own event; binned: each value as the geometric midpoint of its
    iter_summary histogram bin (64 per octave), as the program reads them past --exact-iterations."""
    ordered = np.sort(wall_ns).astype(np.float64)
    if binned:
        ordered = 2.0 ** ((np.floor(64 * np.log2(ordered)) + 0.5) / 64)
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return median / 1e6, ordered[int(np.ceil(0.9 * n)) - 1] / 1e6


@pytest.mark.parametrize("program", PROGRAMS)
def test_result_quantiles_are_exact_up_to_the_cap_and_within_half_a_bin_past_it(kernel_program, program):
    """The result's medians keep at most --exact-iterations times in memory (a long run used to keep
    32 bytes per iteration to its end); past the cap they come from a log histogram of every
    iteration, within 2^(1/128) - 1 = 0.54%, and the event says which. The truth: every iteration's
    own `iter` event (--iteration-events=0)."""
    shape = ["--m=4"] if program == "gemm" else ["--hidden=8", "--seq-len=4", "--input-dim=3"]
    common = ("--backend=cpu", *shape, "--warmup=0", "--iters=3000", "--iteration-events=0")
    for cap, kind in ((3000, "exact"), (500, "histogram")):
        run = kernel_program(program).run(*common, f"--exact-iterations={cap}")
        assert run.returncode == 0, run.stderr
        result, wall_ns = run.one("result"), _wall_ns(run.of("iter"))
        assert len(wall_ns) == result["iterations"] == 3000
        assert result["quantiles"] == kind
        # to the 9 digits printed; past the cap within half a bin of the exact values, too
        assert (result["median_ms"], result["p90_ms"]) == pytest.approx(
            _median_p90_ms(wall_ns, binned=kind == "histogram"), rel=1e-7
        )
        assert (result["median_ms"], result["p90_ms"]) == pytest.approx(
            _median_p90_ms(wall_ns), rel=2 ** (1 / 128) - 1
        )
        # mean, min and max never depend on the cap
        assert result["mean_ms"] == pytest.approx(wall_ns.mean() / 1e6, rel=1e-7)
        extremes_ms = (wall_ns.min() / 1e6, wall_ns.max() / 1e6)
        assert (result["min_ms"], result["max_ms"]) == pytest.approx(extremes_ms)
