"""An external program's job on one phone (farm.engine.program, farm.engine.deploy.binary_abi):
which binary a phone gets, the rendered argv and env, and its metrics without iteration stamps.
Pure: no phone, no push (PreparedPhone holds no session here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from farm.adapters import Granularity, ProgramOutput
from farm.adapters.output import GRANULARITY_METRIC
from farm.analysis.series import Series, SeriesTrace
from farm.device.session import ShellResult
from farm.engine.collect import compute_metrics
from farm.engine.deploy import (
    Deployed,
    ExternalDeployed,
    NotEnoughStorage,
    available_kb,
    binary_abi,
    check_storage,
)
from farm.engine.lifecycle import killed_by
from farm.engine.measurement import requirements_of
from farm.engine.model import PreparedPhone, RunJob
from farm.engine.program import benchmark_argv, job_arguments, output_metrics
from farm.experiment import load_text
from farm.experiment.external import Abi, OutputSpec
from farm.experiment.programs import Program
from farm.fleet.inventory import Phone, PhoneState
from farm.metric import Metric

SPEC = """\
name: ext
benchmark:
  program: external
  binary: {arm64-v8a: prog-arm64, x86_64: prog-x86}
  args: ["--n={n}", "--iters={iters}", "--model={asset:m/x.bin}", "{{n}}"]
  env: {THREADS: "{threads}", FIXED: "a b;c"}
  assets: [m/x.bin]
  output: jsonl
