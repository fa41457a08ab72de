"""`program: external`: placeholders, assets, binaries and adapters, each mistake at FILE:LINE."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.adapters import AdapterName, Granularity
from farm.errors import ConfigError
from farm.experiment import load
from farm.experiment.external import Abi
from farm.experiment.template import Field, TemplateError, fields, render

GOOD = """\
name: ext
benchmark:
  program: external
  binary:
    x86_64: bin/prog
  args:
    - --n={n}
    - --iters={iters}
    - --input={asset:data/seed.bin}
    - "{{literal}}"
  env:
    THREADS: "{threads}"
  assets: [data/seed.bin]
  output: jsonl
sweep:
  n: [8, 16]
  threads: [1, 2]
  gpu_load: [0, 0.5]
measurement: {iterations: 7}
"""


def _write(folder: Path, text: str) -> Path:
    (folder / "bin").mkdir(exist_ok=True)
    (folder / "bin" / "prog").write_bytes(b"\x7fELF")
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data" / "seed.bin").write_bytes(b"seed")
    path = folder / "exp.yaml"
    path.write_text(text)
    return path


def _error(folder: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(_write(folder, text))
    return str(caught.value)


def test_template_fields_and_render() -> None:
    text = "--a={n}/{asset:m/x.bin} {{x}}"
    assert fields(text) == (Field("n"), Field("asset:m/x.bin", asset="m/x.bin"))
    assert render(text, {"n": "3", "asset:m/x.bin": "/p/x.bin"}) == "--a=3//p/x.bin {x}"
    for bad, word in (
        ("--a={n", "lone {"),
        ("--a=n}", "lone }"),
        ("{}", "not a placeholder"),
        ("{a b}", "not"),
    ):
        with pytest.raises(TemplateError, match=word):
            fields(bad)


def test_a_good_external_experiment_loads_with_paths_from_its_folder(tmp_path: Path) -> None:
    experiment = load(_write(tmp_path, GOOD))
    benchmark = experiment.benchmark
    assert benchmark.external and benchmark.binary == {Abi.X86_64: "bin/prog"}
    assert experiment.resolve_path("data/seed.bin") == (tmp_path / "data" / "seed.bin").resolve()
    assert benchmark.output is not None and benchmark.output.adapter is AdapterName.JSONL
    cell = experiment.cells()[0]
    values = experiment.placeholder_values(cell)
    assert values["iters"] == "7" and values["n"] in ("8", "16") and values["threads"] in ("1", "2")


def test_the_digest_does_not_depend_on_the_folder(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = load(_write(tmp_path / "a", GOOD)).settings_digest
    assert first == load(_write(tmp_path / "b", GOOD)).settings_digest
    assert first != load(_write(tmp_path / "b", GOOD.replace("--n={n}", "--size={n}"))).settings_digest


@pytest.mark.parametrize(
    ("edit", "line", "piece"),
    [
        (
            ("--n={n}", "--n={nn}"),
            7,
            "unknown placeholder {nn}: not a sweep factor or measurement value; did you mean n?",
        ),
        (("--n={n}", "--n={n"), 7, "lone { at character 5"),
        (("--n={n}", "--n=n}"), 7, "lone } at character 6"),
        (
            ("--input={asset:data/seed.bin}", "--input={asset:data/other.bin}"),
            9,
            "data/other.bin is not listed",
        ),
        (
            ("--input={asset:data/seed.bin}", "--input=x"),
            13,
            "data/seed.bin is listed but no argument uses it",
        ),
        (('THREADS: "{threads}"', "THREADS: one"), 17, "factor threads is not used: put {threads}"),
        (("x86_64: bin/prog", "x86_64: bin/missing"), 5, "binary for x86_64 bin/missing does not exist"),
        (("x86_64: bin/prog", "risc: bin/prog"), 5, "x86_64"),
        (("output: jsonl", "output: csv"), 14, "jsonl"),
        (
            ("output: jsonl", "output: {adapter: regex, patterns: ['x'], metrics: {a: {name: a}}}"),
            14,
            "no named group",
        ),
        (("output: jsonl", "output: {adapter: tflite, patterns: ['(?P<a>x)']}"), 14, "takes no patterns"),
        (("  gpu_load: [0, 0.5]", "  iters: [1, 2]"), 18, "is set by measurement.iterations"),
    ],
)
def test_external_mistakes_name_file_line_and_what(
    tmp_path: Path, edit: tuple[str, str], line: int, piece: str
) -> None:
    assert edit[0] in GOOD
    message = _error(tmp_path, GOOD.replace(*edit))
    assert message.startswith(f"{tmp_path / 'exp.yaml'}:{line}: "), message
    assert piece in message, message


def test_missing_asset_file_and_unknown_placeholder_in_env(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    (tmp_path / "data" / "seed.bin").unlink()
    with pytest.raises(
        ConfigError, match=r"exp.yaml:13: benchmark.assets\[0\]: asset data/seed.bin does not exist"
    ):
        load(path)
    folder = GOOD.replace("[data/seed.bin]", "[data]").replace("{asset:data/seed.bin}", "{asset:data}")
    assert ":13: benchmark.assets[0]: asset data is a folder, not a file" in _error(tmp_path, folder)
    message = _error(tmp_path, GOOD.replace('"{threads}"', '"{thread}"'))
    assert ":12: benchmark.env.THREADS: unknown placeholder {thread}" in message


def test_external_keys_belong_to_external_programs(tmp_path: Path) -> None:
    text = "name: x\nbenchmark:\n  program: lstm\n  args: [--x]\n"
    assert "benchmark.args: is for program: external" in _error(tmp_path, text)
    text = "name: x\nbenchmark: {program: external, binary: {x86_64: bin/prog}, output: jsonl, tune: true}\n"
    assert ":2: benchmark.tune: tune is for farm's own programs" in _error(tmp_path, text)
    text = "name: x\nbenchmark: {program: external, output: jsonl}\n"
    assert "benchmark.binary: an external program needs binary" in _error(tmp_path, text)
    text = "name: x\nbenchmark: {program: gpuload, tune: true}\n"
    assert "gpuload has no kernels to tune" in _error(tmp_path, text)


def test_the_regex_output_builds_its_adapter(tmp_path: Path) -> None:
    regex = (
        "output:\n    adapter: regex\n    patterns: ['took (?P<t>[0-9.]+) ms']\n"
        "    metrics: {t: {name: latency, unit: ms}}\n    latency: t"
    )
    experiment = load(_write(tmp_path, GOOD.replace("output: jsonl", regex)))
    assert experiment.benchmark.output is not None
    parsed = experiment.benchmark.output.adapter_of().parse("took 2.5 ms\ntook 3.5 ms\n", "")
    assert parsed.granularity is Granularity.PER_ITERATION and parsed.latencies_ms == (2.5, 3.5)


def test_a_zipped_label_factor_and_asset_levels_need_no_placeholder_of_their_own(tmp_path: Path) -> None:
    labelled = GOOD.replace("  threads: [1, 2]\n", "  threads: [1, 2]\n  label: [one, two]\n").replace(
        "measurement:", "zip: [[threads, label]]\nmeasurement:"
    )
    assert {c.as_dict()["label"] for c in load(_write(tmp_path, labelled)).cells()} == {"one", "two"}
    unzipped = GOOD.replace("  threads: [1, 2]\n", "  threads: [1, 2]\n  label: [one, two]\n")
    assert "factor label is not used" in _error(tmp_path, unzipped)
    # an asset used as a sweep level (a model per run) counts as used; listed and unused still fails
    by_level = GOOD.replace("--input={asset:data/seed.bin}", "--input={n}").replace(
        "  n: [8, 16]", "  n: [data/seed.bin]"
    )
    load(_write(tmp_path, by_level))
    unused = GOOD.replace("--input={asset:data/seed.bin}", "--input={n}")
    assert "data/seed.bin is listed but no argument uses it" in _error(tmp_path, unused)
