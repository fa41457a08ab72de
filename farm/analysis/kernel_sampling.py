"""Which kernel configurations to measure on a phone so per-kernel-type predictors cover the space
networks use (nn-Meter, Zhang et al. MobiSys 2021, section 4: sample from the distribution of
configurations in a model zoo, then sample more finely where the predictor errs most). Pure.

The prior is the layers of the shipped networks (farm/analysis/networks) at the input sizes given:
each draw takes one of their configurations of the kind and moves its channels and side by a
random factor (log-uniform, up to 2x for channels, 1.6x for the side), keeping its window, stride
and padding (the program's kernels are specialised on those). A draw that is a network layer's
own configuration is drawn again, so no network layer is measured as such and predicting a
network tests the predictor on configurations it never saw.

`refine` is the adaptive second round: around the sampled configurations whose held-out error was
largest, draws with half the spread.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from farm.analysis.cnn_descriptor import NETWORKS, Network, network
from farm.analysis.kernel_predictor import KernelConfig, KernelKind, kernel_of_layer

MAX_GFLOP = 1.0  # a conv over this is scaled down in channels: one run stays seconds on a phone
_SPREAD_CHANNELS = 1.0  # log2: up to 2x either way
_SPREAD_SIDE = 0.7  # log2: up to 1.6x either way
_MAX_TRIES = 200
# Configurations per kind in a first round: more where the space is wider and the time larger
# (convolutions of every window and stride, pointwise over four orders of magnitude of work).
PER_KIND: dict[KernelKind, int] = {
    KernelKind.CONV: 32,
    KernelKind.POINTWISE: 32,
    KernelKind.DWCONV: 24,
    KernelKind.MAXPOOL: 10,
    KernelKind.AVGPOOL: 10,
    KernelKind.FC: 10,
    KernelKind.ADD: 12,
}


def network_space(networks: Iterable[Network]) -> dict[KernelKind, list[KernelConfig]]:
    """The kernel configurations the networks' layers run, per kind (the sampling prior)."""
    space: dict[KernelKind, list[KernelConfig]] = {}
    for net in networks:
        for layer in net.layers:
            config = kernel_of_layer(layer)
            if config not in space.get(config.kind, []):
                space.setdefault(config.kind, []).append(config)
    return space


def _channels(value: int, rng: random.Random, spread: float) -> int:
    if value <= 4:  # an image's 3 channels: keep it (no layer sees 1 or 7 input colours)
        return value
    moved = value * 2.0 ** rng.uniform(-spread, spread)
    return max(8, round(moved / 8.0) * 8)