sweep: {n: [8], threads: [2], gpu_load: [0.5]}
measurement: {iterations: 7}
"""


@pytest.mark.parametrize(
    ("abis", "given", "picked"),
    [
        (("arm64-v8a", "armeabi-v7a"), {Abi.ARM64_V8A, Abi.ARMEABI_V7A}, Abi.ARM64_V8A),
        (("arm64-v8a", "armeabi-v7a"), {Abi.ARMEABI_V7A, Abi.X86_64}, Abi.ARMEABI_V7A),
        (("x86_64",), {Abi.X86_64, Abi.ARM64_V8A}, Abi.X86_64),
        (("x86_64",), {Abi.ARM64_V8A}, None),  # a virtual phone and an arm-only program: skipped
        ((), {Abi.X86_64}, None),
    ],
)
def test_the_phone_gets_the_binary_of_its_first_abi_that_has_one(
    abis: tuple[str, ...], given: set[Abi], picked: Abi | None
) -> None:
    assert binary_abi(dict.fromkeys(given, "path"), abis) is picked


def _prepared(tmp_path: Path) -> PreparedPhone:
    phone = Phone("h/s", "h", "s", "s", PhoneState.ONLINE, abi="x86_64")
    binary = Deployed("prog-x86", "x86_64", "/data/local/tmp/farm/bin/0123/prog-x86", "0123", True)
    asset = Deployed("m/x.bin", "any", "/data/local/tmp/farm/assets/abcd/x.bin", "abcd", False)
    return PreparedPhone(
        cast(Any, None),
        phone,
        cast(Any, None),
        {"external": binary},
        external=ExternalDeployed(binary, {"m/x.bin": asset}),
    )


def test_args_and_env_are_rendered_with_the_cell_the_measurement_and_the_asset(tmp_path: Path) -> None:
    (tmp_path / "prog-x86").write_bytes(b"x")
    (tmp_path / "prog-arm64").write_bytes(b"x")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "x.bin").write_bytes(b"x")
    experiment = load_text(SPEC, source_dir=tmp_path)
    prepared = _prepared(tmp_path)
    args, env = job_arguments(experiment, experiment.cells()[0], prepared)
    assert args == ("--n=8", "--iters=7", "--model=/data/local/tmp/farm/assets/abcd/x.bin", "{n}")
    assert env == (("THREADS", "2"), ("FIXED", "a b;c"))
    job = RunJob("r1", "ext", args, Program.EXTERNAL, 0.5, tmp_path, env=env)
    assert benchmark_argv(prepared, job) == (
        "env",
        "THREADS=2",
        "FIXED=a b;c",  # one argv word: session.quote_argv quotes it, no shell sees ';'
        "/data/local/tmp/farm/bin/0123/prog-x86",
        *args,
    )


def _trace(t0_ns: int, t1_ns: int) -> SeriesTrace:
    times = np.arange(t0_ns - 2_000_000_000, t1_ns + 2_000_000_000, 100_000_000)
    inside = times[(times >= t0_ns) & (times <= t1_ns)]
    return SeriesTrace(
        {
            "mem.rss": Series.of(inside, np.full(inside.size, 2048.0)),
            "battery.power": Series.of(times, np.full(times.size, 1000.0)),  # mW, no calibration needed
        }
    )


def _values(metrics: list[Metric]) -> dict[str, float]:
    return {m.name: m.value for m in metrics}


def test_per_iteration_latencies_without_stamps_and_energy_over_the_program_window() -> None:
    parsed = ProgramOutput("regex", Granularity.PER_ITERATION, (2.0, 4.0, 6.0), (), inferences=3)
    values = _values(output_metrics(parsed, _trace(10_000_000_000, 12_000_000_000), None, 400.0, None))
    assert values[GRANULARITY_METRIC] == 1.0
    assert values["iterations_measured"] == 3 and values["latency_median_ms"] == pytest.approx(4.0)
    assert values["latency_mean_ms"] == pytest.approx(4.0)
    # 1000 mW over the 2 s program window (its memory samples), 400 mW idle, 3 inferences.
    assert values["energy_total_mj"] == pytest.approx(2000.0, rel=0.01)
    assert values["energy_per_inference_mj"] == pytest.approx((2000.0 - 800.0) / 3, rel=0.01)
    assert values["rss_peak_mb"] == pytest.approx(2.0)


def test_summary_figures_stand_in_and_no_count_means_no_energy_per_inference() -> None:
    summary = (Metric("latency_mean_ms", 5.0, "ms"), Metric("iterations_measured", 50.0, "count"))
    parsed = ProgramOutput("tflite", Granularity.SUMMARY, (), summary, inferences=None)
    values = _values(output_metrics(parsed, _trace(1_000_000_000, 3_000_000_000), None, None, None))
    assert values[GRANULARITY_METRIC] == 0.0 and values["latency_mean_ms"] == 5.0
    assert "energy_total_mj" in values and "energy_per_inference_gross_mj" not in values
    assert "latency_median_ms" not in values  # not invented from a mean
    no_telemetry = _values(output_metrics(parsed, None, None, None, None))
    assert "energy_total_mj" not in no_telemetry and no_telemetry["latency_mean_ms"] == 5.0


def test_pulled_artifacts_are_read_with_the_adapter(tmp_path: Path) -> None:
    """What the metrics step and a resume's backfill compute from a run folder."""
    regex = OutputSpec.model_validate(
        {
            "adapter": "regex",
            "patterns": [r"^iter \d+: (?P<ms>[0-9.]+) ms$"],
            "metrics": {"ms": {"name": "latency", "unit": "ms"}},
            "latency": "ms",
        }
    )
    (tmp_path / "stdout.jsonl").write_text("start\niter 0: 3.0 ms\niter 1: 5.0 ms\n")
    values = _values(compute_metrics(tmp_path, 0.0, output=regex))
    assert values[GRANULARITY_METRIC] == 1.0 and values["latency_median_ms"] == pytest.approx(4.0)
    stamped = [
        {"event": "iter", "i": 0, "t_start_ns": 1_000_000, "t_end_ns": 3_000_000},
        {"event": "result", "iterations": 1},
    ]
    (tmp_path / "stdout.jsonl").write_text("".join(json.dumps(e) + "\n" for e in stamped))
    values = _values(compute_metrics(tmp_path, 0.0, output=OutputSpec.model_validate("jsonl")))
    assert values[GRANULARITY_METRIC] == 1.0 and values["latency_median_ms"] == pytest.approx(2.0)
    assert GRANULARITY_METRIC not in _values(compute_metrics(tmp_path, 0.0))  # farm's own program


def test_an_external_program_is_held_to_the_counts_it_is_given(tmp_path: Path) -> None:
    for name in ("prog-x86", "prog-arm64"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "x.bin").write_bytes(b"x")
    given = requirements_of(load_text(SPEC, source_dir=tmp_path))
    assert (given.min_iterations, given.min_seconds) == (7, 0.0)  # {iters} passed, no {min_seconds}
    own = requirements_of(load_text(SPEC.replace("--iters={iters}", "--iters=3"), source_dir=tmp_path))
    assert own.min_iterations == 1


MODELS_SPEC = """\
name: llm
benchmark:
  program: external
  binary: {x86_64: prog-x86}
  args: [-m, "{model}", -t, "{threads}"]
  assets: [m/a.gguf, m/b.gguf]
  output: llama_bench
sweep: {model: [m/a.gguf, m/b.gguf], threads: [2]}
"""


