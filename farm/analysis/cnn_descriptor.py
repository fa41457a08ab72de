"""CNN descriptors for the resource model: a network as a list of layers, in the order and with the
names of the cnn benchmark's `layer` events (kernels/cnn/README.md).

One format for every network (farm/analysis/networks/README.md): the shipped ones are the cnn
program's own layer table (`cnn --model=NAME --list-layers`, checked against the program by
tests/integration/kernels/test_cnn_descriptor.py), and a user writes the same YAML for a network
the program does not run. A shipped network at another input size is the same layers with each
spatial size recomputed from the layer it reads (`resized`).

A convolution is a matrix multiply after im2col (Augur, Lu et al. 2017): m = output maps,
n = output pixels (H*W), k = input maps * kernel area. Pure apart from reading the files: shapes
only, no weights.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from farm import safe_yaml
from farm.errors import ConfigError


class LayerKind(enum.StrEnum):
    CONV = "conv"
    DWCONV = "dwconv"  # depthwise: one k x k filter per channel (groups = channels)
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"  # global average
    ADD = "add"  # element-wise sum of two tensors of one shape (a residual add)


class Activation(enum.StrEnum):
    NONE = "none"
    RELU = "relu"
    RELU6 = "relu6"


INPUT = "input"  # the `from` of a layer that reads the network's input


@dataclass(frozen=True)
class Layer:
    """One layer over square maps. `out_buffer_maps` is the channel count of the buffer it writes
    into: the concat of a fire module for its two expand layers (both write into it), its own
    output otherwise. `sources`: the layers whose outputs it reads (INPUT for the image); two for
    an add. A global average pool's `kernel` is its input side."""

    name: str
    kind: LayerKind
    in_maps: int
    in_size: int  # square input H = W
    out_maps: int
    out_size: int
    kernel: int
    stride: int
    out_buffer_maps: int
    pad: int = 0
    sources: tuple[str, ...] = ()
    activation: Activation = Activation.NONE

    @property
    def gemm_mnk(self) -> tuple[int, int, int] | None:
        """The im2col GEMM of a convolution; None for the others (a depthwise conv is `channels`
        GEMMs of one row each, which Augur's GEMM model does not price)."""
        if self.kind is not LayerKind.CONV:
            return None
        return self.out_maps, self.out_size * self.out_size, self.in_maps * self.kernel * self.kernel

    @property
    def weight_count(self) -> int:
        if self.kind is LayerKind.CONV:
            return self.out_maps * self.in_maps * self.kernel * self.kernel + self.out_maps  # + bias
        if self.kind is LayerKind.DWCONV:
            return self.out_maps * self.kernel * self.kernel + self.out_maps
        return 0

    @property
    def input_count(self) -> int:
        operands = 2 if self.kind is LayerKind.ADD else 1
        return operands * self.in_maps * self.in_size * self.in_size

    @property
    def output_count(self) -> int:
        return self.out_maps * self.out_size * self.out_size

    @property
    def out_buffer_count(self) -> int:
        return self.out_buffer_maps * self.out_size * self.out_size

    @property
    def workspace_count(self) -> int:
        """im2col buffer (k x n); a 1x1 stride-1 convolution multiplies its input in place."""
        mnk = self.gemm_mnk
        if mnk is None or (self.kernel == 1 and self.stride == 1):
            return 0
        return mnk[1] * mnk[2]


@dataclass(frozen=True)
class Network:
    name: str
    input_maps: int
    input_size: int
    layers: tuple[Layer, ...]


# The networks the cnn program runs, at the input size it runs them at by default (its main.c);
# each has its descriptor in farm/analysis/networks/NAME.yaml (a test holds the two together).
DEFAULT_INPUT_SIZE: dict[str, int] = {
    "squeezenet1.0": 227,
    "squeezenet1.1": 224,
    "mobilenetv1": 224,
    "mobilenetv2": 224,
    "resnet18": 224,
}
NETWORKS: tuple[str, ...] = tuple(DEFAULT_INPUT_SIZE)
DESCRIPTOR_SUFFIXES = (".yaml", ".yml")


