"""The output adapters by name: the checked contract between an experiment's `output:` and a parser.

adapter = adapter_for(AdapterName.REGEX, regex=spec)   # ValueError on a missing/extra spec
output = adapter.parse(stdout, stderr)                # ProgramOutput, or OutputError
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from farm.adapters.jsonl import parse_jsonl
from farm.adapters.llama_bench import parse_llama_bench
from farm.adapters.output import ProgramOutput
from farm.adapters.regex import RegexSpec, parse_regex
from farm.adapters.tflite import parse_tflite


class AdapterName(StrEnum):
    JSONL = "jsonl"  # farm's own event contract
    TFLITE = "tflite"  # TensorFlow Lite benchmark_model's text
    REGEX = "regex"  # named groups of the user's patterns
    LLAMA_BENCH = "llama_bench"  # llama.cpp's llama-bench -o jsonl (farm.adapters.llama_bench)


@dataclass(frozen=True)
class OutputAdapter:
    """One configured adapter: `parse(stdout, stderr)` is pure and never returns an empty result."""

    name: AdapterName
    parse: Callable[[str, str], ProgramOutput]


def adapter_for(name: AdapterName, *, regex: RegexSpec | None = None) -> OutputAdapter:
    if name is AdapterName.REGEX:
        if regex is None:
            raise ValueError("the regex adapter needs a RegexSpec (patterns and metrics)")
        spec = regex
        return OutputAdapter(name, lambda stdout, stderr: parse_regex(spec, stdout, stderr))
    if regex is not None:
        raise ValueError(f"the {name.value} adapter takes no patterns or metrics")
    parsers = {AdapterName.JSONL: parse_jsonl, AdapterName.TFLITE: parse_tflite}
    return OutputAdapter(name, parsers.get(name, parse_llama_bench))