def test_a_level_naming_a_listed_asset_is_its_phone_path(tmp_path: Path) -> None:
    (tmp_path / "prog-x86").write_bytes(b"x")
    (tmp_path / "m").mkdir()
    for name in ("a", "b"):
        (tmp_path / "m" / f"{name}.gguf").write_bytes(name.encode())
    experiment = load_text(MODELS_SPEC, source_dir=tmp_path)
    binary = Deployed("prog-x86", "x86_64", "/data/local/tmp/farm/bin/0123/prog-x86", "0123", True)
    assets = {
        f"m/{n}.gguf": Deployed(f"m/{n}.gguf", "any", f"/data/local/tmp/farm/assets/{n}{n}/{n}.gguf", n, True)
        for n in ("a", "b")
    }
    phone = Phone("h/s", "h", "s", "s", PhoneState.ONLINE, abi="x86_64")
    prepared = PreparedPhone(
        cast(Any, None),
        phone,
        cast(Any, None),
        {"external": binary},
        external=ExternalDeployed(binary, assets),
    )
    rendered = {job_arguments(experiment, cell, prepared)[0] for cell in experiment.cells()}
    assert rendered == {
        ("-m", "/data/local/tmp/farm/assets/aa/a.gguf", "-t", "2"),
        ("-m", "/data/local/tmp/farm/assets/bb/b.gguf", "-t", "2"),
    }


def test_energy_per_token_of_a_decode_run_over_its_phase_time() -> None:
    phase = (
        Metric("decode_tokens_per_s", 100.0, "tok/s"),
        Metric("llm_decode_measured_ms", 1000.0, "ms"),
        Metric("llm_decode_tokens", 100.0, "count"),
    )
    parsed = ProgramOutput("llama_bench", Granularity.SUMMARY, (), phase, inferences=None)
    values = _values(output_metrics(parsed, _trace(1_000_000_000, 3_000_000_000), None, 400.0, None))
    # 1000 mW over the window, 400 mW idle: 600 mW net for the 1 s of decode, 100 tokens.
    assert values["energy_per_decode_token_mj"] == pytest.approx(6.0, rel=0.01)
    assert "energy_per_prefill_token_mj" not in values
    no_idle = _values(output_metrics(parsed, _trace(1_000_000_000, 3_000_000_000), None, None, None))
    assert "energy_per_decode_token_mj" not in no_idle


@pytest.mark.parametrize(
    ("text", "kb"),
    [
        # toybox df -k on Android 13 and coreutils' wrapped long device name
        (
            "Filesystem       1K-blocks     Used Available Use% Mounted on\n"
            "/dev/block/dm-46 115288584 40315628  74841884  36% /data\n",
            74841884,
        ),
        (
            "Filesystem 1K-blocks Used Available Use% Mounted on\n"
            "/dev/mapper/a-very-long-volume-name\n              1000 200 800 20% /data\n",
            800,
        ),
        ("df: /data/local/tmp: Permission denied\n", None),
    ],
)
def test_available_storage_from_df(text: str, kb: int | None) -> None:
    assert available_kb(text) == kb


def test_a_program_killed_by_a_signal_says_who_sends_it() -> None:
    assert "out-of-memory killer" in killed_by(137) and "SIGKILL" in killed_by(137)
    assert "SIGSEGV" in killed_by(139)
    assert killed_by(1) == "" and killed_by(None) == "" and killed_by(128) == ""


class _DfSession:
    """Only what the storage check asks of a phone: its id and `df -k`'s answer."""

    device_id = "lab/phone-1"

    def __init__(self, available_kb: int) -> None:
        self.available_kb = available_kb

    def shell(self, argv: list[str]) -> ShellResult:
        header = "Filesystem 1K-blocks Used Available Use% Mounted on\n"
        text = f"{header}/dev/x 100 1 {self.available_kb} 1% /data\n"
        return ShellResult(tuple(argv), 0, text, "")


def test_assets_larger_than_the_phones_free_storage_are_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x" * 3000)
    check_storage(cast(Any, _DfSession(available_kb=3)), [model])  # 3072 bytes free: fits
    with pytest.raises(NotEnoughStorage) as caught:
        check_storage(cast(Any, _DfSession(available_kb=2)), [model])
    assert "lab/phone-1" in str(caught.value) and "model.gguf" in str(caught.value)
    assert "need 0.0 MB" in str(caught.value) and "0.0 MB free" in str(caught.value)