def out_size(kind: LayerKind, in_size: int, kernel: int, stride: int, pad: int) -> int:
    """The output side of a layer as the cnn program computes it (kernels/cnn/net.c): floor for
    convolutions, ceil mode for max pools (Caffe's and torchvision's SqueezeNet), 1 for the
    global pool, the input's for an add. May be < 1 where the window does not fit."""
    if kind is LayerKind.AVGPOOL:
        return 1
    if kind is LayerKind.ADD:
        return in_size
    if kind is LayerKind.MAXPOOL:
        return -(-(in_size + 2 * pad - kernel) // stride) + 1
    return (in_size + 2 * pad - kernel) // stride + 1


def resized(net: Network, input_size: int) -> Network:
    """`net` over a square input of `input_size`: the same layers and maps, each spatial size
    recomputed from the layer it reads (the cnn program's --input-size)."""
    if input_size == net.input_size:
        return net
    sizes = {INPUT: input_size}
    layers = []
    for layer in net.layers:
        size = sizes[layer.sources[0]]
        kernel = size if layer.kind is LayerKind.AVGPOOL else layer.kernel
        out = out_size(layer.kind, size, kernel, layer.stride, layer.pad)
        if out < 1 or (layer.kind is LayerKind.MAXPOOL and size < kernel):
            raise ConfigError(
                f"{net.name}: input size {input_size} too small: {layer.name} sees {size}x{size}, "
                f"its {kernel}x{kernel} window does not fit",
                hint=f"use --input-size {net.input_size} (the network's own) or larger",
            )
        sizes[layer.name] = out
        layers.append(replace(layer, in_size=size, out_size=out, kernel=kernel))
    return Network(net.name, net.input_maps, input_size, tuple(layers))


def network(name: str, input_size: int | None = None) -> Network:
    """A shipped descriptor by name (at `input_size` pixels square, default the network's own);
    ConfigError naming the known ones otherwise."""
    if name not in DEFAULT_INPUT_SIZE:
        raise ConfigError(
            f"unknown network {name!r}", hint=f"known: {', '.join(NETWORKS)}, or a descriptor file"
        )
    shipped = resources.files("farm.analysis") / "networks" / f"{name}.yaml"
    net = parse_descriptor(shipped.read_text(encoding="utf-8"), f"farm/analysis/networks/{name}.yaml")
    return resized(net, input_size) if input_size else net


def squeezenet(version: str, input_size: int | None = None) -> Network:
    """SqueezeNet v1.0 (227x227) or v1.1 (224x224)."""
    return network(f"squeezenet{version}", input_size)


def is_descriptor_path(argument: str) -> bool:
    return argument.endswith(DESCRIPTOR_SUFFIXES) or "/" in argument


def network_or_file(argument: str, input_size: int | None = None) -> Network:
    """`--network NAME|FILE`: a shipped network by name, or a descriptor file a user wrote."""
    if not is_descriptor_path(argument):
        return network(argument, input_size)
    net = load_descriptor(Path(argument))
    return resized(net, input_size) if input_size else net


def load_descriptor(path: Path) -> Network:
    text = safe_yaml.read_text(path, "network descriptor")
    return parse_descriptor(text, str(path))


# --- parsing: every refusal names FILE:LINE ---------------------------------------------------

_TOP_KEYS = ("network", "input", "layers")
_LAYER_KEYS = ("name", "kind", "from", "in", "out", "kernel", "stride", "pad", "groups", "act", "out_buffer")


def _fail(filename: str, node: Node, message: str, hint: str | None = None) -> ConfigError:
    return ConfigError(message, location=f"{filename}:{node.start_mark.line + 1}", hint=hint)


def _fields(node: Node, filename: str, allowed: Sequence[str], what: str) -> dict[str, Node]:
    if not isinstance(node, MappingNode):
        raise _fail(filename, node, f"{what}: expected a mapping of {', '.join(allowed)}")
    found: dict[str, Node] = {}
    for key, value in node.value:
        name = str(key.value)
        if name not in allowed:
            raise _fail(filename, key, f"{what}: unknown key {name!r}", hint=f"known: {', '.join(allowed)}")
        if name in found:
            raise _fail(filename, key, f"{what}: {name} given twice")
        found[name] = value
    return found


def _int(node: Node, filename: str, what: str, minimum: int) -> int:
    value = safe_yaml.construct(node)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(filename, node, f"{what}: expected an integer >= {minimum}, got {value!r}")
    return value


def _text(node: Node, filename: str, what: str) -> str:
    if not isinstance(node, ScalarNode) or not str(node.value):
        raise _fail(filename, node, f"{what}: expected a name")
    return str(node.value)


def _shape(node: Node, filename: str, what: str) -> tuple[int, int]:
    """[channels, height, width] of a square map, as (channels, side)."""
    if not isinstance(node, SequenceNode) or len(node.value) != 3:
        raise _fail(filename, node, f"{what}: expected [channels, height, width]")
    c, h, w = (_int(item, filename, what, 1) for item in node.value)
    if h != w:
        raise _fail(filename, node, f"{what}: {h}x{w} is not square; the predictors know square maps only")
    return c, h


def parse_descriptor(text: str, filename: str) -> Network:
    """A network descriptor (YAML, farm/analysis/networks/README.md) as a Network; ConfigError
    naming FILE:LINE on anything malformed or inconsistent (a shape its layer cannot produce)."""
    root = safe_yaml.compose(text, filename)
    if root is None:
        raise ConfigError(
            "the descriptor is empty; it needs network, input and layers", location=f"{filename}:1"
        )
    top = _fields(root, filename, _TOP_KEYS, "descriptor")
    for key in _TOP_KEYS:
        if key not in top:
            raise _fail(filename, root, f"descriptor: {key} is missing")
    name = _text(top["network"], filename, "network")
    input_maps, input_size = _shape(top["input"], filename, "input")
    items = top["layers"]
    if not isinstance(items, SequenceNode) or not items.value:
        raise _fail(filename, items, "layers: expected a list of layers")
    produced = {INPUT: (input_maps, input_size)}  # name -> (maps of the buffer written, side)
    layers: list[Layer] = []
    for index, item in enumerate(items.value):
        layer = _layer(item, filename, f"layers[{index}]", produced, layers[-1].name if layers else INPUT)
        produced[layer.name] = (layer.out_buffer_maps, layer.out_size)
        layers.append(layer)
    return Network(name, input_maps, input_size, tuple(layers))


def _layer(
    node: Node, filename: str, what: str, produced: dict[str, tuple[int, int]], previous: str
) -> Layer:
    fields = _fields(node, filename, _LAYER_KEYS, what)
    for key in ("name", "kind", "in", "out"):
        if key not in fields:
            raise _fail(filename, node, f"{what}: {key} is missing")
    name = _text(fields["name"], filename, f"{what}.name")
    what = f"layer {name}"
    if name in produced:
        raise _fail(filename, fields["name"], f"{what}: the name is used twice")
    kind_text = _text(fields["kind"], filename, f"{what}.kind")
    try:
        kind = LayerKind(kind_text)
    except ValueError:
        raise _fail(
            filename,
            fields["kind"],
            f"{what}: unknown kind {kind_text!r}",
            hint=f"known: {', '.join(LayerKind)}",
        ) from None
    in_maps, in_size = _shape(fields["in"], filename, f"{what}.in")
    out_maps, side = _shape(fields["out"], filename, f"{what}.out")
    number = {
        key: _int(fields[key], filename, f"{what}.{key}", 0 if key == "pad" else 1)
        for key in ("kernel", "stride", "pad", "groups", "out_buffer")
        if key in fields and not (kind is LayerKind.AVGPOOL and key in ("kernel", "stride"))
    }
    kernel = in_size if kind is LayerKind.AVGPOOL else number.get("kernel", 1)
    stride, pad = number.get("stride", 1), number.get("pad", 0)
    sources = _sources(fields.get("from"), node, filename, what, kind, previous)
    for source in sources:
        _check_source(fields.get("from", node), filename, what, source, produced, (in_maps, in_size))
    groups = number.get("groups", in_maps if kind is LayerKind.DWCONV else 1)
    where = fields.get("groups", node)
    if kind is LayerKind.DWCONV and groups != in_maps:
        raise _fail(
            filename, where, f"{what}: a depthwise conv has groups = input channels ({in_maps}), not {groups}"
        )
    if kind is not LayerKind.DWCONV and groups != 1:
        raise _fail(
            filename,
            where,
            f"{what}: groups {groups}: only depthwise convolutions are grouped here",
            hint="write a depthwise conv as kind: dwconv",
        )
    if kind is not LayerKind.CONV and out_maps != in_maps:
        raise _fail(
            filename, fields["out"], f"{what}: a {kind} keeps its {in_maps} channels, out has {out_maps}"
        )
    expected = out_size(kind, in_size, kernel, stride, pad)
    if side != expected:
        raise _fail(
            filename,
            fields["out"],
            f"{what}: out is {side}x{side}, but a {kernel}x{kernel} {kind} with stride {stride} and pad "
            f"{pad} over {in_size}x{in_size} gives {expected}x{expected}",
        )
    out_buffer = number.get("out_buffer", out_maps)
    if out_buffer < out_maps:
        raise _fail(
            filename, fields["out_buffer"], f"{what}: out_buffer {out_buffer} < its {out_maps} output maps"
        )
    activation = Activation.NONE
    if "act" in fields:
        act = _text(fields["act"], filename, f"{what}.act")
        if act not in set(Activation):
            raise _fail(
                filename,
                fields["act"],
                f"{what}: unknown act {act!r}",
                hint=f"known: {', '.join(Activation)}",
            )
        activation = Activation(act)
    return Layer(
        name, kind, in_maps, in_size, out_maps, side, kernel, stride, out_buffer, pad, sources, activation
    )


def _sources(
    node: Node | None, layer: Node, filename: str, what: str, kind: LayerKind, previous: str
) -> tuple[str, ...]:
    """`from`: a name, a list of two for an add, or absent (the previous layer)."""
    if node is None:
        if kind is LayerKind.ADD:
            raise _fail(filename, layer, f"{what}: an add needs from: [A, B] (the two tensors it sums)")
        return (previous,)
    if isinstance(node, SequenceNode):
        names = tuple(_text(item, filename, f"{what}.from") for item in node.value)
    else:
        names = (_text(node, filename, f"{what}.from"),)
    wanted = 2 if kind is LayerKind.ADD else 1
    if len(names) != wanted:
        raise _fail(filename, node, f"{what}: a {kind} reads {wanted} tensor(s), from names {len(names)}")
    return names


def _check_source(
    node: Node,
    filename: str,
    what: str,
    source: str,
    produced: dict[str, tuple[int, int]],
    shape: tuple[int, int],
) -> None:
    if source not in produced:
        raise _fail(
            filename,
            node,
            f"{what}: from {source!r}: no earlier layer has that name",
            hint="layers read earlier layers",
        )
    maps, side = produced[source]
    if (maps, side) != shape:
        raise _fail(
            filename,
            node,
            f"{what}: in is {shape[0]}x{shape[1]}x{shape[1]}, but {source} writes {maps}x{side}x{side}",
        )