def _perturb(base: KernelConfig, rng: random.Random, spread: float) -> KernelConfig:
    maps = _channels(base.in_maps, rng, _SPREAD_CHANNELS * spread)
    kind = base.kind
    if kind is KernelKind.FC or kind is KernelKind.AVGPOOL:  # a global window: its side moves too
        side = max(1, round(base.in_size * 2.0 ** rng.uniform(-_SPREAD_SIDE * spread, _SPREAD_SIDE * spread)))
    else:
        low = max(base.kernel - 2 * base.pad, 1)
        side = max(
            low, round(base.in_size * 2.0 ** rng.uniform(-_SPREAD_SIDE * spread, _SPREAD_SIDE * spread))
        )
    if kind in (KernelKind.CONV, KernelKind.POINTWISE, KernelKind.FC):
        out = _channels(base.out_maps, rng, _SPREAD_CHANNELS * spread)
    else:
        out = maps
    kernel = side if kind is KernelKind.FC else base.kernel
    config = replace(base, in_maps=maps, in_size=side, out_maps=out, kernel=kernel)
    while config.flops() > MAX_GFLOP * 1e9 and config.in_maps > 8:
        scale = math.sqrt(config.flops() / (MAX_GFLOP * 1e9))
        maps = max(8, int(config.in_maps / scale) // 8 * 8)
        out = max(8, int(config.out_maps / scale) // 8 * 8) if config.out_maps != config.in_maps else maps
        config = replace(config, in_maps=maps, out_maps=out)
    return config


def sample(
    space: dict[KernelKind, list[KernelConfig]], per_kind: Mapping[KernelKind, int], seed: int
) -> list[KernelConfig]:
    """`per_kind[kind]` configurations of every kind in `space`, none of them a prior configuration."""
    rng = random.Random(seed)
    avoid = {config for configs in space.values() for config in configs}
    chosen: list[KernelConfig] = []
    for kind in sorted(space):
        chosen += _draws(space[kind], per_kind.get(kind, 0), rng, 1.0, avoid | set(chosen))
    return chosen


def refine(
    errors: Sequence[tuple[KernelConfig, float]],
    per_kind: Mapping[KernelKind, int],
    seed: int,
    avoid: Iterable[KernelConfig] = (),
) -> list[KernelConfig]:
    """The adaptive round: per kind, `per_kind` draws around the configurations with the largest
    held-out relative error (`errors`: (sampled configuration, |predicted / measured - 1|))."""
    rng = random.Random(seed)
    taken = set(avoid) | {config for config, _ in errors}
    chosen: list[KernelConfig] = []
    for kind in sorted({config.kind for config, _ in errors}):
        ranked = sorted((e for e in errors if e[0].kind is kind), key=lambda e: -e[1])
        worst = [config for config, _ in ranked[: max(1, len(ranked) // 4)]]
        chosen += _draws(worst, per_kind.get(kind, 0), rng, 0.5, taken | set(chosen))
    return chosen


def _draws(
    bases: Sequence[KernelConfig], count: int, rng: random.Random, spread: float, avoid: set[KernelConfig]
) -> list[KernelConfig]:
    found: list[KernelConfig] = []
    for _ in range(count * _MAX_TRIES):
        if len(found) == count:
            break
        config = _perturb(rng.choice(list(bases)), rng, spread)
        if config not in avoid and config not in found:
            found.append(config)
    return found


_FACTORS = ("layer", "channels", "out_channels", "kernel", "stride", "pad", "input_size")


def sweep_lines(configs: Sequence[KernelConfig], indent: str = "  ") -> list[str]:
    """The zipped sweep of an experiment file running `configs` in the cnn program's single-layer
    mode (--layer, --channels, ...; pointwise runs as conv with kernel 1)."""
    columns: dict[str, list[object]] = {name: [] for name in _FACTORS}
    for config in configs:
        layer = "conv" if config.kind is KernelKind.POINTWISE else str(config.kind)
        values = (
            layer,
            config.in_maps,
            config.out_maps,
            config.kernel,
            config.stride,
            config.pad,
            config.in_size,
        )
        for name, value in zip(_FACTORS, values, strict=True):
            columns[name].append(value)
    return [f"{indent}{name}: [{', '.join(str(v) for v in values)}]" for name, values in columns.items()]


SHIPPED_SIZES = (224, 112)  # the prior: every shipped network at its own size and at half
QUICK_SHARE = 3  # the quick variant: every third configuration of each kind


def experiment_text(configs: Sequence[KernelConfig]) -> str:
    """experiments/kernel_sampling.yaml: `configs` on cpu and gpu, fp32, clocks pinned at max, with a
    quick variant of every QUICK_SHARE-th configuration. The file's header says how to regenerate it."""
    quick = [
        c
        for kind in sorted({c.kind for c in configs})
        for c in [c for c in configs if c.kind is kind][::QUICK_SHARE]
    ]
    lines = [
        "# nn-Meter (Zhang et al., MobiSys 2021): a network's latency is the sum of its kernels', so sample",
        "# kernel configurations per kernel type on each phone and learn a predictor per type, instead of",
        "# running every network. The cnn program's single-layer mode (--model=layer) runs one kernel of a",
        "# configuration; zip keeps each configuration's columns together. Written by",
        "#   .venv/bin/python -m farm.analysis.kernel_sampling > experiments/kernel_sampling.yaml",
        "# (farm/analysis/kernel_sampling.py: drawn around the shipped networks' layers at 224 and 112 px,",
        "# none of them a network layer's own configuration; seeded, so the same file each time).",
        "# Fit: `farm model fit kernel_sampling`; it writes the adaptive second round (configurations",
        "# around those the predictor got most wrong held out) as an experiment to run, then fit both.",
        "# Predict: `farm model predict --model FILE --network mobilenetv2`.",
        "name: kernel_sampling",
        "description: Sampled kernel configurations per kernel type (single-layer cnn runs) for learned"
        " latency predictors",
        "",
        "benchmark:",
        "  program: cnn",
        "  params: {model: layer}",
        "",
        "sweep:",
        *sweep_lines(configs),
        "  backend: [cpu, gpu]",
        "  precision: [fp32]",
        "",
        "zip:",
        "  - [layer, channels, out_channels, kernel, stride, pad, input_size]",
        "",
        "measurement: {warmup: 1, iterations: 5, min_seconds: 0.05, max_seconds: 5, repetitions: 1}",
        "",
        "telemetry: {idle_baseline_s: 0, power: none, disable_charging: false}",
        "",
        "conditions:",
        "  # a model fitted at one pinned clock predicts another (the clock is an input of the predictor)",
        "  clocks: {mode: auto, cpu: max, gpu: max}",
        "  cooldown: {max_temp_c: 60, timeout_s: 30}",
        "  min_battery_pct: 5",
        "",
        "variants:",
        f"  # every {QUICK_SHARE}rd configuration of each kind: a few minutes on one phone",
        "  quick:",
        "    sweep:",
        *sweep_lines(quick, indent="      "),
        "      backend: [cpu, gpu]",
        "      precision: [fp32]",
        "    timeouts: {run_timeout_s: 120}",
    ]
    return "\n".join(lines) + "\n"


def refinement_text(
    name: str, configs: Sequence[KernelConfig], first: str, backends: Sequence[str], precisions: Sequence[str]
) -> str:
    """The adaptive round's experiment: `configs` on the backends and precisions `first` sampled
    (clocks pinned at max where the phone allows), named `name`."""
    lines = [
        f"# The adaptive round of {first}: configurations around those its predictors got most wrong",
        f"# held out (written by `farm model fit {first} --refine`). Fit both: farm model fit {first} {name}",
        f"name: {name}",
        "description: Adaptive round of sampled kernel configurations",
        "benchmark: {program: cnn, params: {model: layer}}",
        "sweep:",
        *sweep_lines(configs),
        f"  backend: [{', '.join(backends)}]",
        f"  precision: [{', '.join(precisions)}]",
        "zip:",
        "  - [layer, channels, out_channels, kernel, stride, pad, input_size]",
        "measurement: {warmup: 1, iterations: 5, min_seconds: 0.05, max_seconds: 5, repetitions: 1}",
        "telemetry: {idle_baseline_s: 0, power: none, disable_charging: false}",
        "conditions: {clocks: {mode: auto, cpu: max, gpu: max}, cooldown: {max_temp_c: 60, timeout_s: 30}}",
    ]
    return "\n".join(lines) + "\n"


def shipped_configs(seed: int = 31) -> list[KernelConfig]:
    """The configurations of experiments/kernel_sampling.yaml."""
    return sample(network_space([network(n, s) for n in NETWORKS for s in SHIPPED_SIZES]), PER_KIND, seed)


if __name__ == "__main__":
    print(experiment_text(shipped_configs()), end="")
