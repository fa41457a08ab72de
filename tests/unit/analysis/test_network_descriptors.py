"""Network descriptors: the shipped networks' counts against the papers, the format a user writes
(farm/analysis/networks/README.md) and its one-line FILE:LINE refusals, resizing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from farm.analysis.cnn_descriptor import (
    LayerKind,
    load_descriptor,
    network,
    network_or_file,
    parse_descriptor,
    resized,
)
from farm.analysis.kernel_predictor import KernelKind, kernel_of_layer
from farm.errors import ConfigError

README = Path(__file__).resolve().parents[3] / "farm" / "analysis" / "networks" / "README.md"


def readme_example() -> str:
    match = re.search(r"```yaml\n(.*?)```", README.read_text(), re.S)
    assert match is not None
    return match.group(1)


@pytest.mark.parametrize(
    ("name", "layers", "params_m"),
    # Parameters with batch norm folded into the conv biases: Howard et al. 2017 (4.2 M), Sandler et
    # al. 2018 (3.4 M), He et al. 2016 / torchvision (11.7 M); SqueezeNet v1.1 1.24 M (torchvision).
    [
        ("mobilenetv1", 29, 4.22),
        ("mobilenetv2", 64, 3.49),
        ("resnet18", 31, 11.68),
        ("squeezenet1.1", 30, 1.24),
    ],
)
def test_shipped_networks_have_the_papers_parameter_counts(name: str, layers: int, params_m: float) -> None:
    net = network(name)
    assert len(net.layers) == layers
    assert sum(layer.weight_count for layer in net.layers) / 1e6 == pytest.approx(params_m, abs=0.006)


def test_layers_map_to_the_kernel_types_the_sampling_runs() -> None:
    kinds = [kernel_of_layer(layer).kind for layer in network("mobilenetv2").layers]
    assert kinds[:4] == [KernelKind.CONV, KernelKind.DWCONV, KernelKind.POINTWISE, KernelKind.POINTWISE]
    assert kinds.count(KernelKind.ADD) == 10 and kinds[-2:] == [KernelKind.AVGPOOL, KernelKind.FC]
    dw = kernel_of_layer(network("mobilenetv1").layers[1])
    assert (dw.kernel, dw.stride, dw.pad, dw.out_size) == (3, 1, 1, 112)


def test_the_readme_example_parses_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(readme_example())
    net = network_or_file(str(path))
    assert (net.name, net.input_size, len(net.layers)) == ("tiny", 64, 6)
    pw = net.layers[2]
    assert (pw.kernel, pw.stride, pw.pad, pw.sources) == (1, 1, 0, ("dw1",))
    assert net.layers[3].kind is LayerKind.ADD and net.layers[3].sources == ("pw1", "conv1")
    assert network_or_file(str(path), 128).layers[0].out_size == 64


BAD = [  # (replace this, with this, line of the error, what the message says)
    ("out: [32, 32, 32], kernel: 3, stride: 2", "out: [32, 31, 31], kernel: 3, stride: 2", 4, "gives 32x32"),
    ("kind: dwconv", "kind: depthwise", 5, "unknown kind 'depthwise'"),
    (
        "{name: pw1, kind: conv, in: [32, 32, 32]",
        "{name: pw1, kind: conv, in: [16, 32, 32]",
        6,
        "dw1 writes 32x32x32",
    ),
    ("from: [pw1, conv1], ", "", 7, "an add needs from"),
    ("from: [pw1, conv1]", "from: [pw1, nope]", 7, "no earlier layer"),
    (
        "kind: dwconv, in: [32, 32, 32], out: [32, 32, 32]",
        "kind: dwconv, in: [32, 32, 32], out: [16, 32, 32]",
        5,
        "keeps its 32 channels",
    ),
    ("kernel: 3, pad: 1}", "kernel: 3, pad: 1, groups: 4}", 5, "groups = input channels"),
    ("in: [3, 64, 64], out", "in: [3, 64, 48], out", 4, "not square"),
    ("stride: 2, pad: 1}", "stride: 2, pad: 1, dilation: 2}", 4, "unknown key 'dilation'"),
    ("name: dw1", "name: conv1", 5, "used twice"),
    ("kernel: 3, stride: 2", "kernel: -3, stride: 2", 4, "integer >= 1"),
    ("input: [3, 64, 64]", "inputs: [3, 64, 64]", 2, "unknown key 'inputs'"),
]


@pytest.mark.parametrize(("old", "new", "line", "says"), BAD)
def test_bad_descriptor_is_one_line_naming_file_and_line(
    tmp_path: Path, old: str, new: str, line: int, says: str
) -> None:
    text = readme_example()
    assert old in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError) as raised:
        load_descriptor(path)
    message = str(raised.value)
    assert message.startswith(f"{path}:{line}: ") and says in message and "\n" not in message


def test_resizing_is_reversible_and_refuses_an_input_too_small() -> None:
    net = network("resnet18")
    assert resized(resized(net, 96), 224) == net
    # as the cnn program: --input-size=4 leaves pool1 a 2x2 map for its 3x3 window
    with pytest.raises(ConfigError, match="resnet18: input size 4 too small: pool1 sees 2x2"):
        network("resnet18", 4)


def test_unknown_name_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown network 'alexnet'"):
        network_or_file("alexnet")
    empty = tmp_path / "e.yaml"
    empty.write_text("")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(empty))}:1: the descriptor is empty"):
        parse_descriptor("", str(empty))
