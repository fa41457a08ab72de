"""Fixtures for the adapter tests: the example external programs of kernels/examples."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from example_programs import Example, build_examples

from tests.fixtures.cross import require_toolchain


@pytest.fixture
def example() -> Callable[[str, str], Example]:
    """example("example-matmul", "arm64-v8a") -> that build (skipped without its toolchain)."""

    def make(name: str, abi: str) -> Example:
        require_toolchain(abi)
        return Example(abi, build_examples(abi) / name)

    return make
