"""The shipped network descriptors (farm/analysis/networks/*.yaml) against the cnn program's own
layer table: the file at the program's default input size, and the descriptor resized in Python
at other sizes against the program's listing at those sizes, so neither can drift from what runs."""

from __future__ import annotations

import json
import subprocess

import pytest

from farm.analysis.cnn_descriptor import DEFAULT_INPUT_SIZE, NETWORKS, network, parse_descriptor
from farm.analysis.memory_model import MIB, network_footprint
from tests.integration.kernels.conftest import ROOT, build_program


def listing(name: str, input_size: int) -> str:
    argv = [str(build_program("cnn")), f"--model={name}", f"--input-size={input_size}", "--list-layers"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout


@pytest.mark.parametrize("name", NETWORKS)
def test_shipped_file_is_the_programs_listing(name: str) -> None:
    shipped = (ROOT / "farm" / "analysis" / "networks" / f"{name}.yaml").read_text()
    assert shipped == listing(name, DEFAULT_INPUT_SIZE[name]), (
        f"regenerate: kernels/build/x86_64/cnn --model={name} --list-layers "
        f"> farm/analysis/networks/{name}.yaml"
    )


@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.parametrize("input_size", [64, 97, 160])
def test_resized_descriptor_matches_the_program_at_that_size(name: str, input_size: int) -> None:
    program = parse_descriptor(listing(name, input_size), f"cnn --model={name}")
    assert network(name, input_size) == program


@pytest.mark.parametrize("name", NETWORKS)
def test_memory_footprint_is_what_the_program_reports_it_holds(name: str) -> None:
    """The program's info event counts the weights and every tensor it allocates."""
    argv = [str(build_program("cnn")), f"--model={name}", "--input-size=64", "--backend=cpu", "--iters=1"]
    proc = subprocess.run([*argv, "--warmup=0"], capture_output=True, text=True, timeout=120, check=True)
    (info,) = [e for e in map(json.loads, proc.stdout.splitlines()) if e.get("event") == "info"]
    footprint = network_footprint(network(name, 64))
    assert footprint.weights_mib * MIB == info["weights_bytes"]
    assert footprint.feature_maps_mib * MIB == info["activations_bytes"]
