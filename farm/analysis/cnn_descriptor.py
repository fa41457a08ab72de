"""CNN descriptors for the resource model: SqueezeNet v1.0 / v1.1 as a list of layers, in the order
and with the names of the cnn benchmark's `layer` events (kernels/cnn/README.md).

A convolution is a matrix multiply after im2col (Augur, Lu et al. 2017): m = output maps,
n = output pixels (H*W), k = input maps * kernel area. Pure: shapes only, no weights.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from farm.errors import ConfigError


class LayerKind(enum.StrEnum):
    CONV = "conv"
    MAXPOOL = "maxpool"
    AVGPOOL = "avgpool"  # global average (pool10)


@dataclass(frozen=True)
class Layer:
    """One layer. `out_buffer_maps` is the channel count of the buffer it writes into: the concat of
    a fire module for its two expand layers (both write into it), its own output otherwise."""

    name: str
    kind: LayerKind
    in_maps: int
    in_size: int  # square input H = W
    out_maps: int
    out_size: int
    kernel: int
    stride: int
    out_buffer_maps: int

    @property
    def gemm_mnk(self) -> tuple[int, int, int] | None:
        if self.kind is not LayerKind.CONV:
            return None
        return self.out_maps, self.out_size * self.out_size, self.in_maps * self.kernel * self.kernel

    @property
    def weight_count(self) -> int:
        if self.kind is not LayerKind.CONV:
            return 0
        return self.out_maps * self.in_maps * self.kernel * self.kernel + self.out_maps  # + bias

    @property
    def input_count(self) -> int:
        return self.in_maps * self.in_size * self.in_size

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


def _conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def _pool_out(size: int) -> int:
    # 3x3 stride 2 in ceil mode (Caffe / torchvision SqueezeNet).
    return -(-(size - 3) // 2) + 1


class _Builder:
    def __init__(self, maps: int, size: int) -> None:
        self.maps = maps
        self.size = size
        self.layers: list[Layer] = []

    def conv(self, name: str, out_maps: int, kernel: int, stride: int = 1, pad: int = 0) -> None:
        out = _conv_out(self.size, kernel, stride, pad)
        self.layers.append(
            Layer(name, LayerKind.CONV, self.maps, self.size, out_maps, out, kernel, stride, out_maps)
        )
        self.maps, self.size = out_maps, out

    def maxpool(self, name: str) -> None:
        out = _pool_out(self.size)
        self.layers.append(
            Layer(name, LayerKind.MAXPOOL, self.maps, self.size, self.maps, out, 3, 2, self.maps)
        )
        self.size = out

    def global_avgpool(self, name: str) -> None:
        self.layers.append(
            Layer(name, LayerKind.AVGPOOL, self.maps, self.size, self.maps, 1, self.size, 1, self.maps)
        )
        self.size = 1

    def fire(self, index: int, squeeze: int, expand: int) -> None:
        prefix = f"fire{index}"
        self.conv(f"{prefix}/squeeze1x1", squeeze, 1)
        size, concat = self.size, 2 * expand
        for name, kernel in (("expand1x1", 1), ("expand3x3", 3)):  # 3x3 padded by 1: same size
            self.layers.append(
                Layer(f"{prefix}/{name}", LayerKind.CONV, squeeze, size, expand, size, kernel, 1, concat)
            )
        self.maps = concat


# (squeeze, expand) of fire2 .. fire9, the same in both versions.
_FIRES: tuple[tuple[int, int], ...] = (
    (16, 64),
    (16, 64),
    (32, 128),
    (32, 128),
    (48, 192),
    (48, 192),
    (64, 256),
    (64, 256),
)


DEFAULT_INPUT_SIZE: dict[str, int] = {"squeezenet1.0": 227, "squeezenet1.1": 224}


def squeezenet(version: str, input_size: int | None = None) -> Network:
    """SqueezeNet v1.0 (227x227, conv1 96 maps 7x7/2, pools after conv1, fire4, fire8) or v1.1
    (224x224, conv1 64 maps 3x3/2, pools after conv1, fire3, fire5); `input_size` another square
    input (the cnn program's --input-size: the same layers and maps, other pixel counts)."""
    if version not in ("1.0", "1.1"):
        raise ConfigError(f"no SqueezeNet version {version!r}", hint="known: 1.0, 1.1")
    size = input_size or DEFAULT_INPUT_SIZE[f"squeezenet{version}"]
    if version == "1.0":
        build, conv1, pools = _Builder(3, size), (96, 7), (4, 8)
    else:
        build, conv1, pools = _Builder(3, size), (64, 3), (3, 5)
    build.conv("conv1", conv1[0], conv1[1], stride=2)
    build.maxpool("pool1")
    for index, (squeeze, expand) in enumerate(_FIRES, start=2):
        build.fire(index, squeeze, expand)
        if index in pools:
            build.maxpool(f"pool{index}")
    build.conv("conv10", 1000, 1)
    build.global_avgpool("pool10")
    return Network(f"squeezenet{version}", 3, build.layers[0].in_size, tuple(build.layers))


NETWORKS: tuple[str, ...] = ("squeezenet1.0", "squeezenet1.1")


def network(name: str, input_size: int | None = None) -> Network:
    """A built-in descriptor by name (at `input_size` pixels square, default the network's own);
    ConfigError naming the known ones otherwise."""
    if name not in NETWORKS:
        raise ConfigError(f"unknown network {name!r}", hint=f"known: {', '.join(NETWORKS)}")
    return squeezenet(name.removeprefix("squeezenet"), input_size)
